// dowser-bench: measures dowserd against the kubelet simulator, next to the
// physical limit of the same gRPC build on the same machine, in one run.
//
//   dowser-bench --dowserd PATH --handlers DIR [--events N] [--scale 1000,5000] [--json FILE]
//
// Prints a table (and JSON): gRPC baselines; discovery-to-kubelet latency for
// IL (new plugin, registration included) and CL (list update); Allocate round
// trips, also while new devices keep coming; scale (registration time, memory, threads, fds, idle
// CPU, re-registration after a kubelet restart); startup.
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "instance_store.hpp"
#include "paced_loop.hpp"

#include <dowser/kubelet_sim.hpp>

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// ---- figures ------------------------------------------------------------------

struct Latency {
  double p50 = 0, p99 = 0, max = 0;  // microseconds
  size_t samples = 0;
};

Latency summarize(std::vector<double> us) {
  Latency result;
  if (us.empty()) return result;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  };
  return {at(0.50), at(0.99), us.back(), us.size()};
}

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

json to_json(const Latency& l) {
  return {{"p50_us", l.p50}, {"p99_us", l.p99}, {"max_us", l.max}, {"samples", l.samples}};
}

// Where calls' or reports' time went, by parts: inside dowserd, from its debug
// log (one line each, written once it was done), and for Allocate calls also
// on their way there and back.
struct Part {
  const char* label;  // of its row
  const char* key;    // in the JSON
};
// An Allocate call end to end: dowserd's log says when it reached the
// handler (on the monotonic clock the harness's steady clock reads too), how
// long it waited for the core thread and how long the claims took; the rest
// of the round trip is the answer's way back to the caller.
constexpr std::array<Part, 4> kAllocateParts{{{"reaching dowserd's handler", "to_handler"},
                                              {"waiting for core thread", "waiting_for_core"},
                                              {"claiming (durable)", "claiming"},
                                              {"answer back to the caller", "answer_back"}}};
constexpr std::array<Part, 6> kReportParts{{{"waiting for core thread", "waiting_for_core"},
                                            {"reconciling", "reconciling"},
                                            {"offering CL lists", "offering_lists"},
                                            {"writing new Instances", "writing"},
                                            {"serving IL plugins", "serving_plugins"},
                                            {"handing the sync over", "handing_sync_over"}}};
using PartTimes = std::vector<Latency>;  // one per part, in order

// Calls split into kAllocateParts: each part over every call, and each
// part's mean over the slowest 1% of calls (what their p99 is made of).
struct CallSplit {
  PartTimes parts;
  std::vector<double> slowest_means;
  size_t slowest = 0;  // calls
};

// One call's parts, which add up to its round trip.
using SplitCall = std::array<double, kAllocateParts.size()>;

CallSplit summarize_split(const std::vector<SplitCall>& split) {
  CallSplit result;
  std::vector<double> totals;
  totals.reserve(split.size());
  for (const auto& call : split) totals.push_back(std::accumulate(call.begin(), call.end(), 0.0));
  std::vector<size_t> by_total(totals.size());
  std::iota(by_total.begin(), by_total.end(), 0);
  std::sort(by_total.begin(), by_total.end(),
            [&](size_t a, size_t b) { return totals[a] > totals[b]; });
  // The calls at or above summarize()'s p99.
  const size_t n = totals.size();
  result.slowest =
      n == 0 ? 0 : n - std::min(n - 1, static_cast<size_t>(0.99 * static_cast<double>(n)));
  for (size_t part = 0; part < kAllocateParts.size(); ++part) {
    std::vector<double> column;
    column.reserve(split.size());
    for (const auto& call : split) column.push_back(call[part]);
    double slowest_sum = 0;
    for (size_t i = 0; i < result.slowest; ++i) slowest_sum += split[by_total[i]][part];
    result.parts.push_back(summarize(std::move(column)));
    result.slowest_means.push_back(
        result.slowest == 0 ? 0 : slowest_sum / static_cast<double>(result.slowest));
  }
  return result;
}

// Each line of a dowserd log that `line` matches, summarized per part (its
// groups after the first) and per kind: kind_of names the line's kind, ""
// skips it. Throws if a kind in `expected` has no line: the line changed, or
// debug logging is off.
std::map<std::string, PartTimes> logged_times(
    const fs::path& log, const std::regex& line, size_t parts,
    const std::function<std::string(const std::smatch&)>& kind_of,
    const std::vector<std::string>& expected) {
  std::map<std::string, std::vector<std::vector<double>>> figures;
  std::ifstream in(log);
  std::smatch match;
  for (std::string text; std::getline(in, text);) {
    if (!std::regex_search(text, match, line)) continue;
    auto kind = kind_of(match);
    if (kind.empty()) continue;
    auto& columns = figures[kind];
    columns.resize(parts);
    for (size_t i = 0; i < parts; ++i) columns[i].push_back(std::stod(match[i + 2]));
  }
  std::map<std::string, PartTimes> times;
  for (const auto& kind : expected) {
    if (!figures.count(kind))
      throw std::runtime_error("no " + kind + " times in " + log.string() +
                               " (is dowserd logging at debug level?)");
    for (auto& column : figures[kind]) times[kind].push_back(summarize(std::move(column)));
  }
  return times;
}

// ---- the physical limit: one gRPC server and client over a unix socket ---------

class BaselinePlugin : public v1beta1::DevicePlugin::CallbackService {
 public:
  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* context,
                                                   const v1beta1::Empty*,
                                                   v1beta1::DevicePluginOptions*) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  class Stream : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
   public:
    void send() {
      {
        std::unique_lock lock(mutex_);
        idle_.wait(lock, [this] { return !writing_; });  // one write at a time
        writing_ = true;
      }
      message_.clear_devices();
      message_.add_devices()->set_id("x");
      StartWrite(&message_);
    }
    void OnWriteDone(bool) override {
      std::lock_guard lock(mutex_);
      writing_ = false;
      idle_.notify_all();
    }
    void OnCancel() override { Finish(grpc::Status::OK); }
    void OnDone() override { delete this; }
    v1beta1::ListAndWatchResponse message_;
    std::mutex mutex_;
    std::condition_variable idle_;
    bool writing_ = false;
  };

  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(
      grpc::CallbackServerContext*, const v1beta1::Empty*) override {
    std::lock_guard lock(mutex);
    stream = new Stream();
    opened.notify_all();
    return stream;
  }

  std::mutex mutex;
  std::condition_variable opened;
  Stream* stream = nullptr;
};

