#include "discovery_manager.hpp"

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <set>
#include <thread>

#include "thread_names.hpp"

namespace dowser::discovery {
namespace {

constexpr auto kStopWait = std::chrono::seconds(10);
// A call running longer than this at shutdown is worth a line in the log.
constexpr auto kStopNotice = std::chrono::seconds(1);

// "stop_discovery of default/cams has not returned for 42 s".
std::string stuck_text(const std::string& what, std::chrono::steady_clock::duration running_for) {
  return what + " has not returned for " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(running_for).count()) +
         " s";
}

spdlog::level::level_enum spdlog_level(int32_t level) {
  switch (level) {
    case DOWSER_LOG_TRACE:
      return spdlog::level::trace;
    case DOWSER_LOG_DEBUG:
      return spdlog::level::debug;
    case DOWSER_LOG_INFO:
      return spdlog::level::info;
    case DOWSER_LOG_WARN:
      return spdlog::level::warn;
    default:
      return spdlog::level::err;
  }
}

// The request a Configuration makes. Properties that only the Kubernetes
// backend can resolve (valueFrom) are refused unless optional.
DiscoverRequest request_for(const configuration::Configuration& configuration) {
  DiscoverRequest request;
  request.discovery_details = configuration.discovery_details;
  for (const auto& property : configuration.discovery_properties) {
    if (property.value) {
      request.properties[property.name] = property.value;
      continue;
    }
    const auto& reference =
        property.secret_key_ref ? property.secret_key_ref : property.config_map_key_ref;
    if (!reference) {
      request.properties[property.name] = std::nullopt;  // present, without a value
    } else if (!reference->optional) {
      throw std::invalid_argument("discovery property " + property.name +
                                  " takes its value from a Secret or ConfigMap, which needs the "
                                  "Kubernetes Configuration source (--config-source kubernetes)");
    }
  }
  return request;
}

}  // namespace

// Runs one handler instance's control calls, one at a time, off the core.
// The queue is shared with the thread, so that a thread stuck in a handler
// can be abandoned: what it still holds (queued calls, sessions) stays with
// it instead of being destroyed, and stopped again, by whoever gave up.
class DiscoveryManager::ControlThread {
 public:
  explicit ControlThread(std::string name)
      : name_(std::move(name)), queue_(std::make_shared<Queue>()) {
    thread_ = std::thread([queue = queue_, name = name_] {
      name_this_thread("h:" + name);
      run(*queue);
    });
  }
  ~ControlThread() { finish_by(std::chrono::steady_clock::now() + kStopWait); }

  // what: the handler call the task makes, as a stuck one is named.
  void post(std::function<void()> task, std::string what) {
    {
      std::lock_guard lock(queue_->mutex);
      queue_->tasks.push_back({std::move(task), std::move(what)});
    }
    queue_->wake.notify_all();
  }

  // Runs task on the thread and waits for it; false on timeout.
  bool call(std::function<void()> task, std::string what, std::chrono::milliseconds timeout) {
    auto finished = std::make_shared<std::promise<void>>();
    auto future = finished->get_future();
    post(
        [task = std::move(task), finished] {
          try {
            task();
            finished->set_value();
          } catch (...) {
            finished->set_exception(std::current_exception());
          }
        },
        std::move(what));
    if (future.wait_for(timeout) != std::future_status::ready) return false;
    future.get();  // rethrows what the task threw
    return true;
  }

  // How long the call running now has been running (zero when idle).
  std::chrono::steady_clock::duration busy_for() const { return running().running_for; }

