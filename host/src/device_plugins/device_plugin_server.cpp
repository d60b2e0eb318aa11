// One plugin's gRPC server: the DevicePlugin service over a unix socket,
// with ListAndWatch streams that always carry the newest full list.
#include "device_plugin_server.hpp"
#include "thread_names.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <set>
#include <utility>

namespace dowser::plugins {
namespace {

// A socket file name nobody used before: the kubelet keys clients by
// (resource, socket path), and re-registering on one path is unsupported.
// The time and counter make it unique; the resource name, there for people,
// is cut short where the whole path would not fit a unix socket address.
std::string fresh_socket_name(const std::string& resource_name,
                              const std::filesystem::path& directory) {
  static std::atomic<uint64_t> counter{0};
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  const std::string unique = "-" + std::to_string(ms) + "-" + std::to_string(counter++) + ".sock";
  std::string base;
  for (char c : resource_name) base += (c == '/' ? '_' : c);
  const size_t used = (directory / unique).string().size();
  // At least one character: a directory too long for any name fails to bind, and says so.
  base.resize(std::min(base.size(), std::max<size_t>(1, kMaxPath - std::min(used, kMaxPath))));
  return base + unique;
}

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

SharedList to_list(const std::vector<capacity::PluginDevice>& devices) {
  const std::string bytes = serialized_device_list(devices);
  grpc::Slice slice(bytes);
  return std::make_shared<const grpc::ByteBuffer>(&slice, 1);
}

// The tag of a length-delimited field (strings and messages) in protobuf's
// wire format: (field number << 3) | wire type 2.
constexpr uint32_t length_delimited_tag(int field_number) {
  return (static_cast<uint32_t>(field_number) << 3) | 2U;
}

uint32_t field_size(const std::string& value) {
  using google::protobuf::io::CodedOutputStream;
  return 1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(value.size())) +
         static_cast<uint32_t>(value.size());
}

void write_field(google::protobuf::io::CodedOutputStream& out, uint32_t tag,
                 const std::string& value) {
  out.WriteTag(tag);
  out.WriteVarint32(static_cast<uint32_t>(value.size()));
  out.WriteString(value);
}

}  // namespace

// Every field number here is below 16, so each tag is one byte (field_size).
std::string serialized_device_list(const std::vector<capacity::PluginDevice>& devices) {
  static const std::string healthy = "Healthy";
  static const std::string unhealthy = "Unhealthy";
  constexpr uint32_t device_tag =
      length_delimited_tag(v1beta1::ListAndWatchResponse::kDevicesFieldNumber);
  constexpr uint32_t id_tag = length_delimited_tag(v1beta1::Device::kIDFieldNumber);
  constexpr uint32_t health_tag = length_delimited_tag(v1beta1::Device::kHealthFieldNumber);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    for (const auto& device : devices) {
      const std::string& health = device.healthy ? healthy : unhealthy;
      out.WriteTag(device_tag);
      out.WriteVarint32(field_size(device.id) + field_size(health));
      write_field(out, id_tag, device.id);
      write_field(out, health_tag, health);
    }
  }  // the stream trims the string to what was written
  return bytes;
}

std::optional<sockaddr_un> unix_socket_address(const std::filesystem::path& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string text = path.string();
  if (text.size() >= sizeof address.sun_path) return std::nullopt;
  std::copy(text.begin(), text.end(), address.sun_path);
  return address;
}

bool is_plugin_socket_name(std::string_view name) {
  constexpr std::string_view kSuffix = ".sock";
  if (name.size() <= kSuffix.size() || name.substr(name.size() - kSuffix.size()) != kSuffix)
    return false;
  name.remove_suffix(kSuffix.size());
  const size_t counter = name.rfind('-');
  if (counter == std::string_view::npos || !all_digits(name.substr(counter + 1))) return false;
  name = name.substr(0, counter);
  const size_t ms = name.rfind('-');
  return ms != std::string_view::npos && ms > 0 && all_digits(name.substr(ms + 1));
}