// A BaselinePlugin served on a unix socket, with a client connected to it.
class BaselineServer {
 public:
  explicit BaselineServer(const fs::path& socket) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket.string(), grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    stub_ = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials()));
  }
  ~BaselineServer() { server_->Shutdown(std::chrono::system_clock::now()); }

  // One minimal unary call, in microseconds.
  double timed_unary_call() {
    grpc::ClientContext context;
    v1beta1::Empty empty;
    v1beta1::DevicePluginOptions options;
    auto start = Clock::now();
    stub_->GetDevicePluginOptions(&context, empty, &options);
    return micros_since(start);
  }

  // One message on a server stream, timed until its reader has it.
  std::vector<double> timed_stream_messages(int samples) {
    grpc::ClientContext context;
    auto reader = stub_->ListAndWatch(&context, v1beta1::Empty());
    {
      std::unique_lock lock(service_.mutex);
      service_.opened.wait(lock, [&] { return service_.stream != nullptr; });
    }
    std::vector<double> times;
    v1beta1::ListAndWatchResponse message;
    for (int i = 0; i < samples; ++i) {
      auto start = Clock::now();
      service_.stream->send();
      reader->Read(&message);
      times.push_back(micros_since(start));
    }
    context.TryCancel();
    return times;
  }

 private:
  BaselinePlugin service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
};

std::pair<Latency, Latency> grpc_baseline(BaselineServer& baseline, int samples) {
  std::vector<double> unary;
  for (int i = 0; i < samples + 100; ++i) {
    double us = baseline.timed_unary_call();
    if (i >= 100) unary.push_back(us);  // first 100 warm up
  }
  return {summarize(unary), summarize(baseline.timed_stream_messages(samples))};
}

// Before each call of the paused unary baseline, and each CL call made with
// dowserd idle.
constexpr auto kBaselinePause = 1ms;

// The same unary call, each after a pause of `pause` with nothing to do: on a
// virtual machine an idle virtual CPU halts and waking it again is the host's
// business, which a call made back to back never pays and one that follows a
// wait (for lists, for a pod) does.
Latency unary_after_pauses(BaselineServer& baseline, int samples, std::chrono::microseconds pause) {
  std::vector<double> unary;
  for (int i = 0; i < samples; ++i) {
    std::this_thread::sleep_for(pause);  // the load pattern, not a wait for anything
    unary.push_back(baseline.timed_unary_call());
  }
  return summarize(unary);
}

// The other physical limit of a claim: one Instance update in the file store
// (a journal record, then the file rewritten in place), in the directory
// dowserd's store uses in this run. Durable: the record made durable with
// fdatasync before the update returns. Written: the record written to the
// disk before it returns and flushed by the store's thread after, as an
// Allocate's claims are (since session 22).
enum class StoreUpdate { durable, written };

Latency store_update_baseline(const fs::path& dir, int samples, StoreUpdate kind) {
  dowser::store::FileInstanceStore store(dir);
  dowser::store::Instance instance;
  instance.name = "baseline-0a1b2c";
  instance.configuration_name = "baseline";
  instance.capacity = 4;
  instance.nodes = {"node-a"};
  instance.broker_properties = {{"BENCH_DEVICE", "baseline"}};
  uint64_t revision = store.create(instance);
  std::vector<double> updates;
  for (int i = 0; i < samples; ++i) {
    instance.device_usage["baseline-0a1b2c-0"] = i % 2 ? "node-a" : "C:0:node-a";
    auto start = Clock::now();
    {
      std::optional<dowser::store::DeferredSync> flushed_after;
      if (kind == StoreUpdate::written)
        flushed_after.emplace(store, dowser::store::DeferredSync::SyncOn::store_thread,
                              dowser::store::InstanceStore::Deferring::flush);
      revision = store.update(instance, revision);
    }
    updates.push_back(micros_since(start));
  }
  return summarize(std::move(updates));
}

// ---- dowserd as a process ------------------------------------------------------

struct ProcessFigures {
  double rss_mb = 0;
  int threads = 0;
  int fds = 0;
};

ProcessFigures figures_of(pid_t pid) {
  ProcessFigures figures;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) figures.rss_mb = std::stod(line.substr(6)) / 1024.0;
    if (line.rfind("Threads:", 0) == 0) figures.threads = std::stoi(line.substr(8));
  }
  for ([[maybe_unused]] const auto& fd :
       fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++figures.fds;
  return figures;
}

double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  long ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stol(field);  // utime + stime
  return static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Whether some thread of process pid other than the caller is running, ready
// to run, or waiting for the disk (state R or D in /proc).
bool busy_thread_in(pid_t pid) {
  const std::string self = std::to_string(::syscall(SYS_gettid));
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    if (task.path().filename() == self) continue;
    std::ifstream stat(task.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    const size_t state = text.rfind(')') + 2;
    if (state < text.size() && (text[state] == 'R' || text[state] == 'D')) return true;
  }
  return false;
}

constexpr auto kIdleWaitLimit = 1s;

// Waits (kIdleWaitLimit at most) until neither dowserd nor this process has a
// thread at work other than the caller's, twice in a row 200 us apart: what a
// call before left to do (lists, the store's flush, the simulated kubelet
// reading the lists) is done. False if they were still busy at the limit.
bool wait_until_idle(pid_t dowserd) {
  const auto deadline = Clock::now() + kIdleWaitLimit;
  int quiet = 0;
  while (quiet < 2 && Clock::now() < deadline) {
    const bool busy = busy_thread_in(dowserd) || busy_thread_in(::getpid());
    quiet = busy ? 0 : quiet + 1;
    std::this_thread::sleep_for(200us);
  }
  return quiet == 2;
}

class Node {
 public:
  Node(const fs::path& root, const fs::path& dowserd, const fs::path& handlers) : root_(root) {
    fs::create_directories(root / "configs");
    dowser::testkit::KubeletSimulatorConfig config;
    config.device_plugin_dir = root / "dp";
    config.podresources_socket = root / "podres.sock";
    kubelet = std::make_unique<dowser::testkit::KubeletSimulator>(config);
    dowserd_ = dowserd;
    handlers_ = handlers;
  }
  ~Node() { stop(); }