  struct Running {
    std::string what;  // empty when idle
    std::chrono::steady_clock::duration running_for{};
    int64_t since = 0;  // when it started: tells one call from the next
  };
  Running running() const {
    std::lock_guard lock(queue_->mutex);
    if (queue_->busy_since == 0) return {};
    const auto started = std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(queue_->busy_since));
    return {queue_->busy_with, std::chrono::steady_clock::now() - started, queue_->busy_since};
  }

  // Lets the thread end once what is queued has run. Idempotent.
  void quit() {
    {
      std::lock_guard lock(queue_->mutex);
      queue_->quitting = true;
    }
    queue_->wake.notify_all();
  }

  // Quits and joins the thread if it ends by deadline; else abandons it
  // (a handler's call hangs: the daemon must not hang with it) and returns false.
  bool finish_by(std::chrono::steady_clock::time_point deadline) {
    if (!thread_.joinable()) return true;
    quit();
    std::unique_lock lock(queue_->mutex);
    const bool ended = queue_->ended.wait_until(lock, deadline, [this] { return queue_->done; });
    lock.unlock();
    if (ended) {
      thread_.join();
      return true;
    }
    spdlog::error("handler {}: a control call did not return within {} s; abandoning it", name_,
                  kStopWait.count());
    thread_.detach();
    return false;
  }

 private:
  struct Task {
    std::function<void()> run;
    std::string what;
  };
  struct Queue {
    mutable std::mutex mutex;
    std::condition_variable wake;
    std::condition_variable ended;
    std::deque<Task> tasks;
    bool quitting = false;
    bool done = false;       // the thread is about to end
    int64_t busy_since = 0;  // steady clock ticks; 0 when idle
    std::string busy_with;   // the running task's call
  };

  static void run(Queue& queue) {
    for (;;) {
      Task task;
      {
        std::unique_lock lock(queue.mutex);
        queue.wake.wait(lock, [&] { return queue.quitting || !queue.tasks.empty(); });
        if (queue.tasks.empty()) {
          queue.done = true;
          queue.ended.notify_all();
          return;
        }
        task = std::move(queue.tasks.front());
        queue.tasks.pop_front();
        queue.busy_since = std::chrono::steady_clock::now().time_since_epoch().count();
        queue.busy_with = task.what;
      }
      task.run();
      task.run = nullptr;  // what it held goes on this thread too
      std::lock_guard lock(queue.mutex);
      queue.busy_since = 0;
      queue.busy_with.clear();
    }
  }

  std::string name_;
  std::shared_ptr<Queue> queue_;
  std::thread thread_;
};

// A handler's instance, made (init) on its control thread when a call first
// needs it, and touched only there: calls queued on that thread capture it,
// so it outlives the manager if the thread is abandoned.
class DiscoveryManager::HandlerInstanceSlot {
 public:
  HandlerInstanceSlot(std::shared_ptr<const host::LoadedHandler> handler, std::string name)
      : handler_(std::move(handler)), name_(std::move(name)) {}
  ~HandlerInstanceSlot() = default;  // on the control thread (see LoadedInstance)

  // The instance, calling init first if it has not succeeded yet (so a
  // failed init is retried with the calls that need it). Throws
  // std::runtime_error naming the handler when init fails.
  host::HandlerInstance& instance() {
    if (instance_) return *instance_;
    auto log = [name = name_](int32_t level, std::string_view message) {
      spdlog::log(spdlog_level(level), "[{}] {}", name, message);
    };
    try {
      instance_ = std::make_unique<host::HandlerInstance>(handler_, log);
    } catch (const host::HandlerCallError& e) {
      ++failed_inits_;
      throw std::runtime_error("handler " + name_ + " is loaded but " + e.what());
    }
    if (failed_inits_ > 0)
      spdlog::info("handler {}: init succeeded after {} failed attempt{}", name_, failed_inits_,
                   failed_inits_ == 1 ? "" : "s");
    return *instance_;
  }

 private:
  std::shared_ptr<const host::LoadedHandler> handler_;
  std::string name_;
  std::unique_ptr<host::HandlerInstance> instance_;
  unsigned failed_inits_ = 0;
};

struct DiscoveryManager::LoadedInstance {
  std::shared_ptr<HandlerInstanceSlot> slot;
  std::unique_ptr<ControlThread> control;

  ~LoadedInstance() {
    // The instance goes on its thread, after the sessions stopped there.
    if (control && slot)
      control->post([slot = std::move(slot)]() mutable { slot.reset(); }, "destroy");
  }
};

struct DiscoveryManager::Session {
  Session(boost::asio::io_context& core, configuration::Configuration c)
      : configuration(std::move(c)), retry_timer(core) {}
  configuration::Configuration configuration;
  // Set anew, unique across sessions, when (re)opened or closed: events of
  // an earlier attempt, or of a replaced session, are dropped.
  uint64_t generation = 0;
  // A start of these details succeeded once: the handler accepted them, so a
  // later refusal (a restart after an error) is retried, not final. Set on
  // the control thread, as the start returns (its own reports may already
  // have ended that attempt).
  std::shared_ptr<std::atomic<bool>> accepted = std::make_shared<std::atomic<bool>>(false);
  LoadedInstance* owner = nullptr;
  std::shared_ptr<host::CoalescingSink> sink;
  std::shared_ptr<std::unique_ptr<host::DiscoverySession>> running;  // filled on the control thread
  bool waiting_for_handler = false;
  std::chrono::milliseconds retry_delay{0};
  boost::asio::steady_timer retry_timer;
};