// ---- ListAndWatch streams ------------------------------------------------------

// Streams of one server. Writes are coalesced: while one is in flight only
// the newest list waits, so a slow kubelet never sees stale lists queue up.
class ListStream : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit ListStream(std::shared_ptr<StreamHub> hub) : hub_(std::move(hub)) {}

  void push(const SharedList& list) {
    std::lock_guard lock(mutex_);
    if (ending_) return;
    if (writing_) {
      pending_ = list;
      return;
    }
    start_write(list);
  }

  void end() {
    std::lock_guard lock(mutex_);
    if (ending_) return;
    ending_ = true;
    if (!writing_) Finish(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mutex_);
    writing_ = false;
    if (!ok) {
      ending_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream write failed"));
      return;
    }
    if (ending_) {
      Finish(grpc::Status::OK);
    } else if (pending_) {
      start_write(std::exchange(pending_, nullptr));
    }
  }

  void OnCancel() override { end(); }

  void OnDone() override {
    hub_->remove(this);
    delete this;
  }

 private:
  void start_write(SharedList list) {
    current_ = std::move(list);  // kept until OnWriteDone
    writing_ = true;
    StartWrite(current_.get());
    hub_->count_list();
  }

  std::shared_ptr<StreamHub> hub_;
  std::mutex mutex_;
  SharedList current_;
  SharedList pending_;  // the newest list while one is being written
  bool writing_ = false;
  bool ending_ = false;
};

WorkerThread::WorkerThread(AtExit at_exit, std::string name)
    : at_exit_(at_exit),
      work_(boost::asio::make_work_guard(context_)),
      thread_([this, name = std::move(name)] {
        name_this_thread(name);
        context_.run();
      }) {}

WorkerThread::~WorkerThread() {
  if (at_exit_ == AtExit::drop_queued) {
    context_.stop();
  } else {
    work_.reset();  // run() returns once the queue is empty
  }
  thread_.join();
}

void StreamHub::add(ListStream* stream) {
  std::lock_guard lock(mutex_);
  if (closed_) {
    stream->end();
    return;
  }
  streams_.insert(stream);
  if (sent_) stream->push(sent_);  // a newer list, if offered, follows
}

void StreamHub::remove(ListStream* stream) {
  std::lock_guard lock(mutex_);
  streams_.erase(stream);
}

void StreamHub::offer(DeviceList devices, ListDelivery delivery) {
  std::lock_guard lock(mutex_);
  newest_ = std::move(devices);
  if (can_send_here(delivery)) {
    send(to_list(*std::exchange(newest_, nullptr)));
    return;
  }
  post_send();
}

// A short list costs less to build and write here than waking the
// publisher's thread (which, on a busy node, must first get a core): a new
// device of a small Configuration reaches the kubelet one hand-off sooner.
// Not while the publisher has an older list in hand, which must not follow
// this one, nor while an Allocate holds the lists.
bool StreamHub::can_send_here(ListDelivery delivery) const {
  // 256 devices take about 15 us to build and encode here: what waking
  // another thread costs at best (it costs far more when that core sleeps).
  constexpr size_t kShortList = 256;
  return delivery == ListDelivery::prompt && newest_->size() <= kShortList && !send_posted_ &&
         !building_ && allocates_open_ == 0;
}

void StreamHub::hold_lists() {
  std::lock_guard lock(mutex_);
  ++allocates_open_;
}

void StreamHub::release_lists() {
  std::lock_guard lock(mutex_);
  --allocates_open_;
  post_send();
}

void StreamHub::post_send() {
  if (send_posted_ || allocates_open_ > 0 || !newest_) return;
  send_posted_ = true;
  boost::asio::post(publisher_.context(), [hub = shared_from_this()] { hub->send_newest(); });
}

