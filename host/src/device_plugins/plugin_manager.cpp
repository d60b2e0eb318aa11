// Serving, registering and re-registering every plugin of the daemon.
#include "device_plugin_server.hpp"
#include "thread_names.hpp"
#include "unique_fd.hpp"

#include <absl/synchronization/mutex.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace dowser::plugins {
namespace {

constexpr char kKubeletSocket[] = "kubelet.sock";
constexpr auto kFirstRetryDelay = std::chrono::milliseconds(250);
// Registrations answered in one burst before the heap is trimmed after it.
constexpr size_t kTrimAfterAnswers = 256;

// Which kubelet serves kubelet.sock. Every kubelet creates the socket anew,
// so two kubelets differ in the modification time even when the file system
// hands out the same inode (renames and chmod leave it as it is).
struct KubeletIdentity {
  dev_t device;
  ino_t inode;
  time_t mtime_seconds;
  long mtime_nanoseconds;
  bool operator==(const KubeletIdentity&) const = default;
};

// The kubelet serving kubelet.sock right now, or nothing without the file.
std::optional<KubeletIdentity> kubelet_identity(const std::filesystem::path& socket) {
  struct stat info {};
  if (::stat(socket.c_str(), &info) != 0) return std::nullopt;
  return KubeletIdentity{info.st_dev, info.st_ino, info.st_mtim.tv_sec, info.st_mtim.tv_nsec};
}

// A directory made anew differs in its birth time: file systems hand the
// inode number of one just deleted out again (ext4 does). Without a birth
// time, in the inode number only.
std::optional<DirectoryIdentity> directory_identity(const std::filesystem::path& dir) {
  struct statx info {};
  if (::statx(AT_FDCWD, dir.c_str(), 0, STATX_INO | STATX_BTIME, &info) != 0) return std::nullopt;
  const bool born = (info.stx_mask & STATX_BTIME) != 0;
  return DirectoryIdentity{info.stx_dev_major, info.stx_dev_minor, info.stx_ino,
                           born ? info.stx_btime.tv_sec : 0, born ? info.stx_btime.tv_nsec : 0};
}

}  // namespace

// How other threads hand work to the core thread for the manager, and only
// while it lives: a registration's gRPC callback may come after the manager,
// and the core's io_context with it, are gone (a daemon stopping while a
// Register call is in flight).
class PluginManager::CoreLink : public std::enable_shared_from_this<CoreLink> {
 public:
  explicit CoreLink(boost::asio::io_context& core) : core_(&core) {}

  // Runs work on the core thread, unless the manager is gone by then.
  void post(std::function<void()> work) {
    std::lock_guard lock(mutex_);
    if (core_ == nullptr) return;
    boost::asio::post(*core_, [link = shared_from_this(), work = std::move(work)] {
      if (link->alive()) work();
    });
  }
  bool alive() {
    std::lock_guard lock(mutex_);
    return core_ != nullptr;
  }
  void sever() {
    std::lock_guard lock(mutex_);
    core_ = nullptr;
  }

 private:
  std::mutex mutex_;
  boost::asio::io_context* core_;
};

// The Register calls of a manager. A call's stub may hold the kubelet channel
// after the manager let go of it, and gRPC 1.51 frees its shared callback
// queue twice if the last thing using it goes away on one of the queue's own
// threads, where a call ends. So a stopping manager cancels its calls and
// waits until each is destroyed before it lets go of the channel.
struct PluginManager::Registrations : std::enable_shared_from_this<Registrations> {
  struct Call;
  // Counts a call until everything in it (its stub last) is destroyed.
  struct Counted {
    explicit Counted(std::shared_ptr<Registrations> owner) : registrations(std::move(owner)) {
      std::lock_guard lock(registrations->mutex);
      ++registrations->calls;
    }
    ~Counted() {
      {
        std::lock_guard lock(registrations->mutex);
        --registrations->calls;
      }
      registrations->changed.notify_all();
    }
    Counted(const Counted&) = delete;
    Counted& operator=(const Counted&) = delete;
    std::shared_ptr<Registrations> registrations;
  };

  std::shared_ptr<Call> start();
  // Cancels every call and waits (bounded) until all are destroyed.
  void end_all();