DiscoveryManager::DiscoveryManager(boost::asio::io_context& core, DiscoveryOptions options,
                                   Events events, host::LoadPolicy policy)
    : core_(core),
      options_(std::move(options)),
      events_(std::move(events)),
      registry_(std::move(policy)),
      accepted_(options_.accepted_requests_file, core,
                {.first = options_.first_retry, .max = options_.max_retry}),
      rescan_timer_(core),
      alive_(std::make_shared<std::atomic<bool>>(true)) {}

DiscoveryManager::~DiscoveryManager() { shutdown(); }

void DiscoveryManager::start() {
  rescan();
  schedule_rescan();
}

void DiscoveryManager::schedule_rescan() {
  rescan_timer_.expires_after(options_.handler_rescan);
  rescan_timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive) return;
    rescan();
    warn_of_stuck_calls();
    schedule_rescan();
  });
}

void DiscoveryManager::rescan() {
  auto result = registry_.scan(options_.handler_dir);
  for (const auto& handler : result.loaded) {
    spdlog::info("loaded discovery handler {} {} from {}", handler->name(), handler->version(),
                 handler->path().string());
    // It works; the warning is for its author (dowser-handler-check says the same).
    if (auto warning = host::extra_exports_warning(handler->path()))
      spdlog::warn("handler {} ({}): {}", handler->name(), handler->path().string(), *warning);
  }
  // A refused file is tried on every rescan; say so only when the reason changes.
  std::set<std::string> before;
  for (const auto& failure : failures_) before.insert(failure.what());
  for (const auto& failure : result.failures)
    if (!before.count(failure.what())) spdlog::error("cannot load handler: {}", failure.what());
  failures_ = result.failures;
  if (result.loaded.empty()) return;
  for (auto& [key, session] : sessions_)
    if (session->waiting_for_handler) open_session(*session);
}

DiscoveryManager::LoadedInstance* DiscoveryManager::instance_for(const std::string& handler_name) {
  if (auto it = instances_.find(handler_name); it != instances_.end()) return it->second.get();
  auto handler = registry_.find(handler_name);
  if (!handler) return nullptr;
  auto loaded = std::make_unique<LoadedInstance>();
  loaded->slot = std::make_shared<HandlerInstanceSlot>(handler, handler_name);
  loaded->control = std::make_unique<ControlThread>(handler_name);
  return instances_.emplace(handler_name, std::move(loaded)).first->second.get();
}

void DiscoveryManager::validate(const configuration::Configuration& configuration) {
  auto* loaded = instance_for(configuration.handler_name);
  if (!loaded) {
    throw std::runtime_error("no discovery handler named '" + configuration.handler_name +
                             "' is loaded");
  }
  auto request = request_for(configuration);
  const std::string digest = request_digest(configuration.handler_name, request);
  // validate runs on the core thread: a handler that does not answer may
  // hold it up once, for validate_wait, and not at all while it stays stuck.
  if (const auto running = loaded->control->running();
      running.running_for > options_.validate_wait) {
    throw std::runtime_error("handler " + configuration.handler_name + ": " +
                             stuck_text(running.what, running.running_for));
  }
  try {
    if (!loaded->control->call(
            [slot = loaded->slot, request] { slot->instance().validate(request); },
            "validate_request of " + configuration.namespace_name + "/" + configuration.name,
            options_.validate_wait)) {
      throw std::runtime_error("handler " + configuration.handler_name +
                               ": validate did not return within " +
                               std::to_string(options_.validate_wait.count()) + " ms");
    }
  } catch (const host::HandlerCallError& e) {
    if (e.status() != DOWSER_ERR_INVALID_ARGUMENT) {
      // Only DOWSER_ERR_INVALID_ARGUMENT is a verdict on the details; a
      // handler out of memory or unable to reach a service says nothing of
      // them, and refusing would hold the Configuration until it is edited.
      spdlog::warn(
          "Configuration {}/{}: handler {} could not check the discovery details ({}): "
          "starting discovery, which is retried while it fails",
          configuration.namespace_name, configuration.name, configuration.handler_name, e.what());
      return;
    }
    if (!accepted_.accepted({configuration.namespace_name, configuration.name}, digest)) throw;
    spdlog::warn(
        "Configuration {}/{}: handler {} refuses discovery details it accepted before ({}): "
        "running them all the same, as a failing discovery is retried",
        configuration.namespace_name, configuration.name, configuration.handler_name, e.what());
    return;
  }
  // Passing validate is not accepting: some handlers check more when they
  // start (or have no validate at all). Only a start that succeeded counts.
}

