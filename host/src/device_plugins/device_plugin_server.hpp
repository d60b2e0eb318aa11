// Private to device_plugins: one plugin's gRPC server.
#pragma once

#include "device_plugins.hpp"

#include "deviceplugin/v1beta1/api.grpc.pb.h"

#include <grpcpp/server.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>

namespace dowser::plugins {

class ListStream;
class DevicePluginService;

// A list as sent: one message shared by every stream that sends it.
using SharedList = std::shared_ptr<const v1beta1::ListAndWatchResponse>;

// The live ListAndWatch streams of one server (touched from gRPC threads).
class StreamHub {
 public:
  explicit StreamHub(std::shared_ptr<std::atomic<uint64_t>> lists_sent)
      : lists_sent_(std::move(lists_sent)) {}
  // Registers a new stream (ends it at once if the hub is closed). A
  // registered stream lives until remove(), so the hub may push to it.
  void add(ListStream* stream);
  // The first list of a stream, if it is still there: the kubelet may have
  // gone (and the stream with it) before the list was computed.
  void send_to(ListStream* stream, const SharedList& list);
  void remove(ListStream* stream);
  void broadcast(const SharedList& list);
  void close();  // ends every stream and refuses new ones
  void count_list() { ++*lists_sent_; }

 private:
  std::mutex mutex_;
  std::set<ListStream*> streams_;
  bool closed_ = false;
  std::shared_ptr<std::atomic<uint64_t>> lists_sent_;
};

// Shared by the server and work it posted to the core: backend is cleared
// (on the core thread) when the plugin stops, so late work finds nothing.
struct ServerShared {
  std::string resource_name;
  PluginBackend* backend = nullptr;
  std::shared_ptr<StreamHub> hub;
  std::shared_ptr<std::atomic<uint64_t>> lists_sent = std::make_shared<std::atomic<uint64_t>>(0);
};

class DevicePluginServer {
 public:
  DevicePluginServer(boost::asio::io_context& core, std::string resource_name,
                     std::filesystem::path directory, PluginBackend& backend);
  ~DevicePluginServer();

  // (Re)starts serving on a fresh socket name; the old socket goes.
  void serve();
  // Sends the backend's list to every stream if it differs from the last.
  void publish();
  void stop();

  const std::string& resource_name() const { return shared_->resource_name; }
  const std::string& socket_name() const { return socket_name_; }
  std::filesystem::path socket_path() const;
  uint64_t lists_sent() const;

 private:
  void stop_server();

  boost::asio::io_context& core_;
  std::filesystem::path directory_;
  std::shared_ptr<ServerShared> shared_;
  std::string socket_name_;
  std::unique_ptr<DevicePluginService> service_;
  std::unique_ptr<grpc::Server> server_;
  DeviceList last_sent_;
};

}  // namespace dowser::plugins
