// The kubelet's client side of one registered device plugin: the channel to
// its socket, the options it answered, and the ListAndWatch stream.
#pragma once

#include "deviceplugin/v1beta1/api.grpc.pb.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace dowser::testkit {

class PluginConnection {
 public:
  using ListHandler = std::function<void(const v1beta1::ListAndWatchResponse&)>;
  using EndHandler = std::function<void()>;

  // Dials the plugin's socket and asks for its options, as the kubelet does
  // inside Register. On failure `connection` stays empty.
  static grpc::Status dial(const std::filesystem::path& socket, std::chrono::milliseconds timeout,
                           std::unique_ptr<PluginConnection>& connection);

  ~PluginConnection();
  PluginConnection(const PluginConnection&) = delete;
  PluginConnection& operator=(const PluginConnection&) = delete;

  const v1beta1::DevicePluginOptions& options() const { return options_; }
  v1beta1::DevicePlugin::Stub& stub() { return *stub_; }

  // Opens ListAndWatch on its own thread: on_list for every message, then
  // on_end once the stream is over, whoever ended it.
  void watch(ListHandler on_list, EndHandler on_end);

  // Ends the stream and waits for the watch thread. Must not be called from
  // a handler or with a lock a handler takes.
  void close();

 private:
  PluginConnection(std::shared_ptr<grpc::Channel> channel, v1beta1::DevicePluginOptions options);
  void read_lists(const ListHandler& on_list, const EndHandler& on_end);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  v1beta1::DevicePluginOptions options_;
  grpc::ClientContext watch_context_;
  std::once_flag close_once_;
  std::thread watcher_;
};

}  // namespace dowser::testkit