  std::mutex mutex;
  std::condition_variable changed;
  static constexpr size_t kFirstPrune = 64;
  std::vector<std::weak_ptr<Call>> started;  // guarded by mutex, with ended calls
  size_t prune_at = kFirstPrune;             // guarded by mutex
  size_t calls = 0;                          // guarded by mutex
};

struct PluginManager::Registrations::Call {
  explicit Call(std::shared_ptr<Registrations> owner) : counted(std::move(owner)) {}
  Counted counted;  // first, so destroyed last: after the stub
  grpc::ClientContext context;
  v1beta1::RegisterRequest request;
  v1beta1::Empty response;
  std::unique_ptr<v1beta1::Registration::Stub> stub;
};

std::shared_ptr<PluginManager::Registrations::Call> PluginManager::Registrations::start() {
  // Not make_shared: a weak_ptr would keep the whole call's memory (its
  // context is kilobytes) after it ended, thousands of them after a burst.
  std::shared_ptr<Call> call(new Call(shared_from_this()));
  std::lock_guard lock(mutex);
  if (started.size() >= prune_at) {  // amortized: a burst adds thousands
    std::erase_if(started, [](const auto& weak) { return weak.expired(); });
    prune_at = std::max<size_t>(kFirstPrune, 2 * started.size());
  }
  started.push_back(call);
  return call;
}

void PluginManager::Registrations::end_all() {
  std::vector<std::weak_ptr<Call>> to_cancel;
  {
    std::lock_guard lock(mutex);
    to_cancel = started;
  }
  // Unlocked: a cancelled call may end, and be destroyed, on this thread.
  for (const auto& weak : to_cancel)
    if (auto call = weak.lock()) call->context.TryCancel();
  std::unique_lock lock(mutex);
  if (!changed.wait_for(lock, std::chrono::seconds(5), [this] { return calls == 0; }))
    spdlog::warn("{} registration calls did not end in 5 s", calls);
}

// Follows the kubelet directory on its own thread and posts what it sees.
// A directory deleted (or moved away) and made again, as a kubelet reinstall
// or `kubeadm reset` does, is watched anew and told with its identity. The
// kernel says a watched directory was deleted only once nothing keeps it in
// use (dowserd's lock file in it, a plugin's socket still served), so after
// every batch of events, and every second, the path is checked for the
// directory watched.
struct PluginManager::Watcher {
  static constexpr uint32_t kEvents = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM |
                                      IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
  static constexpr int kLookAgainMs = 1000;

  Watcher(std::filesystem::path dir, std::function<void(const std::string&, bool created)> seen,
          std::function<void(const DirectoryIdentity&)> recreated, std::function<void()> lost)
      : directory(std::move(dir)),
        on_event(std::move(seen)),
        on_recreated(std::move(recreated)),
        on_events_lost(std::move(lost)) {
    if (!inotify_fd || !wake_fd || !watch_directory())
      throw std::runtime_error("cannot watch " + directory.string() + ": " + std::strerror(errno));
    first_watched = watched;
    thread = std::thread([this] {
      name_this_thread("kubelet-watch");
      run();
    });
  }
  ~Watcher() {
    uint64_t one = 1;
    [[maybe_unused]] auto written = ::write(wake_fd.get(), &one, sizeof one);
    thread.join();
  }

  void run() {
    pollfd fds[2] = {{inotify_fd.get(), POLLIN, 0}, {wake_fd.get(), POLLIN, 0}};
    while (::poll(fds, 2, kLookAgainMs) >= 0 || errno == EINTR) {
      if (fds[1].revents != 0) return;
      if (fds[0].revents != 0) read_events();
      if (watch >= 0 && directory_identity(directory) != watched) stop_watching();
      if (watch < 0) watch_again();
    }
  }

  // The identity first, so that a directory replaced before the watch is
  // added is found out at the next check.
  bool watch_directory() {
    const auto identity = directory_identity(directory);
    const int added = ::inotify_add_watch(inotify_fd.get(), directory.c_str(), kEvents);
    if (added < 0) return false;
    watch = added;
    watched = identity.value_or(DirectoryIdentity{});
    return true;
  }