  void start() {
    // Everything that allocates happens before fork: the simulator's threads
    // run in this process, and its child may only make system calls until exec.
    std::vector<std::string> args = {dowserd_.string(),
                                     "--node-name=bench-node",
                                     "--config-dir=" + (root_ / "configs").string(),
                                     "--handler-dir=" + handlers_.string(),
                                     "--state-dir=" + state_dir().string(),
                                     "--kubelet-dir=" + (root_ / "dp").string(),
                                     "--podresources-socket=" + (root_ / "podres.sock").string(),
                                     "--log-level=" + log_level,
                                     "--http-listen=127.0.0.1:0"};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string log = log_file().string();
    started = Clock::now();
    pid = ::fork();
    if (pid == 0) {
      // A harness that dies must not leave dowserd running (holding its pipes).
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (log_fd < 0) ::_exit(126);
      ::dup2(log_fd, STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  void stop() {
    if (pid <= 0) return;
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }

  void configuration(const std::string& name, int capacity, const std::string& handler,
                     const std::string& properties = "") {
    std::ofstream(root_ / "configs" / (name + ".yaml"))
        << "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: " << name
        << "}\nspec:\n  capacity: " << capacity << "\n  discoveryHandler:\n    name: " << handler
        << "\n"
        << properties;
  }

  fs::path log_file() const { return root_ / "dowserd.log"; }

  std::unique_ptr<dowser::testkit::KubeletSimulator> kubelet;
  std::string log_level = "warn";  // set before start()
  pid_t pid = -1;
  Clock::time_point started;
  static inline fs::path state_base;  // where state dirs go (--state-base)

 private:
  fs::path state_dir() const {
    return state_base.empty() ? root_ / "state" : state_base / root_.filename();
  }

  fs::path root_, dowserd_, handlers_;
};

// <prefix>0 .. <prefix><count - 1>
std::vector<std::string> device_ids(const std::string& prefix, int count) {
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) ids.push_back(prefix + std::to_string(i));
  return ids;
}

void send_devices(const fs::path& socket, const std::vector<std::string>& ids) {
  std::string text;
  for (const auto& id : ids) text += id + "\n";
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, socket.c_str());
  ::sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::close(fd);
}

std::string bench_properties(const fs::path& socket) {
  return "    discoveryProperties:\n      - name: BENCH_SOCKET\n        value: " + socket.string() +
         "\n";
}

bool wait_until(const dowser::testkit::KubeletSimulator& kubelet,
                const std::function<bool(const dowser::testkit::SimulatorStatus&)>& predicate,
                std::chrono::milliseconds timeout = 30s) {
  return kubelet.wait_for(predicate, timeout);
}

// Polls instead of re-checking on every change: with thousands of plugins,
// walking the simulator's status per list would dominate what is measured.
// (wait_for with no timeout checks once, without copying the status.)
bool poll_until(const dowser::testkit::KubeletSimulator& kubelet,
                const std::function<bool(const dowser::testkit::SimulatorStatus&)>& predicate,
                std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (kubelet.wait_for(predicate, 0ms)) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

bool streaming_with(const dowser::testkit::SimulatorStatus& status, const std::string& resource,
                    size_t devices) {
  const auto* r = status.resource(resource);
  return r && r->streaming && r->devices.size() == devices;
}

// IL: a new device's plugin registered and listing its slot. CL: the list
// that has one more placeholder.
// `background` devices stay reported throughout: each event adds one device
// to a Configuration that already has them, as on a busy node.
struct DiscoveryFigures {
  Latency il, cl;
  std::optional<PartTimes> in_dowserd;  // of the reports of one new device, with --discovery-split
};

// The times of the reports of one new device in a dowserd log.
PartTimes report_times_logged(const fs::path& log) {
  static const std::regex line(
      R"(: \d+ devices \((\d+ new or changed, \d+ gone)\) advertised: (\d+) us waiting for the )"
      R"(core thread, (\d+) us reconciling, (\d+) us offering CL lists, (\d+) us writing new )"
      R"(Instances, (\d+) us serving IL plugins, (\d+) us handing their sync to the store)");
  auto times = logged_times(log, line, kReportParts.size(),
                            [](const std::smatch& match) {
                              return match[1] == "1 new or changed, 0 gone" ? "new device" : "";
                            },
                            {"new device"});
  return times["new device"];
}

DiscoveryFigures discovery_latency(const fs::path& root, const fs::path& dowserd,
                                   const fs::path& handlers, int events, int background,
                                   bool split) {
  Node node(root, dowserd, handlers);
  if (split) node.log_level = "debug";
  fs::path socket = root / "bench.sock";
  node.configuration("lat", 1, "benchHandler", bench_properties(socket));
  node.start();
  if (!wait_until(*node.kubelet, [](const auto& s) { return streaming_with(s, "akri.sh/lat", 0); }))
    throw std::runtime_error("the CL plugin never registered; see " +
                             (root / "dowserd.log").string());
  std::vector<std::string> reported = device_ids("background-", background);
  auto settled = [&](const dowser::testkit::SimulatorStatus& status) {
    size_t streaming = 0;
    for (const auto& [name, resource] : status.resources)
      streaming += name != "akri.sh/lat" && resource.streaming ? 1 : 0;
    return streaming == reported.size() && streaming_with(status, "akri.sh/lat", reported.size());
  };
  send_devices(socket, reported);
  if (!poll_until(*node.kubelet, settled, 120s))
    throw std::runtime_error("the background devices never all reached the kubelet");
  std::vector<double> il, cl;
  for (int i = 0; i < events; ++i) {
    std::string id = "dev-" + std::to_string(i);
    std::optional<double> il_at, cl_at;
    std::set<std::string> before;
    for (const auto& [name, resource] : node.kubelet->status().resources) before.insert(name);
    auto start = Clock::now();
    reported.push_back(id);
    send_devices(socket, reported);
    // Timed to when the simulator's stream reader got the list, as the
    // stream baseline is timed by its reader: not to when this thread wakes.
    auto arrived = [&](const dowser::testkit::ResourceStatus& resource) {
      return std::chrono::duration<double, std::micro>(resource.last_list_at - start).count();
    };
    wait_until(*node.kubelet, [&](const dowser::testkit::SimulatorStatus& status) {
      if (!cl_at && streaming_with(status, "akri.sh/lat", reported.size()))
        cl_at = arrived(*status.resource("akri.sh/lat"));
      if (!il_at) {
        for (const auto& [name, resource] : status.resources)
          if (!before.count(name) && resource.streaming && resource.devices.size() == 1 &&
              resource.devices[0].healthy())
            il_at = arrived(resource);
      }
      return il_at && cl_at;
    });
    if (il_at) il.push_back(*il_at);
    if (cl_at) cl.push_back(*cl_at);
    reported.pop_back();  // the local device goes at once: wait for a clean slate
    send_devices(socket, reported);
    wait_until(*node.kubelet, settled);
  }
  DiscoveryFigures figures{summarize(il), summarize(cl), std::nullopt};
  if (split) {
    node.stop();  // every line written
    figures.in_dowserd = report_times_logged(node.log_file());
  }
  return figures;
}

// A plugin's stub, dialled like the kubelet does: it dials once, at
// registration, asks GetDevicePluginOptions and keeps the connection for
// every Allocate. That first call completes the HTTP/2 handshake, which
// WaitForConnected alone leaves to overlap the first timed call.
std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin_stub(const fs::path& dir,
                                                         const dowser::testkit::SimulatorStatus& s,
                                                         const std::string& resource) {
  auto channel = grpc::CreateChannel("unix:" + (dir / s.resource(resource)->endpoint).string(),
                                     grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + 10s))
    throw std::runtime_error("cannot connect to the plugin of " + resource);
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  grpc::ClientContext context;
  v1beta1::DevicePluginOptions options;
  if (!stub->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok())
    throw std::runtime_error("GetDevicePluginOptions failed on the plugin of " + resource);
  return stub;
}

struct Allocated {
  Clock::time_point sent;
  double us = 0;
  std::string slot;  // the slot granted, <instance>-<index>, from its annotation
};

std::vector<double> round_trips(const std::vector<Allocated>& calls) {
  std::vector<double> us;
  us.reserve(calls.size());
  for (const auto& call : calls) us.push_back(call.us);
  return us;
}

// One Allocate RPC for one device id; nullopt if refused.
std::optional<Allocated> timed_allocate(v1beta1::DevicePlugin::Stub& stub, const std::string& id) {
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids(id);
  v1beta1::AllocateResponse response;
  grpc::ClientContext context;
  auto start = Clock::now();
  auto status = stub.Allocate(&context, request, &response);
  double us = micros_since(start);
  if (!status.ok() || response.container_responses_size() != 1) return std::nullopt;
  const std::string prefix = "akri.agent.slot-";
  for (const auto& [key, value] : response.container_responses(0).annotations())
    if (key.rfind(prefix, 0) == 0) return Allocated{start, us, key.substr(prefix.size())};
  return Allocated{start, us, ""};
}

// A unary call dowserd's plugin server answers on its own gRPC thread, on
// the connection an Allocate takes: the server's part of an Allocate,
// without the core thread's.
double timed_options_call(v1beta1::DevicePlugin::Stub& stub) {
  v1beta1::Empty request;
  v1beta1::DevicePluginOptions options;
  grpc::ClientContext context;
  auto start = Clock::now();
  auto status = stub.GetDevicePluginOptions(&context, request, &options);
  double us = micros_since(start);
  if (!status.ok())
    throw std::runtime_error("GetDevicePluginOptions failed: " + status.error_message());
  return us;
}

// The Instance's IL plugin lists the slot as taken (by a CL claim).
bool listed_as_taken(const dowser::testkit::SimulatorStatus& status, const std::string& slot) {
  const auto* resource = status.resource("akri.sh/" + slot.substr(0, slot.rfind('-')));
  if (!resource) return false;
  return std::any_of(resource->devices.begin(), resource->devices.end(),
                     [&](const auto& device) { return device.id == slot && !device.healthy(); });
}

struct AllocateFigures {
  Latency il;
  Latency cl;                   // each call once the lists the previous one changed have arrived
  Latency cl_back_to_back;      // each call right after the previous reply, as its lists go out
  Latency cl_idle;              // each call once dowserd has had nothing to do for a while
  size_t idle_not_reached = 0;  // cl_idle calls made with dowserd still busy at kIdleWaitLimit
  Latency il_during_discovery;  // while a new device comes every kChurnPeriod
  // The baseline's unary call, made right before each IL call and each CL
  // call once its lists arrived: what the conditions of those calls (the
  // previous call's after-work, the cores woken again) do to a minimal call.
  Latency unary_between;
  // The same call with every plugin registered and streaming, before any
  // Allocate: what holding the kubelet's connections costs a call by itself.
  Latency unary_connected;
  // An IL plugin's GetDevicePluginOptions, right before each IL call.
  Latency plugin_options;
  size_t reports_during_discovery = 0;
  std::optional<CallSplit> il_split, cl_split, cl_idle_split,
      il_during_discovery_split;  // with --allocate-split
};

// When a granted call reached dowserd's handler (seconds on the monotonic
// clock), and its waiting and claiming, from dowserd's debug log.
struct LoggedAllocate {
  double received_s = 0;
  double waiting_us = 0, claiming_us = 0;
};

// Every granted Allocate in a dowserd log, by the time it reached the handler.
std::vector<LoggedAllocate> logged_allocates(const fs::path& log) {
  static const std::regex line(
      R"(Allocate granted: (\d+) us waiting for the core thread, (\d+) us claiming, \d+ us )"
      R"(handing the answer to gRPC \(the call reached the handler at ([\d.]+) s)");
  std::vector<LoggedAllocate> calls;
  std::ifstream in(log);
  std::smatch match;
  for (std::string text; std::getline(in, text);) {
    if (std::regex_search(text, match, line))
      calls.push_back({std::stod(match[3]), std::stod(match[1]), std::stod(match[2])});
  }
  if (calls.empty())
    throw std::runtime_error("no Allocate times in " + log.string() +
                             " (is dowserd logging at debug level?)");
  std::sort(calls.begin(), calls.end(),
            [](const auto& a, const auto& b) { return a.received_s < b.received_s; });
  return calls;
}

// Each call of `calls` split into kAllocateParts with the logged call that
// reached the handler while it was under way (calls are made one at a time).
CallSplit split_calls(const std::vector<Allocated>& calls,
                      const std::vector<LoggedAllocate>& logged) {
  constexpr double kLoggedPrecision_s = 1e-6;  // the log gives microseconds
  std::vector<SplitCall> split;
  for (const auto& call : calls) {
    const double sent_s = std::chrono::duration<double>(call.sent.time_since_epoch()).count();
    auto found = std::lower_bound(
        logged.begin(), logged.end(), sent_s - kLoggedPrecision_s,
        [](const LoggedAllocate& entry, double at) { return entry.received_s < at; });
    if (found == logged.end() || found->received_s > sent_s + call.us / 1e6 + kLoggedPrecision_s)
      throw std::runtime_error("an Allocate call has no line in dowserd's log");
    const double to_handler = std::max(0.0, (found->received_s - sent_s) * 1e6);
    split.push_back({to_handler, found->waiting_us, found->claiming_us,
                     call.us - to_handler - found->waiting_us - found->claiming_us});
  }
  return summarize_split(split);
}

const dowser::testkit::ResourceStatus& cl_plugin(const dowser::testkit::SimulatorStatus& status) {
  return *status.resource("akri.sh/alloc");
}

// A healthy vdev of the CL plugin not taken yet, once listed; empty if none
// comes (every slot CL may take is taken).
std::string free_vdev(const dowser::testkit::KubeletSimulator& kubelet,
                      const std::set<std::string>& used) {
  std::string id;
  wait_until(kubelet, [&](const dowser::testkit::SimulatorStatus& s) {
    // From the end: new placeholders have the highest ids, so the search
    // stops at once instead of loading the CPU dowserd runs on.
    const auto& devices = cl_plugin(s).devices;
    auto free = std::find_if(devices.rbegin(), devices.rend(), [&](const auto& device) {
      return device.healthy() && !used.count(device.id);
    });
    if (free != devices.rend()) id = free->id;
    return !id.empty();
  });
  return id;
}

// Read in place: copying the status of a thousand plugins would load the CPU.
size_t cl_lists_received(const dowser::testkit::KubeletSimulator& kubelet) {
  size_t received = 0;
  kubelet.wait_for(
      [&](const auto& s) {
        received = cl_plugin(s).lists_received;
        return true;
      },
      0ms);
  return received;
}

// How often a new device is reported while IL Allocates are timed again: each
// report creates an Instance (written, its plugin served and registered, its
// sync handed to the store) and changes the CL list.
constexpr auto kChurnPeriod = 5ms;

// Allocate RPCs straight to the plugins (what the kubelet's Allocate costs),
// with `instances` Instances of capacity 4 in one Configuration.
AllocateFigures allocate_latency(const fs::path& root, const fs::path& dowserd,
                                 const fs::path& handlers, BaselineServer& baseline, int instances,
                                 int calls, bool split) {
  Node node(root, dowserd, handlers);
  if (split) node.log_level = "debug";
  fs::path socket = root / "bench.sock";
  node.configuration("alloc", 4, "benchHandler", bench_properties(socket));
  node.start();
  wait_until(*node.kubelet, [](const auto& s) { return streaming_with(s, "akri.sh/alloc", 0); });
  send_devices(socket, device_ids("dev-", instances));
  if (!poll_until(
          *node.kubelet,
          [&](const auto& s) {
            return s.resources.size() == static_cast<size_t>(instances) + 1 &&
                   streaming_with(s, "akri.sh/alloc", instances);
          },
          120s))
    throw std::runtime_error("not every plugin registered for the Allocate benchmark");
  auto status = node.kubelet->status();
  fs::path dp = root / "dp";
  std::vector<double> unary_connected;
  unary_connected.reserve(2 * static_cast<size_t>(calls));
  for (int i = 0; i < 2 * calls; ++i) unary_connected.push_back(baseline.timed_unary_call());
  std::vector<Allocated> cl_settled, cl_back_to_back, cl_idle, il;
  std::vector<double> unary_between, plugin_options;
  // CL: each call takes a placeholder. Calls take turns among three ways a
  // kubelet may call: at once after the previous reply while the lists that
  // reply changed are still on their way (a burst of pods); once those lists
  // have arrived; and once dowserd (and this process, the kubelet's side) has
  // nothing left to do from the call before and kBaselinePause more has
  // passed (a pod now and then: comparable with the paused unary call).
  size_t idle_not_reached = 0;
  enum class Moment { back_to_back, lists_arrived, idle };
  auto cl_stub = plugin_stub(dp, status, "akri.sh/alloc");
  std::set<std::string> used;
  for (int i = 0; i < 3 * calls; ++i) {
    std::string id = free_vdev(*node.kubelet, used);
    if (id.empty()) break;  // fewer samples, said in the table
    used.insert(id);
    size_t lists_before = cl_lists_received(*node.kubelet);
    const auto moment = static_cast<Moment>(i % 3);
    if (moment == Moment::idle) {
      if (!wait_until_idle(node.pid)) ++idle_not_reached;
      std::this_thread::sleep_for(kBaselinePause);  // then as long as the paused unary call
    }
    if (moment == Moment::lists_arrived) unary_between.push_back(baseline.timed_unary_call());
    auto allocated = timed_allocate(*cl_stub, id);
    if (allocated) {
      auto& calls = moment == Moment::back_to_back    ? cl_back_to_back
                    : moment == Moment::lists_arrived ? cl_settled
                                                      : cl_idle;
      calls.push_back(*allocated);
    }
    if (moment != Moment::back_to_back) continue;
    // The next call waits for the lists this one changed: the CL plugin's,
    // and the IL plugin's of the Instance it took a slot of (1 s at most: a
    // claim that leaves the CL list as it was sends none).
    wait_until(
        *node.kubelet,
        [&](const auto& s) {
          return cl_plugin(s).lists_received > lists_before &&
                 (!allocated || listed_as_taken(s, allocated->slot));
        },
        1s);
  }
  // IL: slot 3 of the first Instances, which the CL calls left free (they take
  // each Instance's first free slot, spread over all Instances: slots 0 and 1
  // while 3 * calls <= 2 * instances, which main() checks).
  // Every connection is made first, as the kubelet holds one per plugin: a
  // connection opened or closed during a call would be timed with it.
  std::vector<std::pair<std::string, std::unique_ptr<v1beta1::DevicePlugin::Stub>>> il_stubs;
  for (const auto& [name, resource] : status.resources) {
    if (name == "akri.sh/alloc" || il_stubs.size() >= static_cast<size_t>(calls)) continue;
    il_stubs.emplace_back(name.substr(name.find('/') + 1), plugin_stub(dp, status, name));
  }
  for (const auto& [instance, stub] : il_stubs) {
    unary_between.push_back(baseline.timed_unary_call());
    plugin_options.push_back(timed_options_call(*stub));
    if (auto allocated = timed_allocate(*stub, instance + "-3")) il.push_back(*allocated);
  }
  // IL again, slot 2 of the same Instances, while new devices keep coming.
  std::vector<Allocated> il_during_discovery;
  size_t reports = 0;
  {
    std::vector<std::string> reported = device_ids("dev-", instances);
    dowser::bench::PacedLoop churn(kChurnPeriod, [&] {
      reported.push_back("churn-" + std::to_string(reported.size()));
      send_devices(socket, reported);
    });
    for (const auto& [instance, stub] : il_stubs)
      if (auto allocated = timed_allocate(*stub, instance + "-2"))
        il_during_discovery.push_back(*allocated);
    reports = churn.ticks();
  }
  AllocateFigures figures;
  figures.il = summarize(round_trips(il));
  figures.cl = summarize(round_trips(cl_settled));
  figures.cl_back_to_back = summarize(round_trips(cl_back_to_back));
  figures.cl_idle = summarize(round_trips(cl_idle));
  figures.idle_not_reached = idle_not_reached;
  figures.il_during_discovery = summarize(round_trips(il_during_discovery));
  figures.reports_during_discovery = reports;
  figures.unary_between = summarize(unary_between);
  figures.unary_connected = summarize(unary_connected);
  figures.plugin_options = summarize(plugin_options);
  if (split) {
    node.stop();  // every line written
    const auto logged = logged_allocates(node.log_file());
    figures.il_split = split_calls(il, logged);
    figures.cl_split = split_calls(cl_settled, logged);
    figures.cl_idle_split = split_calls(cl_idle, logged);
    figures.il_during_discovery_split = split_calls(il_during_discovery, logged);
  }
  return figures;
}

// Whether all `instances` IL plugins stream their 4 slots.
bool all_streaming(const dowser::testkit::SimulatorStatus& status, int instances) {
  size_t ready = 0;
  for (const auto& [name, resource] : status.resources)
    ready += resource.streaming && resource.devices.size() == 4 ? 1 : 0;
  return ready == static_cast<size_t>(instances);
}

size_t registrations(const dowser::testkit::SimulatorStatus& status) {
  size_t count = 0;
  for (const auto& [name, resource] : status.resources) count += resource.registrations;
  return count;
}

// A kubelet restart (every socket deleted, then a new kubelet.sock): the time
// until every IL plugin streams its slots again, and how many registrations
// beyond one per plugin it took (each one more replaces a stream the kubelet
// had, leaving the resource unhealthy meanwhile), counted a second after.
// After a crash the old kubelet.sock is still there while the plugin sockets go.
json kubelet_restart(dowser::testkit::KubeletSimulator& kubelet, int instances,
                     dowser::testkit::KubeletExit exit) {
  const auto status = kubelet.status();  // a copy of thousands of resources: once
  const size_t plugins = status.resources.size();
  const size_t before = registrations(status);
  auto start = Clock::now();
  kubelet.restart(exit);
  bool all = poll_until(
      kubelet, [&](const auto& s) { return all_streaming(s, instances); }, 600s);
  double seconds = micros_since(start) / 1e6;
  std::this_thread::sleep_for(1s);
  const auto extra = static_cast<int64_t>(registrations(kubelet.status()) - before) -
                     static_cast<int64_t>(plugins);
  return {{"all", all}, {"seconds", seconds}, {"extra_registrations", extra}};
}

json scale(const fs::path& root, const fs::path& dowserd, const fs::path& handlers, int instances,
           int idle_seconds) {
  Node node(root, dowserd, handlers);
  fs::path socket = root / "bench.sock";
  node.configuration("scale", 4, "benchHandler", bench_properties(socket));
  node.start();
  wait_until(*node.kubelet, [](const auto& s) { return streaming_with(s, "akri.sh/scale", 0); });
  auto ids = device_ids("dev-", instances);
  auto start = Clock::now();
  send_devices(socket, ids);
  bool all = poll_until(
      *node.kubelet, [&](const auto& s) { return all_streaming(s, instances); }, 600s);
  double seconds = micros_since(start) / 1e6;
  auto figures = figures_of(node.pid);
  double cpu_before = cpu_seconds(node.pid);
  std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
  double idle_cpu = (cpu_seconds(node.pid) - cpu_before) / idle_seconds * 100.0;
  // Also once settled: right after the last plugin streams, the heap of the
  // registration burst may not have been trimmed yet.
  auto settled = figures_of(node.pid);
  json result = {{"instances", instances},       {"all_registered", all},
                 {"registration_s", seconds},    {"rss_mb", figures.rss_mb},
                 {"threads", figures.threads},   {"fds", figures.fds},
                 {"idle_cpu_percent", idle_cpu}, {"rss_mb_after_idle", settled.rss_mb}};
  using dowser::testkit::KubeletExit;
  result["kubelet_restart"] = kubelet_restart(*node.kubelet, instances, KubeletExit::clean);
  result["kubelet_restart_after_crash"] =
      kubelet_restart(*node.kubelet, instances, KubeletExit::crash);
  return result;
}

json startup(const fs::path& root, const fs::path& dowserd, const fs::path& handlers) {
  Node node(root, dowserd, handlers);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(handlers))
    names.push_back(entry.path().filename());
  // One empty Configuration per handler kind we can name without devices.
  node.configuration("start-bench", 1, "benchHandler");
  node.configuration("start-echo", 1, "debugEcho", "    discoveryDetails: 'descriptions: []'\n");
  node.start();
  bool ready = wait_until(*node.kubelet, [](const dowser::testkit::SimulatorStatus& s) {
    return streaming_with(s, "akri.sh/start-bench", 0) &&
           streaming_with(s, "akri.sh/start-echo", 0);
  });
  double ms = micros_since(node.started) / 1000.0;
  auto figures = figures_of(node.pid);
  return {{"handlers", names.size()},
          {"ready", ready},
          {"ready_ms", ms},
          {"rss_mb", figures.rss_mb},
          {"threads", figures.threads}};
}

