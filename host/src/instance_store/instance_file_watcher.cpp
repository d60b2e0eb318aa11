#include "instance_file_watcher.hpp"
#include "thread_names.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <array>
#include <cerrno>
#include <cstdint>

namespace dowser::store::detail {
namespace {

// A namespace directory moved out (IN_MOVED_FROM) takes its Instances along;
// one removed with rm -r loses its files one by one first (IN_DELETE).
constexpr uint32_t kRootEvents = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_ONLYDIR;
// The store rewrites Instance files in place under its lock (IN_CLOSE_WRITE);
// IN_MOVED_TO catches files renamed into place (by hand, or by tools that
// replace files that way).
constexpr uint32_t kNamespaceEvents =
    IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR;

}  // namespace

InstanceFileWatcher::InstanceFileWatcher(InstanceFiles files, Handlers handlers)
    : files_(std::move(files)), handlers_(std::move(handlers)) {
  inotify_ = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify_) throw_io_error("start inotify for", files_.root(), errno);
  wakeup_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wakeup_) throw_io_error("create an eventfd for watching", files_.root(), errno);
  root_watch_ = ::inotify_add_watch(inotify_.get(), files_.root().c_str(), kRootEvents);
  if (root_watch_ < 0) throw_io_error("watch", files_.root(), errno);
  for (const std::string& namespace_name : files_.namespaces()) {
    watch_namespace(namespace_name, /*report_existing=*/false);
  }
}

InstanceFileWatcher::~InstanceFileWatcher() { stop(); }

void InstanceFileWatcher::start() {
  thread_ = std::thread([this] {
    name_this_thread("store-watch");
    run();
  });
}

void InstanceFileWatcher::stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  if (::write(wakeup_.get(), &one, sizeof one) != sizeof one) {
    spdlog::error("instance store: cannot wake the watch thread of {}", files_.root().string());
  }
  thread_.join();
}

void InstanceFileWatcher::run() {
  std::array<pollfd, 2> descriptors{{{inotify_.get(), POLLIN, 0}, {wakeup_.get(), POLLIN, 0}}};
  while (true) {
    if (::poll(descriptors.data(), descriptors.size(), -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("instance store: watching {} stopped: poll failed (errno {})",
                    files_.root().string(), errno);
      return;
    }
    if (descriptors[1].revents != 0) return;
    if (descriptors[0].revents != 0) read_events();
  }
}

void InstanceFileWatcher::read_events() {
  alignas(inotify_event) std::array<char, std::size_t{64} * 1024> buffer;
  const ssize_t length = ::read(inotify_.get(), buffer.data(), buffer.size());
  if (length <= 0) return;  // EAGAIN or EINTR: poll again
  for (ssize_t offset = 0; offset < length;) {
    const auto* event = reinterpret_cast<const inotify_event*>(buffer.data() + offset);
    try {
      handle(*event);
    } catch (const std::exception& error) {
      spdlog::warn("instance store: while watching {}: {}", files_.root().string(), error.what());
    }
    offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
  }
}

void InstanceFileWatcher::handle(const inotify_event& event) {
  if ((event.mask & IN_Q_OVERFLOW) != 0) {
    recover_from_overflow();
    return;
  }
  if ((event.mask & IN_IGNORED) != 0) {
    namespace_by_watch_.erase(event.wd);
    return;
  }
  if (event.len == 0) return;
  const std::string file_name(event.name);  // NUL-padded by the kernel
  if (event.wd == root_watch_) {
    if ((event.mask & IN_ISDIR) == 0 || !InstanceFiles::is_valid_name(file_name)) return;
    if ((event.mask & IN_MOVED_FROM) != 0)
      forget_namespace(file_name);
    else
      watch_namespace(file_name, /*report_existing=*/true);
    return;
  }
  const auto namespace_name = namespace_by_watch_.find(event.wd);
  if (namespace_name == namespace_by_watch_.end()) return;
  if (auto name = InstanceFiles::instance_name_of(file_name)) {
    handlers_.changed(namespace_name->second, *name);
  }
}

void InstanceFileWatcher::watch_namespace(const std::string& namespace_name, bool report_existing) {
  const std::filesystem::path directory = files_.namespace_directory(namespace_name);
  const int watch = ::inotify_add_watch(inotify_.get(), directory.c_str(), kNamespaceEvents);
  if (watch < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;  // gone again, or not a directory
    throw_io_error("watch", directory, errno);
  }
  namespace_by_watch_[watch] = namespace_name;
  // Files may have landed before the watch did.
  if (report_existing) {
    for (const std::string& name : files_.instance_names(namespace_name)) {
      handlers_.changed(namespace_name, name);
    }
  }
}

// Its watch goes at once: files written into the moved directory later are
// not the store's. The Instances known there are then found gone.
void InstanceFileWatcher::forget_namespace(const std::string& namespace_name) {
  unwatch_namespaces([&](const std::string& name) { return name == namespace_name; });
  handlers_.rescan(namespace_name);
}

void InstanceFileWatcher::unwatch_namespaces(const std::function<bool(const std::string&)>& which) {
  std::erase_if(namespace_by_watch_, [&](const auto& watch) {
    if (!which(watch.second)) return false;
    ::inotify_rm_watch(inotify_.get(), watch.first);
    return true;
  });
}

// Every watch is made anew: a namespace directory moved out among the lost
// events must not keep its watch (nor its name, if another took its place).
void InstanceFileWatcher::recover_from_overflow() {
  spdlog::warn("instance store: inotify queue overflowed for {}; rescanning",
               files_.root().string());
  unwatch_namespaces([](const std::string&) { return true; });
  for (const std::string& namespace_name : files_.namespaces()) {
    try {  // one that cannot be watched (no watches left) must not stop the others
      watch_namespace(namespace_name, /*report_existing=*/true);
    } catch (const std::exception& error) {
      spdlog::warn("instance store: while watching {}: {}", files_.root().string(), error.what());
    }
  }
  handlers_.rescan(std::nullopt);
}

}  // namespace dowser::store::detail