void StreamHub::send_newest() {
  DeviceList devices;
  {
    std::lock_guard lock(mutex_);
    send_posted_ = false;
    devices = std::exchange(newest_, nullptr);
    building_ = true;
  }
  SharedList list = to_list(*devices);  // unlocked: offer() need not wait for it
  std::lock_guard lock(mutex_);
  building_ = false;
  send(std::move(list));
}

void StreamHub::send(SharedList list) {
  if (closed_) return;
  sent_ = std::move(list);
  for (auto* stream : streams_) stream->push(sent_);
}

void StreamHub::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  for (auto* stream : streams_) stream->end();
}

// ---- the service ---------------------------------------------------------------

// An Allocate call, holding its plugin's lists back until it is done.
class AllocateReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit AllocateReactor(std::shared_ptr<StreamHub> hub) : hub_(std::move(hub)) {
    hub_->hold_lists();
  }
  void OnDone() override {
    hub_->release_lists();
    delete this;
  }

 private:
  std::shared_ptr<StreamHub> hub_;
};

// gRPC threads call in; the work runs on the core thread, which answers.
// ListAndWatch is raw: its lists are written as already serialized.
class DevicePluginService : public v1beta1::DevicePlugin::WithRawCallbackMethod_ListAndWatch<
                                v1beta1::DevicePlugin::CallbackService> {
 public:
  // hub: this server's streams. Its own, not read from shared: serving anew
  // makes another hub while this server's calls may still run.
  DevicePluginService(boost::asio::io_context& core, std::shared_ptr<ServerShared> shared,
                      std::shared_ptr<StreamHub> hub)
      : core_(core), shared_(std::move(shared)), hub_(std::move(hub)) {}

  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* context,
                                                   const v1beta1::Empty*,
                                                   v1beta1::DevicePluginOptions* options) override {
    options->set_pre_start_required(false);
    options->set_get_preferred_allocation_available(true);
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* ListAndWatch(grpc::CallbackServerContext*,
                                                           const grpc::ByteBuffer*) override {
    // A new stream (the kubelet re-connected) gets the full list at once;
    // registered, so that a stop ends it.
    auto* stream = new ListStream(hub_);
    hub_->add(stream);
    return stream;
  }

  grpc::ServerUnaryReactor* GetPreferredAllocation(
      grpc::CallbackServerContext* context, const v1beta1::PreferredAllocationRequest* request,
      v1beta1::PreferredAllocationResponse* response) override {
    auto* reactor = context->DefaultReactor();
    on_core(
        [shared = shared_, request, response, reactor] {
          shared->backend->preferred_allocation(*request, *response);
          reactor->Finish(grpc::Status::OK);
        },
        [reactor] { reactor->Finish(stopping()); });
    return reactor;
  }

  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext*,
                                     const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* response) override {
    auto* reactor = new AllocateReactor(hub_);
    const auto received = std::chrono::steady_clock::now();
    on_core(
        [shared = shared_, request, response, reactor, received] {
          const auto started = std::chrono::steady_clock::now();
          grpc::Status status = grpc::Status::OK;
          try {
            shared->backend->allocate(*request, *response);
          } catch (const capacity::AllocationError& e) {
            // A store that failed is not the pool saying no: say which.
            const bool failed = dynamic_cast<const capacity::AllocationStoreError*>(&e) != nullptr;
            spdlog::warn("{}: Allocate {}: {}", shared->resource_name,
                         failed ? "failed" : "refused", e.what());
            status = grpc::Status(grpc::StatusCode::UNKNOWN, e.what());
          }
          const auto decided = std::chrono::steady_clock::now();
          reactor->Finish(status);
          log_allocate_times(shared->resource_name, status, {received, started, decided});
        },
        [reactor] { reactor->Finish(stopping()); });
    return reactor;
  }

  grpc::ServerUnaryReactor* PreStartContainer(grpc::CallbackServerContext* context,
                                              const v1beta1::PreStartContainerRequest*,
                                              v1beta1::PreStartContainerResponse*) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);  // not required (pre_start_required is false)
    return reactor;
  }

 private:
  // When an Allocate call reached gRPC's handler, the core thread began it,
  // and its claims were written (or it was refused).
  struct AllocateTimes {
    std::chrono::steady_clock::time_point received, started, decided;
  };

  // Where one call's time in dowserd went, for whoever looks into slow pod
  // starts (and bench/dowser-bench --allocate-split, which parses it). When
  // the call reached the handler is given on the monotonic clock, which every
  // process on the machine shares (outside time namespaces of their own): a
  // client that noted when it sent the call can tell how long the call took
  // to arrive and the answer to come back.
  static void log_allocate_times(const std::string& resource_name, const grpc::Status& status,
                                 const AllocateTimes& times) {
    if (!spdlog::should_log(spdlog::level::debug)) return;
    auto micros = [](auto from, auto to) {
      return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
    };
    const auto received_at =
        std::chrono::duration<double>(times.received.time_since_epoch()).count();
    spdlog::debug(
        "{}: Allocate {}: {} us waiting for the core thread, {} us claiming, {} us handing the "
        "answer to gRPC (the call reached the handler at {:.6f} s, monotonic clock)",
        resource_name, status.ok() ? "granted" : "refused", micros(times.received, times.started),
        micros(times.started, times.decided),
        micros(times.decided, std::chrono::steady_clock::now()), received_at);
  }

  static grpc::Status stopping() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the device plugin is stopping");
  }

  // Runs work on the core thread unless the plugin stops first: then gone()
  // answers the call, from whichever thread stops it or calls.
  template <typename Work, typename Gone>
  void on_core(Work work, Gone gone) {
    const auto id = shared_->waiting.add(std::move(gone));
    if (!id) return;
    boost::asio::post(core_, [shared = shared_, work = std::move(work), id = *id] {
      if (shared->waiting.take(id)) work();
    });
  }

  boost::asio::io_context& core_;
  std::shared_ptr<ServerShared> shared_;
  std::shared_ptr<StreamHub> hub_;
};