constexpr int kLabelWidth = 52;  // of the table's first column

// baseline_p99 0: no ratio (a part of a call, not a call).
std::string row(const std::string& what, const Latency& l, double baseline_p99) {
  std::ostringstream out;
  out << std::left << std::setw(kLabelWidth) << what << std::right << std::fixed
      << std::setprecision(0) << std::setw(9) << l.p50 << std::setw(9) << l.p99 << std::setw(10)
      << l.max << std::setprecision(1) << std::setw(9);
  if (baseline_p99 > 0)
    out << l.p99 / baseline_p99;
  else
    out << "";
  out << std::setw(8) << l.samples;
  return out.str();
}

// The rows (each label after `prefix`) and JSON of where calls' or reports'
// time went, part by part.
template <size_t N>
json report_parts(const std::string& prefix, const std::array<Part, N>& parts,
                  const PartTimes& times) {
  json figures;
  for (size_t i = 0; i < N; ++i) {
    std::cout << row(prefix + parts[i].label, times[i], 0) << "\n";
    figures[parts[i].key] = to_json(times[i]);
  }
  return figures;
}

// The rows and JSON of a kind of Allocate call split into its parts, and
// where the slowest 1% of them spent their time.
json report_split(const std::string& kind, const CallSplit& split) {
  json figures = report_parts("  " + kind + ": ", kAllocateParts, split.parts);
  std::ostringstream slowest;
  slowest << std::fixed << std::setprecision(0);
  for (size_t i = 0; i < kAllocateParts.size(); ++i) {
    figures["slowest_1pc_mean_us"][kAllocateParts[i].key] = split.slowest_means[i];
    slowest << (i == 0 ? "" : ", ") << kAllocateParts[i].label << " " << split.slowest_means[i];
  }
  figures["slowest_1pc_calls"] = split.slowest;
  std::cout << "  " << kind << ", the slowest " << split.slowest << " call(s) (from the p99 "
            << "up), mean us: " << slowest.str() << "\n";
  return figures;
}