  void read_events() {
    alignas(inotify_event) char buffer[16 * 1024];
    const ssize_t length = ::read(inotify_fd.get(), buffer, sizeof buffer);
    for (ssize_t offset = 0; offset < length;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if ((event->mask & IN_Q_OVERFLOW) != 0) on_events_lost();
      if (event->wd != watch) continue;  // of a directory watched before
      if ((event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
        stop_watching();
        return;
      }
      if (event->len > 0) on_event(event->name, (event->mask & (IN_CREATE | IN_MOVED_TO)) != 0);
    }
  }

  void stop_watching() {
    spdlog::warn("the kubelet directory {} was deleted or moved away; waiting for it again",
                 directory.string());
    ::inotify_rm_watch(inotify_fd.get(), watch);  // a moved directory is still watched
    watch = -1;
  }

  void watch_again() {
    if (!watch_directory()) return;  // not there yet
    spdlog::info("the kubelet directory {} is back", directory.string());
    on_recreated(watched);
  }

  std::filesystem::path directory;
  std::function<void(const std::string&, bool)> on_event;
  std::function<void(const DirectoryIdentity&)> on_recreated;
  std::function<void()> on_events_lost;
  int watch = -1;                   // -1 while the directory is gone
  DirectoryIdentity watched;        // of the directory watched; the watcher thread's
  DirectoryIdentity first_watched;  // when constructed, for the manager
  // Owned, so that a constructor that throws closes them too.
  UniqueFd inotify_fd{::inotify_init1(IN_CLOEXEC | IN_NONBLOCK)};
  UniqueFd wake_fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::thread thread;
};

struct PluginManager::Entry {
  std::unique_ptr<DevicePluginServer> server;
  PluginStats stats;
  uint64_t generation = 0;  // of its last registration attempt; stale answers are ignored
  // Sent in a Register since it was served: the next Register needs a fresh socket.
  bool socket_offered = false;
  bool register_when_served = false;               // a Register waits for the server to start
  std::optional<KubeletIdentity> registered_with;  // the kubelet of the last Register not refused
  std::chrono::milliseconds retry_delay = kFirstRetryDelay;
  std::unique_ptr<boost::asio::steady_timer> timer;
};

PluginManager::PluginManager(boost::asio::io_context& core, PluginManagerOptions options)
    : core_(core),
      options_(std::move(options)),
      threads_(std::make_unique<PluginThreads>()),
      link_(std::make_shared<CoreLink>(core)),
      registrations_(std::make_shared<Registrations>()) {
  // gRPC locks absl mutexes, and Debian builds abseil without NDEBUG, so
  // every lock taken under another adds to a process-wide graph of all
  // mutexes to find lock-order cycles. With thousands of plugins that graph
  // took 40 % of the daemon's CPU while registering, and memory per plugin.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

PluginManager::~PluginManager() {
  link_->sever();
  watcher_.reset();
  stop_all();
  registrations_->end_all();
}

namespace {

// Why a non-blocking connect to the unix socket at path failed: 0 when it
// connected, or when it cannot be judged (a path too long, no socket to try
// with, or a listener too busy to accept at once: someone is there).
int connect_error(const std::filesystem::path& path) {
  const auto address = unix_socket_address(path);
  if (!address) return 0;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  const int result =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof *address) == 0 ? 0 : errno;
  ::close(fd);
  return result == EAGAIN ? 0 : result;
}

// Whether something accepts connections on the unix socket at path. Only a
// refusal counts as no (any other failure: better keep the file).
bool accepts(const std::filesystem::path& path) { return connect_error(path) != ECONNREFUSED; }

// Sockets a dowserd killed without a chance to clean up left behind: ours by
// their name, dead because nobody accepts on them. (Only one dowserd serves
// a kubelet directory, so no live one is stepped on.)
void remove_stale_plugin_sockets(const std::filesystem::path& dir) {
  std::error_code error;
  size_t removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const auto name = entry.path().filename().string();
    if (!entry.is_socket(error) || !is_plugin_socket_name(name) || accepts(entry.path())) continue;
    if (std::filesystem::remove(entry.path(), error)) ++removed;
  }
  if (removed > 0)
    spdlog::info("removed {} plugin socket(s) a previous dowserd left in {}", removed,
                 dir.string());
}

}  // namespace