// ---- the server ------------------------------------------------------------------

namespace {

// Why a unix socket cannot be bound at path (gRPC logs the errno only on
// its own stderr lines): binds one there and says what the kernel said.
std::string why_not_bindable(const std::filesystem::path& path) {
  const auto address = unix_socket_address(path);
  if (!address) return "the path is too long for a unix socket";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  const bool bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof *address) == 0;
  const int bind_error = errno;
  ::close(fd);
  if (!bound) return std::strerror(bind_error);
  ::unlink(path.c_str());
  return "gRPC refused it, though a socket can be bound there";
}

// Binds serving's socket and starts its server; why not, if it cannot. The
// kubelet directory is not made here: one deleted is the kubelet's to make
// again, and the manager serves only in the one it took up.
std::string start_server(ServingSocket& serving) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + serving.path.string(), grpc::InsecureServerCredentials());
  builder.RegisterService(serving.service.get());
  // No keepalive pings (gRPC's server default: every 2 hours): on a unix
  // socket the kernel reports a dead peer at once, and each connection's
  // keepalive timer keeps gRPC's timer thread busy. With 5000 plugins,
  // dowserd's idle CPU is about 40 % lower without them.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, std::numeric_limits<int>::max());
  serving.server = builder.BuildAndStart();
  if (!serving.server)
    return "cannot listen on " + serving.path.string() + ": " + why_not_bindable(serving.path);
  // Only the kubelet (root) may talk to the plugin.
  if (::chmod(serving.path.c_str(), 0600) != 0)
    spdlog::warn("cannot chmod {} to 0600: {}", serving.path.string(), std::strerror(errno));
  return "";
}

}  // namespace

void ServerLifecycle::start(std::shared_ptr<ServingSocket> serving,
                            std::function<void(const std::string& error)> done) {
  boost::asio::post(context(), [serving = std::move(serving), done = std::move(done)] {
    if (serving->retired) return;  // stopped before its turn: nothing to build
    done(start_server(*serving));
  });
}