fs::path make_temporary_directory(const fs::path& parent) {
  std::string pattern = (parent / "dowser-bench-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create a directory in " + parent.string());
  return pattern;
}

int run_benchmarks(const fs::path& dowserd, const fs::path& handlers, const fs::path& json_out,
                   int events, int background, int calls, int allocate_instances,
                   const std::vector<int>& scales, int idle_seconds, bool discovery_split,
                   bool allocate_split) {
  fs::path root = make_temporary_directory("/tmp");
  // A fresh state base per run: state left by an earlier run would change what is measured.
  if (!Node::state_base.empty()) Node::state_base = make_temporary_directory(Node::state_base);
  auto stage = [&](const std::string& name) {
    std::cerr << "... " << name << std::endl;
    fs::path dir = root / name;
    fs::create_directories(dir);
    return dir;
  };
  json report;
  report["cores"] = std::thread::hardware_concurrency();
  // First, on a quiet machine: right after the 5000-Instance stage, whose
  // sockets and servers were still being released, it took 74 to 190 ms
  // instead of about 50.
  report["startup"] = startup(stage("startup"), dowserd, handlers);
  BaselineServer baseline(stage("baseline") / "baseline.sock");
  auto [unary, stream] = grpc_baseline(baseline, 2000);
  const auto unary_paused = unary_after_pauses(baseline, 500, kBaselinePause);
  fs::path store_dir = (Node::state_base.empty() ? root : Node::state_base) / "baseline-store";
  auto store_update = store_update_baseline(store_dir, 500, StoreUpdate::durable);
  fs::remove_all(store_dir);
  auto claim_write = store_update_baseline(store_dir, 500, StoreUpdate::written);
  fs::remove_all(store_dir);
  auto [il_discovery, cl_discovery, discovery_in_dowserd] =
      discovery_latency(stage("discovery"), dowserd, handlers, events, background, discovery_split);
  auto allocate = allocate_latency(stage("allocate"), dowserd, handlers, baseline,
                                   allocate_instances, calls, allocate_split);
  const auto& il_allocate = allocate.il;
  const auto& cl_allocate = allocate.cl;
  const auto& cl_burst = allocate.cl_back_to_back;
  report["baseline"] = {{"unary", to_json(unary)},
                        {"unary_after_pause", to_json(unary_paused)},
                        {"stream", to_json(stream)},
                        {"store_update", to_json(store_update)},
                        {"claim_write", to_json(claim_write)}};
  // What an Allocate cannot go below: the RPC plus the write of its claim.
  double allocate_floor = unary.p99 + claim_write.p99;
  report["discovery_to_kubelet"] = {
      {"il", to_json(il_discovery)}, {"cl", to_json(cl_discovery)}, {"background", background}};
  report["allocate"] = {{"il", to_json(il_allocate)},
                        {"cl", to_json(cl_allocate)},
                        {"cl_back_to_back", to_json(cl_burst)},
                        {"cl_idle", to_json(allocate.cl_idle)},
                        {"cl_idle_not_reached", allocate.idle_not_reached},
                        {"il_during_discovery", to_json(allocate.il_during_discovery)},
                        {"reports_during_discovery", allocate.reports_during_discovery},
                        {"instances", allocate_instances}};

  std::cout << std::left << std::setw(kLabelWidth) << "latency (microseconds)" << std::right
            << std::setw(9) << "p50" << std::setw(9) << "p99" << std::setw(10) << "max"
            << std::setw(9) << "p99/base" << std::setw(8) << "n"
            << "\n"
            << row("baseline: gRPC unary call (UDS)", unary, unary.p99) << "\n"
            << row("baseline: gRPC unary call, each after " +
                       std::to_string(kBaselinePause.count()) + " ms idle",
                   unary_paused, unary_paused.p99)
            << "\n"
            << row("baseline: gRPC stream message (UDS)", stream, stream.p99) << "\n"
            << row("baseline: durable file store update", store_update, store_update.p99) << "\n"
            << row("baseline: store update on the disk, flushed after", claim_write,
                   claim_write.p99)
            << "\n"
            << row("discovery -> kubelet, CL list update", cl_discovery, stream.p99) << "\n"
            << row("discovery -> kubelet, IL new plugin", il_discovery, stream.p99) << "\n";
  if (discovery_in_dowserd)
    report["discovery_to_kubelet"]["in_dowserd"] =
        report_parts("  in dowserd, new device: ", kReportParts, *discovery_in_dowserd);
  std::cout << row("Allocate RPC, IL (file store)", il_allocate, unary.p99) << "\n"
            << row("Allocate RPC, CL (file store)", cl_allocate, unary.p99) << "\n"
            << row("Allocate RPC, CL, back to back", cl_burst, unary.p99) << "\n"
            << row("Allocate RPC, CL, dowserd idle", allocate.cl_idle, unary.p99) << "\n"
            << (allocate.idle_not_reached == 0
                    ? ""
                    : "  (" + std::to_string(allocate.idle_not_reached) +
                          " of them made with dowserd still busy after " +
                          std::to_string(kIdleWaitLimit.count()) + " s)\n")
            << row("Allocate RPC, IL, a new device every " + std::to_string(kChurnPeriod.count()) +
                       " ms",
                   allocate.il_during_discovery, unary.p99)
            << "\n"
            << row("baseline: gRPC unary call, plugins connected", allocate.unary_connected,
                   allocate.unary_connected.p99)
            << "\n"
            << row("baseline: gRPC unary call, between Allocate calls", allocate.unary_between,
                   allocate.unary_between.p99)
            << "\n"
            << row("a plugin's GetDevicePluginOptions (dowserd), before IL calls",
                   allocate.plugin_options, unary.p99)
            << "\n"
            << std::fixed << std::setprecision(1)
            << "Allocate p99 / (unary p99 + update on the disk p99): IL "
            << il_allocate.p99 / allocate_floor << ", CL " << cl_allocate.p99 / allocate_floor
            << "\n"
            << "Allocate p99 / p99 of the unary call after a pause: IL "
            << il_allocate.p99 / unary_paused.p99 << ", CL " << cl_allocate.p99 / unary_paused.p99
            << ", CL with dowserd idle " << allocate.cl_idle.p99 / unary_paused.p99 << "\n";
  report["allocate"]["unary_between"] = to_json(allocate.unary_between);
  report["allocate"]["unary_connected"] = to_json(allocate.unary_connected);
  report["allocate"]["plugin_options"] = to_json(allocate.plugin_options);
  report["allocate"]["il_over_floor"] = il_allocate.p99 / allocate_floor;
  report["allocate"]["cl_over_floor"] = cl_allocate.p99 / allocate_floor;
  report["allocate"]["il_over_paused_unary"] = il_allocate.p99 / unary_paused.p99;
  report["allocate"]["cl_over_paused_unary"] = cl_allocate.p99 / unary_paused.p99;
  report["allocate"]["cl_idle_over_paused_unary"] = allocate.cl_idle.p99 / unary_paused.p99;
  if (allocate.il_split) report["allocate"]["il_split"] = report_split("IL", *allocate.il_split);
  if (allocate.cl_split) report["allocate"]["cl_split"] = report_split("CL", *allocate.cl_split);
  if (allocate.cl_idle_split)
    report["allocate"]["cl_idle_split"] = report_split("CL, dowserd idle", *allocate.cl_idle_split);
  if (allocate.il_during_discovery_split)
    report["allocate"]["il_during_discovery_split"] =
        report_split("IL, new devices", *allocate.il_during_discovery_split);

  for (int count : scales) {
    auto figures =
        scale(stage("scale-" + std::to_string(count)), dowserd, handlers, count, idle_seconds);
    report["scale"].push_back(figures);
    std::cout << "scale " << count << " Instances (capacity 4): " << figures.dump() << "\n";
  }
  std::cout << "startup: " << report["startup"].dump() << "\n";
  if (!json_out.empty()) std::ofstream(json_out) << report.dump(2) << "\n";
  fs::remove_all(root);
  if (!Node::state_base.empty()) fs::remove_all(Node::state_base);
  // A stage that never completed makes its figures meaningless: say so.
  bool complete = report["startup"]["ready"].get<bool>() && il_discovery.samples > 0 &&
                  cl_discovery.samples > 0 && il_allocate.samples > 0 && cl_allocate.samples > 0 &&
                  cl_burst.samples > 0 && allocate.cl_idle.samples > 0 &&
                  allocate.il_during_discovery.samples > 0;
  for (const auto& figures : report["scale"])
    complete = complete && figures["all_registered"].get<bool>() &&
               figures["kubelet_restart"]["all"].get<bool>() &&
               figures["kubelet_restart_after_crash"]["all"].get<bool>();
  if (!complete) std::cerr << "some stage did not complete; see the figures above\n";
  return complete ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dowserd, handlers, json_out;
  int events = 1000, calls = 500, allocate_instances = 1000, idle_seconds = 10, background = 0;
  std::vector<int> scales = {1000, 5000};
  CLI::App app{"dowser-bench: dowserd latency and scale against the kubelet simulator"};
  app.add_option("--dowserd", dowserd, "the dowserd binary")->required()->check(CLI::ExistingFile);
  app.add_option("--handlers", handlers, "directory with benchHandler and debugEcho")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--events", events, "discovery events to time")->capture_default_str();
  app.add_option("--background", background,
                 "devices already reported while discovery is timed (each event adds one more)")
      ->capture_default_str();
  app.add_option("--calls", calls, "Allocate calls to time per kind")->capture_default_str();
  app.add_option("--allocate-instances", allocate_instances, "Instances in the Allocate run")
      ->capture_default_str();
  app.add_option("--scale", scales, "Instance counts for the scale runs")->delimiter(',');
  app.add_option("--idle-seconds", idle_seconds, "how long idle CPU is measured")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--json", json_out, "also write the figures as JSON here");
  bool discovery_split = false;
  app.add_flag("--discovery-split", discovery_split,
               "run the discovery stage's dowserd with debug logging and report, from its log, "
               "where a new device's time went inside it (logging costs it a little)");
  bool allocate_split = false;
  app.add_flag("--allocate-split", allocate_split,
               "run the Allocate stage's dowserd with debug logging and report, from its log, "
               "where the calls' time went from the send to the reply, by parts (logging costs it "
               "a little)");
  app.add_option("--state-base", Node::state_base,
                 "put dowserd's state (the file store) here instead, e.g. /dev/shm, to see "
                 "what fsync costs");
  CLI11_PARSE(app, argc, argv);
  if (calls > allocate_instances || 3 * calls > 2 * allocate_instances) {
    std::cerr << "dowser-bench: --calls " << calls << " needs --allocate-instances of at least "
              << std::max(calls, (3 * calls + 1) / 2)
              << ": the CL calls (3 per --calls) take slots 0 and 1 of the Instances, the IL "
                 "calls slots 3 and 2 of the first --calls of them\n";
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  spdlog::set_level(spdlog::level::warn);  // the simulator's per-list lines would swamp the table

  try {
    return run_benchmarks(dowserd, handlers, json_out, events, background, calls,
                          allocate_instances, scales, idle_seconds, discovery_split,
                          allocate_split);
  } catch (const std::exception& error) {  // unwinds, so every dowserd started is stopped
    std::cerr << "dowser-bench: " << error.what() << "\n";
    return 1;
  }
}