void PluginManager::start() {
  std::filesystem::create_directories(options_.kubelet_dir);
  remove_stale_plugin_sockets(options_.kubelet_dir);
  watcher_ = std::make_unique<Watcher>(
      options_.kubelet_dir,
      [this, link = link_](const std::string& name, bool created) {
        link->post([this, name, created] { kubelet_dir_changed(name, created); });
      },
      [this, link = link_](const DirectoryIdentity& identity) {
        link->post([this, identity] { kubelet_dir_recreated(identity); });
      },
      [this, link = link_] { link->post([this] { kubelet_dir_events_lost(); }); });
  served_directory_ = watcher_->first_watched;
}

// Every socket went with the old directory: each plugin is served on a
// fresh one and registered with whatever kubelet is there (kubelet.sock's
// creation, if it comes later, re-registers them again).
void PluginManager::kubelet_dir_recreated(const DirectoryIdentity& identity) {
  if (directory_observer_) directory_observer_();
  served_directory_ = identity;
  kubelet_channel_.reset();
  for (auto& [name, entry] : plugins_) {
    entry->registered_with.reset();
    register_anew(name, *entry, /*new_socket=*/true);
  }
  spdlog::info("re-registering {} plugins: the kubelet directory {} was re-created",
               plugins_.size(), options_.kubelet_dir.string());
}

void PluginManager::kubelet_dir_changed(const std::string& file_name, bool created) {
  if (file_name == kKubeletSocket && created) {
    reregister_all("kubelet.sock was re-created (kubelet restart)");
  } else if (!created) {
    on_socket_deleted(file_name);
  }
}

// A socket deleted, or kubelet.sock made anew, while events were dropped:
// each is found by looking. Sockets still being bound are not missing.
void PluginManager::kubelet_dir_events_lost() {
  spdlog::warn(
      "events of the kubelet directory {} were lost (inotify queue overflow); looking "
      "at every plugin's socket",
      options_.kubelet_dir.string());
  if (!in_served_directory()) return;  // its re-creation is found by the watcher
  std::vector<std::string> missing;
  for (const auto& [name, entry] : plugins_) {
    std::error_code error;
    if (entry->server->serving() && !std::filesystem::exists(entry->server->socket_path(), error))
      missing.push_back(entry->server->socket_name());
  }
  for (const auto& socket : missing) on_socket_deleted(socket);
  if (std::filesystem::exists(options_.kubelet_dir / kKubeletSocket))
    reregister_all("events of the kubelet directory were lost");
}

void PluginManager::add(const std::string& resource_name, PluginBackend& backend) {
  if (plugins_.count(resource_name)) return;
  auto entry = std::make_unique<Entry>();
  entry->server = std::make_unique<DevicePluginServer>(core_, *threads_, resource_name,
                                                       options_.kubelet_dir, backend);
  entry->timer = std::make_unique<boost::asio::steady_timer>(core_);
  auto& added = *plugins_.emplace(resource_name, std::move(entry)).first->second;
  serve(resource_name, added);
  register_plugin(resource_name, std::chrono::milliseconds(0));
}

void PluginManager::remove(const std::string& resource_name) {
  auto it = plugins_.find(resource_name);
  if (it == plugins_.end()) return;
  it->second->timer->cancel();
  it->second->server->stop();
  plugins_.erase(it);
}

void PluginManager::changed(const std::string& resource_name, ListDelivery delivery) {
  if (auto it = plugins_.find(resource_name); it != plugins_.end())
    it->second->server->publish(delivery);
}

void PluginManager::changed_all() {
  for (auto& [name, entry] : plugins_) entry->server->publish();
}

std::optional<std::string> PluginManager::kubelet_unreachable() const {
  const std::filesystem::path socket = options_.kubelet_dir / kKubeletSocket;
  const int error = connect_error(socket);
  if (error == ENOENT) return socket.string() + " is missing (is the kubelet running?)";
  if (error == ECONNREFUSED)
    return socket.string() + " refuses connections (the kubelet is not running)";
  return std::nullopt;
}

bool PluginManager::has(const std::string& resource_name) const {
  return plugins_.count(resource_name) > 0;
}

std::vector<std::string> PluginManager::resources() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : plugins_) names.push_back(name);
  return names;
}

