// Private to device_plugins: one plugin's gRPC server.
#pragma once

#include "device_plugins.hpp"

#include "deviceplugin/v1beta1/api.grpc.pb.h"

#include <grpcpp/server.h>
#include <grpcpp/support/byte_buffer.h>
#include <sys/un.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

namespace dowser::plugins {

class ListStream;
class DevicePluginService;

// A list as sent: one serialized message shared by every stream that sends it.
using SharedList = std::shared_ptr<const grpc::ByteBuffer>;

// The address of a unix socket at path; nullopt when the path is too long.
std::optional<sockaddr_un> unix_socket_address(const std::filesystem::path& path);

// Whether a file name in the kubelet directory has the form of the sockets
// plugin servers bind (<resource>-<ms>-<n>.sock).
bool is_plugin_socket_name(std::string_view name);

// One thread running an io_context, for work the core thread hands off.
class WorkerThread {
 public:
  enum class AtExit { drop_queued, finish_queued };
  // name: the thread's, as top -H shows it.
  WorkerThread(AtExit at_exit, std::string name);
  ~WorkerThread();
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;
  boost::asio::io_context& context() { return context_; }

 private:
  AtExit at_exit_;
  boost::asio::io_context context_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

// Turns long lists into messages and writes them to the streams, shared by
// every plugin, so that building, encoding and freeing big lists never holds
// up Allocate on the core thread. Drops what is still queued when destroyed.
class ListPublisher : public WorkerThread {
 public:
  ListPublisher() : WorkerThread(AtExit::drop_queued, "dp-publisher") {}
};

// One attempt to serve a plugin on one socket. The core thread makes the
// service; the lifecycle thread builds the server, binds the socket and,
// once retired, shuts the server down.
struct ServingSocket {
  std::filesystem::path path;
  std::unique_ptr<DevicePluginService> service;
  std::unique_ptr<grpc::Server> server;  // on the lifecycle thread only
  std::atomic<bool> retired{false};      // set on the core thread
};

// Builds the gRPC servers of plugins and shuts down those of stopped ones, in
// order, on one thread: binding a socket takes hundreds of microseconds on a
// slow disk (creating an inode) and Shutdown waits for every call in flight
// to end (2 to 3 ms here); the core thread must wait for neither. Finishes
// what is queued when destroyed (a start retired by then is skipped).
class ServerLifecycle : public WorkerThread {
 public:
  ServerLifecycle() : WorkerThread(AtExit::finish_queued, "dp-lifecycle") {}
  // Builds and starts the server, unless retired first; then calls done on
  // this thread, with why it could not if it could not.
  void start(std::shared_ptr<ServingSocket> serving,
             std::function<void(const std::string& error)> done);
  void retire(std::shared_ptr<ServingSocket> serving);
};

// The threads every plugin server shares besides the core's and gRPC's.
struct PluginThreads {
  ListPublisher publisher;
  ServerLifecycle lifecycle;  // destroyed first: servers it shuts down may still offer lists
};

// The live ListAndWatch streams of one server (touched from the core, the
// publisher and gRPC threads). Every stream gets the newest list: a new one
// the last list sent at once, all of them each list offered afterwards.
class StreamHub : public std::enable_shared_from_this<StreamHub> {
 public:
  StreamHub(ListPublisher& publisher, std::shared_ptr<std::atomic<uint64_t>> lists_sent)
      : publisher_(publisher), lists_sent_(std::move(lists_sent)) {}
  // Registers a new stream (ends it at once if the hub is closed). A
  // registered stream lives until remove(), so the hub may push to it.
  void add(ListStream* stream);
  void remove(ListStream* stream);
  // Sends devices to every stream: a short list offered for prompt delivery
  // at once, on the caller's thread, any other soon, on the publisher's.
  // Lists offered faster than they are sent are coalesced into the newest.
  void offer(DeviceList devices, ListDelivery delivery);
  void close();  // ends every stream and refuses new ones
  void count_list() { ++*lists_sent_; }
  // While an Allocate is answered, offered lists wait, so that its reply is
  // not written (and read by the kubelet) alongside the list it changed: a
  // list of thousands of vdevs costs both sides more than the reply. The
  // kubelet allocates one call at a time, so lists never wait for long.
  void hold_lists();
  void release_lists();

