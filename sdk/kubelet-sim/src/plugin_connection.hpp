// The kubelet's client side of one registered device plugin: the channel to
// its socket, the options it answered, and the ListAndWatch stream.
//
// Everything runs on gRPC's callback threads, with no thread per plugin: a
// node with thousands of plugins must not cost the simulator thousands of
// threads, or it, not the plugins, is what a scale test measures.
#pragma once

#include "deviceplugin/v1beta1/api.grpc.pb.h"

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>

namespace dowser::testkit {

class PluginConnection : public std::enable_shared_from_this<PluginConnection> {
 public:
  using ListHandler = std::function<void(const v1beta1::ListAndWatchResponse&)>;
  using EndHandler = std::function<void()>;
  using Dialled = std::function<void(const grpc::Status&, std::shared_ptr<PluginConnection>)>;
  // The caller's token: every dial, connection and stream holds a copy and
  // drops it only after its channel and calls, so the last copy going tells
  // the caller that nothing of theirs is left to be freed on a gRPC thread.
  using Token = std::shared_ptr<const void>;

  // Dials the plugin's socket and asks for its options, as the kubelet does
  // inside Register, waiting up to `timeout` for the socket to accept. Calls
  // `done` once, from a gRPC thread, with the connection or the error.
  // Returns the call's context, to cancel it.
  static std::shared_ptr<grpc::ClientContext> dial(const std::filesystem::path& socket,
                                                   std::chrono::milliseconds timeout, Token token,
                                                   Dialled done);

  ~PluginConnection();
  PluginConnection(const PluginConnection&) = delete;
  PluginConnection& operator=(const PluginConnection&) = delete;

  const v1beta1::DevicePluginOptions& options() const { return options_; }
  v1beta1::DevicePlugin::Stub& stub() { return *stub_; }

  // Opens ListAndWatch: on_list for every message, then on_end once the
  // stream is over, whoever ended it. Both run on gRPC threads, one at a time.
  void watch(ListHandler on_list, EndHandler on_end);

  // Ends the stream without waiting; on_end follows.
  void close();

 private:
  class ListReader;
  struct Dial;

  PluginConnection(Token token, std::shared_ptr<grpc::Channel> channel,
                   v1beta1::DevicePluginOptions options);

  Token token_;  // first, so it goes last
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  v1beta1::DevicePluginOptions options_;
  std::mutex mutex_;                                     // guards stream_context_ and closed_
  std::shared_ptr<grpc::ClientContext> stream_context_;  // of the ListAndWatch stream
  bool closed_ = false;
};

}  // namespace dowser::testkit