std::optional<PluginStats> PluginManager::stats(const std::string& resource_name) const {
  auto it = plugins_.find(resource_name);
  if (it == plugins_.end()) return std::nullopt;
  PluginStats stats = it->second->stats;
  stats.lists_sent = it->second->server->lists_sent();
  stats.socket_name = it->second->server->socket_name();
  stats.calls_waiting = it->second->server->calls_waiting();
  return stats;
}

void PluginManager::stop_all() {
  for (auto& [name, entry] : plugins_) {
    entry->timer->cancel();
    entry->server->stop();
  }
  plugins_.clear();
}

void PluginManager::register_plugin(const std::string& resource_name,
                                    std::chrono::milliseconds delay) {
  auto& entry = *plugins_.at(resource_name);
  uint64_t generation = entry.generation = ++last_generation_;
  entry.timer->expires_after(delay);
  entry.timer->async_wait(
      [this, link = link_, resource_name, generation](const boost::system::error_code& error) {
        if (error || !link->alive()) return;
        auto it = plugins_.find(resource_name);
        if (it == plugins_.end() || it->second->generation != generation) return;
        send_registration(resource_name, generation);
      });
}

// The kubelet dials back at once: a plugin registers only once its server is
// up. A server that failed to start is started again (on a fresh socket).
void PluginManager::send_registration(const std::string& resource_name, uint64_t generation) {
  if (!in_served_directory()) return;
  auto& entry = *plugins_.at(resource_name);
  if (!entry.server->serving()) {
    entry.register_when_served = true;
    if (!entry.server->starting()) serve(resource_name, entry);
    return;
  }
  entry.socket_offered = true;
  entry.registered_with = kubelet_identity(options_.kubelet_dir / kKubeletSocket);
  auto call = registrations_->start();
  call->stub = v1beta1::Registration::NewStub(kubelet_channel());
  call->context.set_deadline(std::chrono::system_clock::now() + options_.register_timeout);
  call->context.set_wait_for_ready(false);
  call->request.set_version("v1beta1");
  call->request.set_endpoint(entry.server->socket_name());
  call->request.set_resource_name(resource_name);
  call->request.mutable_options()->set_get_preferred_allocation_available(true);
  ++registrations_in_flight_;
  call->stub->async()->Register(
      &call->context, &call->request, &call->response,
      [this, link = link_, call, resource_name, generation](const grpc::Status& status) {
        link->post([this, resource_name, generation, status] {
          registration_done(resource_name, generation, status);
          registration_answered();
        });
      });
}

// Serving and registering thousands of plugins at once leaves most of the
// core thread's heap free but scattered between what stays (over 100 MB
// for 5,000 plugins), which glibc keeps unless asked: give it back once the
// burst is over.
void PluginManager::registration_answered() {
  --registrations_in_flight_;
  if (++answered_since_trim_ < kTrimAfterAnswers || registrations_in_flight_ > 0) return;
  answered_since_trim_ = 0;
  ::malloc_trim(0);
}

std::shared_ptr<grpc::Channel> PluginManager::kubelet_channel() {
  if (!kubelet_channel_) {
    grpc::ChannelArguments args;
    // A connection of its own, not one shared through gRPC's global pool that
    // may still be waiting out a reconnect backoff from an earlier kubelet.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    kubelet_channel_ =
        grpc::CreateCustomChannel("unix:" + (options_.kubelet_dir / kKubeletSocket).string(),
                                  grpc::InsecureChannelCredentials(), args);
  }
  return kubelet_channel_;
}

void PluginManager::registration_done(const std::string& resource_name, uint64_t generation,
                                      const grpc::Status& status) {
  auto it = plugins_.find(resource_name);
  if (it == plugins_.end() || it->second->generation != generation) return;
  auto& entry = *it->second;
  if (status.ok()) {
    entry.stats.registered = true;
    entry.stats.registrations++;
    entry.stats.last_error.clear();
    entry.retry_delay = kFirstRetryDelay;
    spdlog::info("{}: registered with the kubelet ({})", resource_name,
                 entry.server->socket_name());
    if (registration_observer_) registration_observer_(resource_name, entry.stats);
    return;
  }
  entry.stats.registered = false;
  // Said once per plugin and reason: every retry of thousands of plugins
  // while the kubelet is down would bury the rest of the log.
  const bool news = entry.stats.last_error != status.error_message();
  entry.stats.last_error = status.error_message();
  entry.registered_with.reset();
  kubelet_channel_.reset();  // the retry connects afresh
  if (registration_observer_) registration_observer_(resource_name, entry.stats);
  spdlog::log(news ? spdlog::level::warn : spdlog::level::debug,
              "{}: kubelet registration failed: {}; retrying in {} ms{}", resource_name,
              status.error_message(), entry.retry_delay.count(),
              news ? " (repeats of this are logged at debug level)" : "");
  // A Register that timed out may have been taken by a kubelet too busy to
  // answer in time, and the kubelet takes no second Register on one socket:
  // the retry offers a new one.
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) serve(resource_name, entry);
  retry_registration(resource_name, entry);
}

