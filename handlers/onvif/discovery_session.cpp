#include "discovery_session.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <utility>

namespace onvif {
namespace {

constexpr size_t kMaxParallelChecks = 16;

}  // namespace

DiscoverySession::DiscoverySession(Settings settings, CredentialStore credentials, ApiFactory api,
                                   Report report, Log log, Fail fail)
    : settings_(std::move(settings)),
      credentials_(std::move(credentials)),
      api_(std::move(api)),
      report_(std::move(report)),
      log_(std::move(log)),
      fail_(std::move(fail)),
      cancel_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (cancel_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  try {
    std::vector<std::string> warnings;
    auto interfaces = multicast_interfaces(settings_, warnings);
    for (const auto& warning : warnings) log_(dowser::LogLevel::warn, warning);
    if (interfaces.empty() && settings_.unicast_targets.empty())
      log_(dowser::LogLevel::warn,
           "no multicast interface and no unicast probe target: no camera can be found");
    WsddEvents& events = *this;
    discovery_ = std::make_unique<WsDiscovery>(interfaces, settings_.unicast_targets, events);
  } catch (...) {
    ::close(cancel_fd_);
    throw;
  }
  thread_ = std::thread([this] { run(); });
}

DiscoverySession::~DiscoverySession() {
  cancelled_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(cancel_fd_, &one, sizeof one);
  thread_.join();
  discovery_.reset();
  ::close(cancel_fd_);
}

void DiscoverySession::run() {
  try {
    for (;;) {
      auto pass_start = std::chrono::steady_clock::now();
      in_pass_ = true;
      answered_.clear();
      for (const auto& problem : discovery_->probe())
        note(kProbeProblem, {std::nullopt, false, problem});
      if (!wait_until(pass_start + settings_.discovery_timeout)) return;
      in_pass_ = false;
      run_pass_checks();
      if (!wait_until(pass_start + settings_.discovery_interval)) return;
    }
  } catch (const std::exception& e) {                      // out of memory, or a report that threw
    fail_(std::string("discovery stopped: ") + e.what());  // not left looking as if it ran
  }
}

// Listens until the deadline; a Hello heard between passes is checked at once.
bool DiscoverySession::wait_until(std::chrono::steady_clock::time_point deadline) {
  do {
    if (!discovery_->listen_once(deadline, cancel_fd_)) return false;
    if (!in_pass_ && !announced_.empty()) check_announced();
  } while (std::chrono::steady_clock::now() < deadline);
  return !cancelled_;
}

void DiscoverySession::run_pass_checks() {
  std::vector<Announcement> cameras;
  for (const auto& [uuid, camera] : answered_) cameras.push_back(camera);
  auto verdicts = check_all(cameras);
  if (cancelled_) return;
  const auto before = std::exchange(devices_, {});
  // Cameras that did not answer this pass are gone: forget their verdicts
  // and problems (UUIDs come from the network: spoofed Hellos, cameras
  // replaced), so a camera back with the same problem is told again.
  std::erase_if(settled_, [&](const auto& entry) { return !answered_.contains(entry.first); });
  std::erase_if(problems_, [&](const auto& entry) {
    return entry.first != kProbeProblem && !answered_.contains(entry.first);
  });
  for (size_t i = 0; i < cameras.size(); ++i) {
    if (verdicts[i]) {
      remember(cameras[i], *verdicts[i]);
    } else if (auto kept = before.find(device_uuid(cameras[i].endpoint)); kept != before.end()) {
      devices_.insert(*kept);  // not checked: reported as it was
    }
  }
  publish();
}

void DiscoverySession::check_announced() {
  std::vector<Announcement> cameras;
  for (const auto& [uuid, camera] : announced_) cameras.push_back(camera);
  auto verdicts = check_all(cameras);
  if (cancelled_) return;
  for (size_t i = 0; i < cameras.size(); ++i)
    if (verdicts[i]) remember(cameras[i], *verdicts[i]);
  announced_.clear();
  publish();
}

std::vector<std::optional<Evaluation>> DiscoverySession::check_all(
    const std::vector<Announcement>& cameras) {
  // nullopt: no checker got to it (they stopped); checked again next pass.
  std::vector<std::optional<Evaluation>> verdicts(cameras.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    try {
      auto api = api_(cancelled_);
      for (size_t i; !cancelled_ && (i = next++) < cameras.size();)
        verdicts[i] = check(cameras[i], *api);
    } catch (const std::exception& e) {  // no client (out of memory): the others go on
      log_(dowser::LogLevel::warn, std::string("a camera checker stopped: ") + e.what());
    }
  };
  std::vector<std::jthread> workers;  // joined before what they use goes
  size_t count = std::min(kMaxParallelChecks, cameras.size());
  for (size_t i = 1; i < count; ++i) {
    try {
      workers.emplace_back(work);
    } catch (const std::system_error&) {  // no thread to be had (a pids limit): fewer do it all
      break;
    }
  }
  if (count > 0) work();
  workers.clear();
  return verdicts;
}

// A settled verdict is reused while the camera announces the same thing; a
// reported camera must still answer GetSystemDateAndTime (Akri's pass check).
Evaluation DiscoverySession::check(const Announcement& camera, CameraApi& api) const {
  auto it = settled_.find(device_uuid(camera.endpoint));
  if (it != settled_.end() && it->second.announcement == camera) {
    const Evaluation& known = it->second.evaluation;
    if (!known.device) return known;
    try {
      api.get_system_date_and_time(known.device->properties.at(kServiceUrlProperty).value_or(""));
      return known;
    } catch (const std::exception&) {  // evaluate afresh: maybe another address answers
    }
  }
  return evaluate_camera(camera, settings_, credentials_, api);
}

void DiscoverySession::remember(const Announcement& camera, const Evaluation& evaluation) {
  std::string uuid = device_uuid(camera.endpoint);
  if (evaluation.settled) {
    settled_[uuid] = {camera, evaluation};
  } else {
    settled_.erase(uuid);
  }
  if (evaluation.device) {
    devices_[uuid] = *evaluation.device;
  } else {
    devices_.erase(uuid);
  }
  note(uuid, evaluation);
}

void DiscoverySession::publish() {
  std::vector<dowser::Device> devices;
  for (const auto& [uuid, device] : devices_) devices.push_back(device);
  if (reported_ == devices) return;
  if (report_(devices)) reported_ = std::move(devices);
}

// Logs a camera's problem once per change, not once per pass.
void DiscoverySession::note(const std::string& uuid, const Evaluation& evaluation) {
  auto it = problems_.find(uuid);
  if (evaluation.problem.empty()) {
    if (it == problems_.end()) return;
    problems_.erase(it);
    log_(dowser::LogLevel::info, "camera " + uuid + ": answers again");
    return;
  }
  if (it != problems_.end() && it->second == evaluation.problem) return;
  problems_[uuid] = evaluation.problem;
  log_(evaluation.settled ? dowser::LogLevel::info : dowser::LogLevel::warn,
       (uuid == kProbeProblem ? "" : "camera " + uuid + ": ") + evaluation.problem);
}

void DiscoverySession::probe_match(Announcement camera) {
  if (!in_pass_) return;  // a late answer to the previous pass's probe
  answered_[device_uuid(camera.endpoint)] = std::move(camera);
}

void DiscoverySession::hello(Announcement camera) {
  if (!is_video_transmitter(camera.types) || camera.xaddrs.empty()) return;
  std::string uuid = device_uuid(camera.endpoint);
  if (in_pass_) {
    answered_[uuid] = std::move(camera);
  } else {
    announced_[uuid] = std::move(camera);
  }
}

void DiscoverySession::bye(const std::string& endpoint) {
  std::string uuid = device_uuid(endpoint);
  answered_.erase(uuid);
  announced_.erase(uuid);
  settled_.erase(uuid);
  if (devices_.erase(uuid) > 0 && !in_pass_) publish();
}

}  // namespace onvif
