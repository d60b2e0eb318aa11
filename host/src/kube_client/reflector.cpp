// Reflector: list, then watch from the list's resourceVersion; re-list on
// 410 Gone or a version too large; watch again at once after a normal end;
// reconnect with capped, fully jittered backoff otherwise.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "kube_client.hpp"
#include "thread_names.hpp"

namespace dowser::kube {
namespace {

using nlohmann::json;

// A watch that ends normally sooner than this with nothing in it is treated
// as a failure (as client-go does): a proxy closing every watch at once must
// not make the reflector reconnect in a tight loop.
constexpr std::chrono::seconds kShortestHealthyWatch{1};

std::string resource_version_of(const json& object) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  const auto version = metadata->find("resourceVersion");
  return version != metadata->end() && version->is_string() ? version->get<std::string>() : "";
}

}  // namespace

struct Reflector::State {
  State(KubeClient& client_in, ResourceType type_in, std::string namespace_in, Handlers handlers_in,
        Backoff backoff_in)
      : client(client_in),
        type(std::move(type_in)),
        namespace_name(std::move(namespace_in)),
        handlers(std::move(handlers_in)),
        backoff(backoff_in) {}

  KubeClient& client;
  ResourceType type;
  std::string namespace_name;
  Handlers handlers;
  Backoff backoff;
  std::atomic<bool> stopping{false};
  std::atomic<bool> synced{false};
  std::mutex mutex;
  std::condition_variable wake;  // stop() ends a backoff wait at once
  std::thread thread;
  std::minstd_rand random{std::random_device{}()};

  // Lists everything, delivers it, and returns the list's resourceVersion.
  std::string list_all() {
    const json list = client.list(type, namespace_name, "", &stopping);
    std::string version = resource_version_of(list);
    const auto items = list.find("items");
    if (version.empty() || (items != list.end() && !items->is_array() && !items->is_null())) {
      throw ApiError(200, "InvalidResponse",
                     "list of " + type.plural + ": no metadata.resourceVersion or items list");
    }
    std::vector<json> objects;
    if (items != list.end() && items->is_array()) objects.assign(items->begin(), items->end());
    if (handlers.listed) handlers.listed(Listing{objects, version});
    synced = true;
    tell_current();
    return version;
  }

  // Watches from version until the stream ends; version follows every
  // event, and progressed becomes true when any arrives.
  void watch_from(std::string& version, bool& progressed) {
    client.watch(
        type, namespace_name, version,
        [&](const WatchEvent& event) {
          progressed = true;
          const std::string event_version = resource_version_of(event.object);
          if (!event_version.empty()) version = event_version;
          const bool change =
              event.type == "ADDED" || event.type == "MODIFIED" || event.type == "DELETED";
          if (change && handlers.changed) handlers.changed(event.type, event.object);
          tell_current();
        },
        stopping);
  }

  void run() {
    std::string version;  // empty: list first
    int failures = 0;     // consecutive rounds without progress
    while (!stopping) {
      failures = round(version, failures);
      wait(backoff.delay(failures, random));
    }
  }

  // Lists if there is no version, then watches once. Returns the failures
  // to back off for: none after a healthy watch that ended normally.
  int round(std::string& version, int failures) {
    bool progressed = false;
    const auto started = std::chrono::steady_clock::now();
    try {
      if (version.empty()) {
        version = list_all();
        progressed = true;
      }
      watch_from(version, progressed);
      if (progressed || std::chrono::steady_clock::now() - started >= kShortestHealthyWatch) {
        tell_current();
        return 0;
      }
    } catch (const ApiError& error) {
      // 410: the version is too old for the server's history; too large: the
      // server will not reach it (restored from a backup). Either way, only
      // a new list gives a version to watch from, as client-go does.
      if (error.gone() || error.resource_version_too_large()) {
        version.clear();
      } else {
        report(error);
      }
    } catch (const std::exception& error) {
      report(ApiError(0, "", type.plural + ": " + error.what()));
    }
    return progressed ? 1 : failures + 1;
  }

  void tell_current() const {
    if (handlers.current) handlers.current();
  }

  void report(const ApiError& error) const {
    // A stop (the reflector's, or its client's at a shutdown) ends requests.
    if (handlers.failed && !stopping && !error.stopped()) handlers.failed(error);
  }

  void wait(std::chrono::milliseconds delay) {
    std::unique_lock lock(mutex);
    wake.wait_for(lock, delay, [this] { return stopping.load(); });
  }
};

Reflector::Reflector(KubeClient& client, ResourceType type, std::string namespace_name,
                     Handlers handlers, Backoff backoff)
    : state_(std::make_unique<State>(client, std::move(type), std::move(namespace_name),
                                     std::move(handlers), backoff)) {}

Reflector::~Reflector() { stop(); }

void Reflector::start() {
  if (state_->thread.joinable()) return;
  state_->stopping = false;
  state_->thread = std::thread([this] {
    name_this_thread("kw:" + state_->type.plural);
    state_->run();
  });
}

void Reflector::stop() {
  {
    const std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

bool Reflector::synced() const noexcept { return state_->synced; }

}  // namespace dowser::kube