void DiscoveryManager::run(const configuration::Configuration& configuration) {
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  auto it = sessions_.find(key);
  if (it != sessions_.end() && it->second->configuration.same_discovery(configuration)) {
    it->second->configuration = configuration;  // e.g. capacity: no restart needed
    return;
  }
  if (it != sessions_.end()) {
    close_session(*it->second);
    sessions_.erase(it);
  }
  auto& session =
      *sessions_.emplace(key, std::make_unique<Session>(core_, configuration)).first->second;
  session.retry_delay = options_.first_retry;
  open_session(session);
}

void DiscoveryManager::stop(const ConfigurationKey& configuration) {
  auto it = sessions_.find(configuration);
  if (it == sessions_.end()) return;
  close_session(*it->second);
  sessions_.erase(it);
}

// Queued behind the starts on the handler's control thread: a start of this
// Configuration already under way records what it accepted first, and a
// start after a re-creation records it again afterwards.
void DiscoveryManager::forget(const ConfigurationKey& configuration) {
  auto session = sessions_.find(configuration);
  LoadedInstance* owner = session == sessions_.end() ? nullptr : session->second->owner;
  if (owner == nullptr || !owner->control) {
    accepted_.forget(configuration);  // nothing of it was started
    return;
  }
  owner->control->post(
      [this, core = &core_, alive = alive_, configuration] {
        if (!*alive) return;
        boost::asio::post(*core, [this, alive, configuration] {
          if (*alive) accepted_.forget(configuration);
        });
      },
      "forget what " + configuration.first + "/" + configuration.second + " accepted");
}

void DiscoveryManager::open_session(Session& session) {
  const auto& configuration = session.configuration;
  ConfigurationKey key{configuration.namespace_name, configuration.name};
  const uint64_t generation = session.generation = ++last_generation_;
  session.waiting_for_handler = false;
  LoadedInstance* loaded = instance_for(configuration.handler_name);
  if (!loaded) {
    session.waiting_for_handler = true;
    events_.failed(key, "no discovery handler named '" + configuration.handler_name +
                            "' is loaded; waiting for it in " + options_.handler_dir.string());
    return;
  }
  DiscoverRequest request;
  try {
    request = request_for(configuration);
  } catch (const std::invalid_argument& e) {
    events_.failed(key, e.what());  // nothing to retry: the Configuration must change
    return;
  }
  session.owner = loaded;
  session.sink = std::make_shared<host::CoalescingSink>(
      [this, alive = alive_, key, generation] {
        boost::asio::post(core_, [this, alive, key, generation] {
          if (*alive) session_event(key, generation);
        });
      },
      // On the handler's threads, maybe after this manager is gone (a late
      // call): logged there; handed to the core, which outlives the manager,
      // and taken there only while the manager lives. Nothing of the manager
      // is touched here.
      [this, core = &core_, alive = alive_, handler = configuration.handler_name,
       key](const std::string& problem) {
        spdlog::warn("Configuration {}/{}: handler {}: {}", key.first, key.second, handler,
                     problem);
        boost::asio::post(*core, [this, alive, key, problem] {
          if (*alive && events_.report_problem) events_.report_problem(key, problem);
        });
      },
      [handler = configuration.handler_name, key](int32_t level, std::string_view message) {
        spdlog::log(spdlog_level(level), "[{} {}/{}] {}", handler, key.first, key.second, message);
      });
  session.running = std::make_shared<std::unique_ptr<host::DiscoverySession>>();
  const std::string digest = request_digest(configuration.handler_name, request);
  if (accepted_.accepted(key, digest)) *session.accepted = true;
  // Only what outlives the manager is captured: this thread may be abandoned.
  loaded->control->post(
      [this, core = &core_, alive = alive_, slot = loaded->slot, request, sink = session.sink,
       running = session.running, accepted = session.accepted, key, generation, digest] {
        const auto on_core = [&](auto work) {
          if (*alive)
            boost::asio::post(*core, [alive, work = std::move(work)] {
              if (*alive) work();
            });
        };
        try {
          *running = slot->instance().start(request, sink);
          *accepted = true;
          on_core([this, key, accepted, digest] {
            accepted_.accept(key, digest);
            // Told only while the session of these details is the current
            // one (retried meanwhile, maybe; not replaced by a change).
            const auto session = sessions_.find(key);
            if (events_.started && session != sessions_.end() &&
                session->second->accepted == accepted)
              events_.started(key);
          });
        } catch (const host::HandlerCallError& e) {
          const bool refused = e.status() == DOWSER_ERR_INVALID_ARGUMENT;
          on_core([this, key, generation, refused, reason = std::string(e.what())] {
            start_failed(key, generation, refused, reason);
          });
        } catch (const std::exception& e) {  // init failed, or out of memory: may succeed later
          on_core([this, key, generation, reason = std::string(e.what())] {
            start_failed(key, generation, false, reason);
          });
        }
      },
      "start_discovery of " + key.first + "/" + key.second);
}

