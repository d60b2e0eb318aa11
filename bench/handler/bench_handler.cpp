// benchHandler: reports, at once, the device list a benchmark sends it. The
// harness sends one datagram per event to the unix socket named by the
// discovery property BENCH_SOCKET: newline-separated device ids, the whole
// list (a snapshot, as the ABI wants). No polling, so what the harness
// measures is dowser's own latency. Details must be empty.
#include <dowser/handler.hpp>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <thread>

namespace {

class DatagramSession final : public dowser::Session {
 public:
  DatagramSession(dowser::Reporter reporter, const std::string& path, dowser::Sharing sharing)
      : reporter_(std::move(reporter)), sharing_(sharing) {
    socket_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    wake_ = ::eventfd(0, EFD_CLOEXEC);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof address.sun_path)
      throw dowser::InvalidArgument("BENCH_SOCKET too long");
    std::strcpy(address.sun_path, path.c_str());
    ::unlink(path.c_str());
    if (socket_ < 0 || wake_ < 0 ||
        ::bind(socket_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      throw dowser::Error(DOWSER_ERR_GENERIC, "cannot bind " + path + ": " + std::strerror(errno));
    }
    reporter_.report({});
    thread_ = std::thread([this] { run(); });
  }
  ~DatagramSession() override {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_, &one, sizeof one);
    thread_.join();
    ::close(socket_);
    ::close(wake_);
  }

 private:
  void run() {
    std::string buffer(1 << 20, '\0');
    pollfd fds[2] = {{socket_, POLLIN, 0}, {wake_, POLLIN, 0}};
    while (::poll(fds, 2, -1) >= 0 || errno == EINTR) {
      if (fds[1].revents != 0) return;
      ssize_t length = ::recv(socket_, buffer.data(), buffer.size(), 0);
      if (length >= 0) reporter_.report(devices(std::string_view(buffer.data(), length)));
    }
  }

  std::vector<dowser::Device> devices(std::string_view text) const {
    std::vector<dowser::Device> result;
    std::istringstream lines{std::string(text)};
    for (std::string id; std::getline(lines, id);)
      if (!id.empty()) result.push_back({id, {{"BENCH_ID", id}}, {}, {}, sharing_});
    return result;
  }

  dowser::Reporter reporter_;
  dowser::Sharing sharing_;
  int socket_ = -1;
  int wake_ = -1;
  std::thread thread_;
};

class BenchHandler final : public dowser::Handler {
 public:
  void validate(const dowser::DiscoverRequest& request) override {
    if (!request.discovery_details.empty())
      throw dowser::InvalidArgument("benchHandler takes no discovery details");
  }
  std::unique_ptr<dowser::Session> start(const dowser::DiscoverRequest& request,
                                         dowser::Reporter reporter) override {
    validate(request);
    std::string path = request.property_or("BENCH_SOCKET", "");
    if (path.empty()) return std::make_unique<dowser::Session>();  // nothing to listen to
    auto sharing = request.property_or("BENCH_SHARED", "false") == "true" ? dowser::Sharing::shared
                                                                          : dowser::Sharing::local;
    return std::make_unique<DatagramSession>(std::move(reporter), path, sharing);
  }
};

}  // namespace

DOWSER_HANDLER(BenchHandler, "benchHandler", "1.0.0", 0)
