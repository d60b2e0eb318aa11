#include "plugin_connection.hpp"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <utility>

namespace dowser::testkit {
namespace {

std::shared_ptr<grpc::Channel> unix_channel(const std::filesystem::path& socket) {
  grpc::ChannelArguments args;
  // A plugin re-created on the same path must not inherit another channel's
  // connection state through gRPC's global subchannel pool.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials(),
                                   args);
}

}  // namespace

grpc::Status PluginConnection::dial(const std::filesystem::path& socket,
                                    std::chrono::milliseconds timeout,
                                    std::unique_ptr<PluginConnection>& connection) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  auto channel = unix_channel(socket);
  if (!channel->WaitForConnected(deadline)) {
    return {grpc::StatusCode::UNAVAILABLE, "cannot connect to device plugin at " + socket.string()};
  }
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(deadline);
  v1beta1::DevicePluginOptions options;
  grpc::Status status = stub->GetDevicePluginOptions(&context, v1beta1::Empty{}, &options);
  if (!status.ok()) {
    return {status.error_code(), "GetDevicePluginOptions failed: " + status.error_message()};
  }
  connection.reset(new PluginConnection(std::move(channel), options));
  return grpc::Status::OK;
}

PluginConnection::PluginConnection(std::shared_ptr<grpc::Channel> channel,
                                   v1beta1::DevicePluginOptions options)
    : channel_(std::move(channel)),
      stub_(v1beta1::DevicePlugin::NewStub(channel_)),
      options_(std::move(options)) {}

PluginConnection::~PluginConnection() { close(); }

void PluginConnection::watch(ListHandler on_list, EndHandler on_end) {
  watcher_ = std::thread([this, on_list = std::move(on_list), on_end = std::move(on_end)] {
    read_lists(on_list, on_end);
  });
}

void PluginConnection::read_lists(const ListHandler& on_list, const EndHandler& on_end) {
  // Like the kubelet's stream: no deadline, it lasts as long as the plugin.
  auto reader = stub_->ListAndWatch(&watch_context_, v1beta1::Empty{});
  v1beta1::ListAndWatchResponse list;
  while (reader->Read(&list)) on_list(list);
  reader->Finish();
  on_end();
}

void PluginConnection::close() {
  std::call_once(close_once_, [this] {
    watch_context_.TryCancel();
    if (watcher_.joinable()) watcher_.join();
  });
}

}  // namespace dowser::testkit
