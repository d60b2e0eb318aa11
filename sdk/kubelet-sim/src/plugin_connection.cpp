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

// One ListAndWatch stream; it owns itself until gRPC says it is done.
class PluginConnection::ListReader final
    : public grpc::ClientReadReactor<v1beta1::ListAndWatchResponse> {
 public:
  ListReader(std::shared_ptr<PluginConnection> connection,
             std::shared_ptr<grpc::ClientContext> context, ListHandler on_list, EndHandler on_end)
      : connection_(std::move(connection)),
        context_(std::move(context)),
        on_list_(std::move(on_list)),
        on_end_(std::move(on_end)) {}

  void start() {
    // Like the kubelet's stream: no deadline, it lasts as long as the plugin.
    connection_->stub_->async()->ListAndWatch(context_.get(), &request_, this);
    StartRead(&list_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    on_list_(list_);
    StartRead(&list_);
  }

  void OnDone(const grpc::Status&) override {
    on_end_();
    delete this;
  }

 private:
  std::shared_ptr<PluginConnection> connection_;  // and so its channel and token; goes last
  std::shared_ptr<grpc::ClientContext> context_;  // shared with close()
  ListHandler on_list_;
  EndHandler on_end_;
  v1beta1::Empty request_;
  v1beta1::ListAndWatchResponse list_;
};

// A GetDevicePluginOptions call in flight, with what it needs to live.
struct PluginConnection::Dial {
  Token token;  // first, so it goes last
  std::filesystem::path socket;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
  grpc::ClientContext context;
  v1beta1::Empty request;
  v1beta1::DevicePluginOptions options;
  Dialled done;
};

std::shared_ptr<grpc::ClientContext> PluginConnection::dial(const std::filesystem::path& socket,
                                                            std::chrono::milliseconds timeout,
                                                            Token token, Dialled done) {
  auto call = std::make_shared<Dial>();
  call->token = std::move(token);
  call->socket = socket;
  call->channel = unix_channel(socket);
  call->stub = v1beta1::DevicePlugin::NewStub(call->channel);
  call->done = std::move(done);
  // Waiting for the socket to accept, then asking, within the deadline: what
  // the kubelet's blocking dial followed by GetDevicePluginOptions amounts to.
  call->context.set_wait_for_ready(true);
  call->context.set_deadline(std::chrono::system_clock::now() + timeout);
  call->stub->async()->GetDevicePluginOptions(
      &call->context, &call->request, &call->options, [call](const grpc::Status& status) {
        if (status.ok()) {
          call->done(status, std::shared_ptr<PluginConnection>(
                                 new PluginConnection(call->token, call->channel, call->options)));
        } else if (call->channel->GetState(false) != GRPC_CHANNEL_READY) {
          call->done({grpc::StatusCode::UNAVAILABLE,
                      "cannot connect to device plugin at " + call->socket.string()},
                     nullptr);
        } else {
          call->done(
              {status.error_code(), "GetDevicePluginOptions failed: " + status.error_message()},
              nullptr);
        }
      });
  return {call, &call->context};
}

PluginConnection::PluginConnection(Token token, std::shared_ptr<grpc::Channel> channel,
                                   v1beta1::DevicePluginOptions options)
    : token_(std::move(token)),
      channel_(std::move(channel)),
      stub_(v1beta1::DevicePlugin::NewStub(channel_)),
      options_(std::move(options)) {}

PluginConnection::~PluginConnection() = default;

void PluginConnection::watch(ListHandler on_list, EndHandler on_end) {
  auto context = std::make_shared<grpc::ClientContext>();
  bool closed = false;
  {
    std::lock_guard lock(mutex_);
    stream_context_ = context;
    closed = closed_;
  }
  // A context cancelled before its call starts cancels the call once it does.
  if (closed) context->TryCancel();
  (new ListReader(shared_from_this(), context, std::move(on_list), std::move(on_end)))->start();
}

void PluginConnection::close() {
  std::shared_ptr<grpc::ClientContext> context;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    context = stream_context_;
  }
  // Not under mutex_: gRPC may run the stream's end right here. Cancelling a
  // stream that is already over does nothing.
  if (context) context->TryCancel();
}

}  // namespace dowser::testkit