// refused: the handler said the details are bad (DOWSER_ERR_INVALID_ARGUMENT).
void DiscoveryManager::start_failed(const ConfigurationKey& key, uint64_t generation, bool refused,
                                    const std::string& reason) {
  auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second->generation != generation) return;
  if (refused && !*it->second->accepted && events_.refused) {
    events_.refused(key, reason);
  } else {
    retry_later(*it->second, reason);
  }
}

void DiscoveryManager::close_session(Session& session) {
  session.retry_timer.cancel();
  session.generation = ++last_generation_;
  if (!session.owner) return;
  // Queued behind the start on the same thread, so the session exists by then.
  session.owner->control->post(
      [running = std::move(session.running)] {
        if (*running) (*running)->stop();
        running->reset();
      },
      "stop_discovery of " + session.configuration.namespace_name + "/" +
          session.configuration.name);
  session.owner = nullptr;
  session.sink.reset();
}

void DiscoveryManager::session_event(const ConfigurationKey& key, uint64_t generation) {
  auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second->generation != generation || !it->second->sink) return;
  auto& session = *it->second;
  // What the handler reported before it ended the session still holds (a
  // last empty list says its devices are gone): delivered first.
  // The error first: a handler reports before it fails, and nothing after,
  // so the changes taken next hold every report it made.
  auto error = session.sink->error();
  auto changes = session.sink->take_changes();
  if (changes) {
    if (!error) session.retry_delay = options_.first_retry;  // it works again
    events_.devices(key, std::move(*changes));
  }
  if (!error) return;
  close_session(session);
  retry_later(session, "the handler ended discovery: " + error->second);
}

void DiscoveryManager::retry_later(Session& session, const std::string& reason) {
  ConfigurationKey key{session.configuration.namespace_name, session.configuration.name};
  events_.failed(key,
                 reason + " (retrying in " + std::to_string(session.retry_delay.count()) + " ms)");
  uint64_t generation = session.generation;
  session.retry_timer.expires_after(session.retry_delay);
  session.retry_delay = std::min(session.retry_delay * 2, options_.max_retry);
  session.retry_timer.async_wait(
      [this, alive = alive_, key, generation](const boost::system::error_code& error) {
        if (error || !*alive) return;
        auto it = sessions_.find(key);
        if (it == sessions_.end() || it->second->generation != generation) return;
        close_session(*it->second);
        open_session(*it->second);
      });
}

bool DiscoveryManager::shutdown() {
  if (!*alive_) return every_call_returned_;
  *alive_ = false;
  rescan_timer_.cancel();
  for (auto& [key, session] : sessions_) close_session(*session);
  sessions_.clear();
  // Every thread stops its sessions and instance at once; one deadline for all.
  const auto deadline = std::chrono::steady_clock::now() + kStopWait;
  for (auto& [name, loaded] : instances_) {
    loaded->control->post([slot = std::move(loaded->slot)]() mutable { slot.reset(); }, "destroy");
    loaded->control->quit();
  }
  for (auto& [name, loaded] : instances_) {
    if (loaded->control->busy_for() > kStopNotice)
      spdlog::info("handler {}: waiting up to {} s for its calls to return", name,
                   kStopWait.count());
    every_call_returned_ = loaded->control->finish_by(deadline) && every_call_returned_;
  }
  instances_.clear();
  return every_call_returned_;
}

void DiscoveryManager::warn_of_stuck_calls() {
  for (const auto& [name, loaded] : instances_) {
    const auto running = loaded->control->running();
    if (running.running_for < kStuckAfter) continue;
    if (std::exchange(told_stuck_[name], running.since) == running.since) continue;
    spdlog::warn(
        "handler {}: {}; its other calls (starts and stops of other Configurations) "
        "wait behind it",
        name, stuck_text(running.what, running.running_for));
  }
}

std::vector<HandlerInfo> DiscoveryManager::handlers() const {
  std::vector<HandlerInfo> result;
  for (const auto& handler : registry_.handlers()) {
    result.push_back(
        {handler->name(), handler->version(), handler->path(), handler->shares_devices(), ""});
    auto loaded = instances_.find(handler->name());
    if (loaded == instances_.end()) continue;
    const auto running = loaded->second->control->running();
    if (running.running_for >= kStuckAfter)
      result.back().stuck = stuck_text(running.what, running.running_for);
  }
  return result;
}

}  // namespace dowser::discovery