 private:
  bool can_send_here(ListDelivery delivery) const;  // mutex_ held
  void post_send();                                 // mutex_ held
  void send_newest();                               // on the publisher's thread
  void send(SharedList list);                       // mutex_ held

  ListPublisher& publisher_;
  std::mutex mutex_;
  std::set<ListStream*> streams_;
  bool closed_ = false;
  DeviceList newest_;          // offered, not sent yet
  bool send_posted_ = false;   // send_newest() is queued on the publisher
  bool building_ = false;      // send_newest() is building a list, unlocked
  size_t allocates_open_ = 0;  // holding lists back
  SharedList sent_;            // the last list sent to every stream
  std::shared_ptr<std::atomic<uint64_t>> lists_sent_;
};

// Calls whose work waits for its turn on the core thread. A core that
// stops with work still queued (dowserd's on SIGTERM) never runs it, and
// gRPC's Shutdown waits for every callback call to be finished: so stop()
// answers whatever is still waiting, and each call that comes after it.
class CallsWaitingForTheCore {
 public:
  // Keeps answer_stopping for when the plugin stops before the call's turn.
  // nullopt when it has stopped already: answered here, then.
  std::optional<uint64_t> add(std::function<void()> answer_stopping);
  // The call's turn on the core: false when stop() answered it.
  bool take(uint64_t id);
  void stop();
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  bool stopped_ = false;
  uint64_t last_id_ = 0;
  std::map<uint64_t, std::function<void()>> waiting_;
};

// Shared by the server and work it posted to the core: backend is cleared
// (on the core thread) when the plugin stops, with every call waiting.
struct ServerShared {
  std::string resource_name;
  PluginBackend* backend = nullptr;
  CallsWaitingForTheCore waiting;
  // The streams of the socket served now; read and set on the core thread
  // only (each gRPC service keeps the hub it was made with).
  std::shared_ptr<StreamHub> hub;
  std::shared_ptr<std::atomic<uint64_t>> lists_sent = std::make_shared<std::atomic<uint64_t>>(0);
};

class DevicePluginServer {
 public:
  DevicePluginServer(boost::asio::io_context& core, PluginThreads& threads,
                     std::string resource_name, std::filesystem::path directory,
                     PluginBackend& backend);
  ~DevicePluginServer();

  // (Re)starts serving on a fresh socket name; the old socket goes. The
  // server is built and its socket bound on the lifecycle thread; then, on
  // the core thread, ready is called with an empty error once serving(), or
  // with why it cannot serve. Not called if stop() or serve() comes first.
  using Ready = std::function<void(const std::string& error)>;
  void serve(Ready ready);
  // Whether the server of the last serve() is up; starting() while it is built.
  bool serving() const { return state_ == State::serving; }
  bool starting() const { return state_ == State::starting; }
  // Offers the backend's list to the streams if it differs from the last.
  void publish(ListDelivery delivery = ListDelivery::background);
  // Stops serving: streams end, the server shuts down, the socket goes. The
  // backend stays, so serve() may start it again.
  void stop_serving();
  // Stops serving for good: calls still waiting for the core are answered
  // UNAVAILABLE, and so are late ones.
  void stop();

  const std::string& resource_name() const { return shared_->resource_name; }
  const std::string& socket_name() const { return socket_name_; }
  std::filesystem::path socket_path() const;
  uint64_t lists_sent() const;
  // Calls posted to the core thread and not yet run there (any thread).
  size_t calls_waiting() const { return shared_->waiting.size(); }

 private:
  boost::asio::io_context& core_;
  PluginThreads& threads_;
  std::filesystem::path directory_;
  std::shared_ptr<ServerShared> shared_;
  std::string socket_name_;
  std::shared_ptr<ServingSocket> serving_;  // of the last serve(), until stopped
  enum class State { stopped, starting, serving, failed };
  State state_ = State::stopped;
  DeviceList last_sent_;
};

}  // namespace dowser::plugins