void ServerLifecycle::retire(std::shared_ptr<ServingSocket> serving) {
  boost::asio::post(context(), [serving = std::move(serving)] {
    if (!serving->server) return;
    serving->server->Shutdown(std::chrono::system_clock::now());
    serving->server.reset();  // before the service it calls
    std::error_code ignored;  // bound after the core thread removed it, if stopped while starting
    std::filesystem::remove(serving->path, ignored);
  });
}

DevicePluginServer::DevicePluginServer(boost::asio::io_context& core, PluginThreads& threads,
                                       std::string resource_name, std::filesystem::path directory,
                                       PluginBackend& backend)
    : core_(core),
      threads_(threads),
      directory_(std::move(directory)),
      shared_(std::make_shared<ServerShared>()) {
  shared_->resource_name = std::move(resource_name);
  shared_->backend = &backend;
}

DevicePluginServer::~DevicePluginServer() { stop(); }

void DevicePluginServer::serve(Ready ready) {
  stop_serving();
  socket_name_ = fresh_socket_name(shared_->resource_name, directory_);
  shared_->hub = std::make_shared<StreamHub>(threads_.publisher, shared_->lists_sent);
  serving_ = std::make_shared<ServingSocket>();
  serving_->path = socket_path();
  serving_->service = std::make_unique<DevicePluginService>(core_, shared_, shared_->hub);
  state_ = State::starting;
  auto started = [this, serving = serving_, ready = std::move(ready)](const std::string& error) {
    if (serving->retired) return;  // stopped (or served anew), maybe gone
    state_ = error.empty() ? State::serving : State::failed;
    ready(error);
  };
  threads_.lifecycle.start(
      serving_, [&core = core_, started = std::move(started)](const std::string& error) mutable {
        boost::asio::post(core, [started = std::move(started), error] { started(error); });
      });
  last_sent_.reset();
  publish();  // so that the first stream gets a list without asking the core
}

void DevicePluginServer::publish(ListDelivery delivery) {
  if (!shared_->hub) return;
  auto devices = shared_->backend->devices();
  if (last_sent_ && (last_sent_ == devices || *last_sent_ == *devices)) return;
  last_sent_ = devices;
  shared_->hub->offer(std::move(devices), delivery);
}

void DevicePluginServer::stop_serving() {
  if (!serving_) return;
  shared_->hub->close();
  serving_->retired = true;
  std::error_code ignored;
  std::filesystem::remove(socket_path(), ignored);  // nobody connects from here on
  // Whatever call is still open is cancelled by the shutdown.
  threads_.lifecycle.retire(std::move(serving_));
  state_ = State::stopped;
}

void DevicePluginServer::stop() {
  stop_serving();
  shared_->waiting.stop();
  shared_->backend = nullptr;  // the backend may go now: nothing reaches it any more
}

std::optional<uint64_t> CallsWaitingForTheCore::add(std::function<void()> answer_stopping) {
  {
    std::lock_guard lock(mutex_);
    if (!stopped_) {
      waiting_.emplace(++last_id_, std::move(answer_stopping));
      return last_id_;
    }
  }
  answer_stopping();
  return std::nullopt;
}

bool CallsWaitingForTheCore::take(uint64_t id) {
  std::lock_guard lock(mutex_);
  return waiting_.erase(id) == 1;
}

void CallsWaitingForTheCore::stop() {
  std::map<uint64_t, std::function<void()>> answered;
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    answered.swap(waiting_);
  }
  for (auto& [id, answer_stopping] : answered) answer_stopping();
}

size_t CallsWaitingForTheCore::size() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

std::filesystem::path DevicePluginServer::socket_path() const { return directory_ / socket_name_; }

uint64_t DevicePluginServer::lists_sent() const { return shared_->lists_sent->load(); }

}  // namespace dowser::plugins