void PluginManager::retry_registration(const std::string& resource_name, Entry& entry) {
  auto delay = entry.retry_delay;
  entry.retry_delay = std::min(entry.retry_delay * 2, options_.max_retry_delay);
  register_plugin(resource_name, delay);
}

// The kubelet keys plugins by socket path and does not support a second
// Register on one path, so every Register after the first gets a new socket.
void PluginManager::serve(const std::string& resource_name, Entry& entry) {
  entry.socket_offered = false;
  entry.registered_with.reset();
  if (!in_served_directory()) {  // its re-creation serves every plugin
    entry.server->stop_serving();
    entry.stats.last_error = "the kubelet directory " + options_.kubelet_dir.string() +
                             " is gone or was made anew; waiting for it";
    return;
  }
  // Called only while the server lives, so the manager and the entry do too.
  entry.server->serve([this, resource_name, &entry](const std::string& error) {
    if (error.empty()) {
      if (std::exchange(entry.register_when_served, false))
        register_plugin(resource_name, std::chrono::milliseconds(0));
      return;
    }
    entry.stats.last_error = error;
    spdlog::error("{}: cannot serve the plugin: {}; trying again in {} ms", resource_name, error,
                  entry.retry_delay.count());
    entry.register_when_served = false;  // the retry's Register starts it again
    retry_registration(resource_name, entry);
  });
}

// A plugin whose Register already went to this kubelet is left alone: the
// kubelet's restart deleted its socket, and when that deletion was handled
// the new kubelet.sock was there already (its creation is handled later).
// Registering again would replace the socket the kubelet streams from.
void PluginManager::reregister_all(const std::string& why) {
  auto kubelet = kubelet_identity(options_.kubelet_dir / kKubeletSocket);
  kubelet_channel_.reset();  // a new kubelet: a new connection
  size_t renewed = 0;
  for (auto& [name, entry] : plugins_) {
    if (kubelet && entry->registered_with == kubelet) continue;
    register_anew(name, *entry, entry->socket_offered);
    ++renewed;
  }
  spdlog::info("re-registering {} of {} plugins: {}", renewed, plugins_.size(), why);
}

void PluginManager::register_anew(const std::string& resource_name, Entry& entry, bool new_socket) {
  entry.stats.registered = false;
  entry.retry_delay = kFirstRetryDelay;
  if (new_socket) serve(resource_name, entry);
  register_plugin(resource_name, std::chrono::milliseconds(0));
}

bool PluginManager::in_served_directory() const {
  return !served_directory_ || directory_identity(options_.kubelet_dir) == served_directory_;
}

void PluginManager::on_socket_deleted(const std::string& file_name) {
  const bool directory_went = !in_served_directory();
  for (auto& [name, entry] : plugins_) {
    if (entry->server->socket_name() != file_name) continue;
    entry->stats.registered = false;
    if (directory_went) {
      // Its server kept the deleted directory in use. The directory's
      // re-creation serves it anew; nothing registered before then counts.
      spdlog::info("{}: its socket {} went with the kubelet directory", name, file_name);
      entry->generation = ++last_generation_;
      entry->timer->cancel();
      serve(name, *entry);  // only stops its server, and says why
      return;
    }
    spdlog::info("{}: its socket {} was deleted; serving a new one", name, file_name);
    serve(name, *entry);
    // Without kubelet.sock the kubelet is restarting: its re-creation re-registers us.
    if (std::filesystem::exists(options_.kubelet_dir / kKubeletSocket))
      register_plugin(name, std::chrono::milliseconds(0));
    return;
  }
}

}  // namespace dowser::plugins
