// KubeClient over libcurl: one easy handle per request, taken from a pool so
// connections (and TLS sessions) are reused; watches run on a multi handle
// polled every 100 ms so a stop request is noticed promptly.
#include <curl/curl.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "kube_client.hpp"

namespace dowser::kube {
namespace {

using nlohmann::json;

constexpr size_t kMaxPooledHandles = 32;
constexpr std::chrono::milliseconds kStopPoll{100};
constexpr size_t kMaxMessageInError = 300;
// Sending again a request the server did not take (State::perform).
constexpr auto kRetryBudget = std::chrono::milliseconds(2000);
constexpr auto kFirstRetryDelay = std::chrono::milliseconds(100);
constexpr curl_off_t kMaxRetryAfterSeconds = 1;

struct EasyCleanup {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
using EasyHandle = std::unique_ptr<CURL, EasyCleanup>;

struct ListCleanup {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using HeaderList = std::unique_ptr<curl_slist, ListCleanup>;

struct MultiCleanup {
  void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
using MultiHandle = std::unique_ptr<CURLM, MultiCleanup>;

void initialise_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

template <typename Value>
void set_option(CURL* handle, CURLoption option, Value value) {
  const CURLcode result = curl_easy_setopt(handle, option, value);
  if (result != CURLE_OK) {
    throw ApiError(0, "", std::string("libcurl refused an option: ") + curl_easy_strerror(result));
  }
}

size_t append_to_string(char* data, size_t size, size_t count, void* target) {
  static_cast<std::string*>(target)->append(data, size * count);
  return size * count;
}

// Percent-encodes one URL path segment or query value.
std::string escape(const std::string& text) {
  static constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string escaped;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      escaped.push_back(c);
    } else {
      escaped += {'%', kHex[byte >> 4], kHex[byte & 0x0F]};
    }
  }
  return escaped;
}

std::string resource_path(const ResourceType& type, const std::string& namespace_name,
                          const std::string& name = "") {
  std::string path =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !namespace_name.empty()) path += "/namespaces/" + escape(namespace_name);
  path += "/" + type.plural;
  if (!name.empty()) path += "/" + escape(name);
  return path;
}

void require_namespace(const ResourceType& type, const std::string& namespace_name,
                       const char* operation) {
  if (type.namespaced && namespace_name.empty()) {
    throw std::invalid_argument(std::string(operation) + " of " + type.plural +
                                " needs a namespace");
  }
}

std::string name_of(const json& object, const char* operation) {
  const auto metadata = object.find("metadata");
  if (metadata != object.end() && metadata->is_object()) {
    const auto name = metadata->find("name");
    if (name != metadata->end() && name->is_string()) return name->get<std::string>();
  }
  throw std::invalid_argument(std::string(operation) + ": the object has no metadata.name");
}

// The reasons of a Status's details.causes.
std::vector<std::string> causes_of(const json& status_object) {
  std::vector<std::string> causes;
  const json::json_pointer pointer("/details/causes");
  if (!status_object.contains(pointer) || !status_object.at(pointer).is_array()) return causes;
  for (const json& cause : status_object.at(pointer)) {
    if (cause.is_object() && cause.value("reason", json()).is_string())
      causes.push_back(cause["reason"].get<std::string>());
  }
  return causes;
}

// An ApiError from an HTTP error answer, decoding a Status object if there is one.
ApiError error_from_answer(const std::string& what, long status, const std::string& body) {
  std::string reason;
  std::string message;
  std::vector<std::string> causes;
  try {
    const json status_object = json::parse(body);
    if (status_object.is_object() && status_object.value("kind", "") == "Status") {
      reason = status_object.value("reason", "");
      message = status_object.value("message", "");
      causes = causes_of(status_object);
    }
  } catch (const json::exception&) {
    // Not a Status: the body itself is the message.
  }
  if (message.empty()) message = body.substr(0, kMaxMessageInError);
  std::string text = what + ": HTTP " + std::to_string(status);
  if (!reason.empty()) text += " " + reason;
  if (!message.empty()) text += ": " + message;
  return {static_cast<int>(status), reason, text, std::move(causes)};
}

// An ApiError from a watch ERROR event: its object is a Status.
ApiError error_from_status(const std::string& what, const json& status_object) {
  const int code = status_object.is_object() && status_object.value("code", json()).is_number()
                       ? status_object["code"].get<int>()
                       : 0;
  return error_from_answer(what, code, status_object.dump());
}

json parse_answer(const std::string& what, long status, const std::string& body) {
  try {
    return json::parse(body);
  } catch (const json::parse_error& error) {
    throw ApiError(static_cast<int>(status), "InvalidResponse",
                   what + ": the answer is not JSON: " + error.what());
  }
}

// The bearer token, re-read whenever its file changes (kubelet rotates
// projected service-account tokens by swapping the file).
class TokenSource {
 public:
  TokenSource(std::string token, std::filesystem::path file)
      : token_(std::move(token)), file_(std::move(file)) {}

  std::string current() {
    if (file_.empty()) return token_;
    struct stat status {};
    if (::stat(file_.c_str(), &status) != 0) {
      throw ApiError(0, "", "bearer token file " + file_.string() + " cannot be read");
    }
    const std::lock_guard lock(mutex_);
    if (!read_once_ || status.st_ino != identity_.st_ino || status.st_size != identity_.st_size ||
        status.st_mtim.tv_sec != identity_.st_mtim.tv_sec ||
        status.st_mtim.tv_nsec != identity_.st_mtim.tv_nsec) {
      token_ = read_token();
      identity_ = status;
      read_once_ = true;
    }
    return token_;
  }

 private:
  std::string read_token() const {
    std::ifstream in(file_, std::ios::binary);
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!in.good() && !in.eof()) {
      throw ApiError(0, "", "bearer token file " + file_.string() + " cannot be read");
    }
    const auto end = text.find_last_not_of(" \t\r\n");
    text.erase(end == std::string::npos ? 0 : end + 1);
    return text;
  }

  std::mutex mutex_;
  std::string token_;
  std::filesystem::path file_;
  struct stat identity_ {};
  bool read_once_ = false;
};

// What one watch request has received and not yet handled.
struct WatchStream {
  std::string received;
  size_t handled = 0;  // bytes of received already split into events

  // The complete lines received since the last call.
  std::vector<std::string> take_lines() {
    std::vector<std::string> lines;
    for (size_t end; (end = received.find('\n', handled)) != std::string::npos;) {
      lines.push_back(received.substr(handled, end - handled));
      handled = end + 1;
    }
    received.erase(0, handled);
    handled = 0;
    return lines;
  }
};

curl_blob blob_of(const std::string& data) {
  // CURL_BLOB_COPY: libcurl copies the bytes, so they need not outlive the call.
  return curl_blob{const_cast<char*>(data.data()), data.size(), CURL_BLOB_COPY};
}

// An object as a request body. Text from outside (a handler's error message
// in an Event) may hold bytes that are not UTF-8, on which a strict dump
// throws; the API server takes only UTF-8, so such bytes become U+FFFD.
std::string body_of(const json& object) {
  return object.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

bool ApiError::gone() const noexcept {
  return status_ == 410 || reason_ == "Expired" || reason_ == "Gone";
}

bool ApiError::resource_version_too_large() const {
  if (std::find(causes_.begin(), causes_.end(), "ResourceVersionTooLarge") != causes_.end())
    return true;
  // API servers before 1.17 give no cause, only the message.
  return status_ == 504 &&
         std::string_view(what()).find("Too large resource version") != std::string_view::npos;
}

struct KubeClient::State {
  State(ClusterAccess access_in, Timeouts timeouts_in)
      : access(std::move(access_in)),
        timeouts(timeouts_in),
        tokens(access.token, access.token_file) {}

  ClusterAccess access;
  Timeouts timeouts;
  TokenSource tokens;
  std::atomic<bool> stopped{false};  // KubeClient::stop
  std::mutex pool_mutex;
  std::vector<EasyHandle> pool;

  EasyHandle take_handle() {
    {
      const std::lock_guard lock(pool_mutex);
      if (!pool.empty()) {
        EasyHandle handle = std::move(pool.back());
        pool.pop_back();
        return handle;
      }
    }
    EasyHandle handle(curl_easy_init());
    if (!handle) throw ApiError(0, "", "libcurl could not create a handle");
    return handle;
  }

  void give_back(EasyHandle handle) {
    // Forgets the options (they point at the finished request's buffers) but
    // keeps the connections and TLS sessions.
    curl_easy_reset(handle.get());
    const std::lock_guard lock(pool_mutex);
    if (pool.size() < kMaxPooledHandles) pool.push_back(std::move(handle));
  }

  // Options every request has: URL, TLS, authentication, headers, connect timeout.
  HeaderList prepare(CURL* handle, const std::string& path, bool has_body,
                     std::array<char, CURL_ERROR_SIZE>& error_text) {
    set_option(handle, CURLOPT_URL, (access.server + path).c_str());
    set_option(handle, CURLOPT_PROTOCOLS_STR, access.allow_insecure_http ? "http,https" : "https");
    set_option(handle, CURLOPT_NOSIGNAL, 1L);
    set_option(handle, CURLOPT_ERRORBUFFER, error_text.data());
    set_option(handle, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeouts.connect.count()));
    set_option(handle, CURLOPT_USERAGENT, "dowser/" DOWSER_VERSION);
    set_option(handle, CURLOPT_SSL_VERIFYPEER, 1L);
    set_option(handle, CURLOPT_SSL_VERIFYHOST, 2L);
    set_trust(handle);
    set_client_certificate(handle);
    HeaderList headers(curl_slist_append(nullptr, "Accept: application/json"));
    if (has_body)
      headers.reset(curl_slist_append(headers.release(), "Content-Type: application/json"));
    const std::string token = tokens.current();
    if (!token.empty()) {
      headers.reset(
          curl_slist_append(headers.release(), ("Authorization: Bearer " + token).c_str()));
    }
    if (!headers) throw ApiError(0, "", "libcurl could not build the request headers");
    set_option(handle, CURLOPT_HTTPHEADER, headers.get());
    return headers;
  }

  void set_trust(CURL* handle) const {
    if (!access.certificate_authority_data.empty()) {
      curl_blob blob = blob_of(access.certificate_authority_data);
      set_option(handle, CURLOPT_CAINFO_BLOB, &blob);
    } else if (!access.certificate_authority_file.empty()) {
      set_option(handle, CURLOPT_CAINFO, access.certificate_authority_file.c_str());
    } else {
      return;  // the system's CAs
    }
    // Only the given CA: not also the system's certificate directory.
    set_option(handle, CURLOPT_CAPATH, static_cast<const char*>(nullptr));
  }

  void set_client_certificate(CURL* handle) const {
    if (!access.client_certificate_data.empty()) {
      curl_blob blob = blob_of(access.client_certificate_data);
      set_option(handle, CURLOPT_SSLCERT_BLOB, &blob);
    } else if (!access.client_certificate_file.empty()) {
      set_option(handle, CURLOPT_SSLCERT, access.client_certificate_file.c_str());
    }
    if (!access.client_key_data.empty()) {
      curl_blob blob = blob_of(access.client_key_data);
      set_option(handle, CURLOPT_SSLKEY_BLOB, &blob);
    } else if (!access.client_key_file.empty()) {
      set_option(handle, CURLOPT_SSLKEY, access.client_key_file.c_str());
    }
  }

  struct Answer {
    long status = 0;
    std::string body;
  };

  // One request; throws ApiError when no HTTP answer came or it is an error.
  // One the server did not take is sent again (see Attempt::retry_after),
  // for at most kRetryBudget: the caller (the core thread, for a claim)
  // waits, and a claim that fails fails the pod.
  // A request ends once the client is stopped, or `stop` (see
  // KubeClient::list) is true.
  Answer perform(const char* method, const std::string& path,
                 const std::optional<std::string>& body = {},
                 const std::atomic<bool>* stop = nullptr) {
    using std::chrono::steady_clock;
    const Stops stops{&stopped, stop};
    const auto deadline = steady_clock::now() + kRetryBudget;
    auto timeout = timeouts.request;
    for (auto backoff = kFirstRetryDelay;; backoff *= 2) {
      if (stops.requested()) throw ApiError::stopped_request(std::string(method) + " " + path);
      Attempt attempt = send(method, path, body, timeout, stops);
      const auto delay = attempt.retry_after(backoff);
      if (!delay || steady_clock::now() + *delay > deadline) return attempt.answer();
      if (!sleep_unless_stopped(*delay, stops)) throw ApiError::stopped_request(attempt.what);
      // A resent request may take only what is left of the budget.
      timeout =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now());
    }
  }

  // What ends a request: the client's stop, and its caller's (if any).
  struct Stops {
    const std::atomic<bool>* client;
    const std::atomic<bool>* call;
    bool requested() const { return *client || (call != nullptr && *call); }
  };

  // False, at once, if a stop is (or becomes) requested.
  static bool sleep_unless_stopped(std::chrono::milliseconds delay, const Stops& stops) {
    const auto until = std::chrono::steady_clock::now() + delay;
    while (!stops.requested()) {
      const auto left = until - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return true;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, kStopPoll));
    }
    return false;
  }

  // What one try of a request got.
  struct Attempt {
    std::string what;  // "METHOD PATH"
    CURLcode result = CURLE_OK;
    std::string error_text;
    Answer answered;
    curl_off_t retry_after_seconds = 0;  // the Retry-After header, if any

    // The answer, or the ApiError it amounts to.
    Answer answer() const {
      if (result == CURLE_ABORTED_BY_CALLBACK) throw ApiError::stopped_request(what);
      if (result != CURLE_OK) throw ApiError(0, "", what + ": " + error_text);
      if (answered.status >= 300) throw error_from_answer(what, answered.status, answered.body);
      return answered;
    }

    // How long to wait before sending it again; nullopt if it should not be:
    // only when the server did not act on it, most likely (429 Too Many
    // Requests, as API Priority and Fairness answers; 502, 503, 504 from a
    // proxy or a server starting; a connection dropped before an answer, as
    // a load balancer does to an idle one). A write that did land after all
    // is refused when sent again (its resourceVersion or name conflicts),
    // and its caller reads it back. A server that cannot be reached at all
    // is not waited for: that could last, and the caller has work to do.
    std::optional<std::chrono::milliseconds> retry_after(std::chrono::milliseconds backoff) const {
      const bool unanswered =
          result == CURLE_SEND_ERROR || result == CURLE_RECV_ERROR || result == CURLE_GOT_NOTHING;
      const long status = result == CURLE_OK ? answered.status : 0;
      const bool refused = status == 429 || status == 502 || status == 503 || status == 504;
      if (!unanswered && !refused) return std::nullopt;
      if (retry_after_seconds > 0)  // clamped before any conversion could overflow
        return std::chrono::seconds(std::min(retry_after_seconds, kMaxRetryAfterSeconds));
      return backoff;
    }
  };

  Attempt send(const char* method, const std::string& path, const std::optional<std::string>& body,
               std::chrono::milliseconds timeout, const Stops& stops) {
    Attempt attempt;
    attempt.what = std::string(method) + " " + path;
    std::array<char, CURL_ERROR_SIZE> error_text{};  // outlives the handle
    EasyHandle handle = take_handle();
    const HeaderList headers = prepare(handle.get(), path, body.has_value(), error_text);
    set_option(handle.get(), CURLOPT_CUSTOMREQUEST, method);
    if (body) {
      set_option(handle.get(), CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
      set_option(handle.get(), CURLOPT_POSTFIELDS, body->c_str());
    }
    set_option(handle.get(), CURLOPT_TIMEOUT_MS,
               static_cast<long>(std::max<int64_t>(timeout.count(), 1)));
    set_option(handle.get(), CURLOPT_WRITEFUNCTION, append_to_string);
    set_option(handle.get(), CURLOPT_WRITEDATA, &attempt.answered.body);
    // Called at least once a second, also while the server holds the answer.
    set_option(handle.get(), CURLOPT_NOPROGRESS, 0L);
    set_option(handle.get(), CURLOPT_XFERINFODATA, &stops);
    set_option(
        handle.get(), CURLOPT_XFERINFOFUNCTION,
        +[](void* data, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
          return static_cast<const Stops*>(data)->requested() ? 1 : 0;
        });
    attempt.result = curl_easy_perform(handle.get());
    curl_easy_getinfo(handle.get(), CURLINFO_RESPONSE_CODE, &attempt.answered.status);
    curl_easy_getinfo(handle.get(), CURLINFO_RETRY_AFTER, &attempt.retry_after_seconds);
    give_back(std::move(handle));
    if (attempt.result != CURLE_OK)
      attempt.error_text =
          error_text[0] != '\0' ? error_text.data() : curl_easy_strerror(attempt.result);
    return attempt;
  }

  json perform_json(const char* method, const std::string& path,
                    const std::optional<std::string>& body = {},
                    const std::atomic<bool>* stop = nullptr) {
    const Answer answer = perform(method, path, body, stop);
    return parse_answer(std::string(method) + " " + path, answer.status, answer.body);
  }
};

KubeClient::KubeClient(ClusterAccess access, Timeouts timeouts) {
  const bool https = access.server.rfind("https://", 0) == 0;
  const bool http = access.server.rfind("http://", 0) == 0;
  if (!https && !(http && access.allow_insecure_http)) {
    throw ConfigError("server \"" + access.server + "\": must be an https:// URL");
  }
  while (!access.server.empty() && access.server.back() == '/') access.server.pop_back();
  initialise_curl_once();
  state_ = std::make_unique<State>(std::move(access), timeouts);
}

KubeClient::~KubeClient() = default;

void KubeClient::stop() { state_->stopped = true; }

const ClusterAccess& KubeClient::access() const noexcept { return state_->access; }

json KubeClient::get(const ResourceType& type, const std::string& namespace_name,
                     const std::string& name) {
  require_namespace(type, namespace_name, "get");
  return state_->perform_json("GET", resource_path(type, namespace_name, name));
}

json KubeClient::list(const ResourceType& type, const std::string& namespace_name,
                      const std::string& label_selector, const std::atomic<bool>* stop) {
  std::string path = resource_path(type, namespace_name);
  if (!label_selector.empty()) path += "?labelSelector=" + escape(label_selector);
  return state_->perform_json("GET", path, std::nullopt, stop);
}

json KubeClient::create(const ResourceType& type, const std::string& namespace_name,
                        const json& object) {
  require_namespace(type, namespace_name, "create");
  return state_->perform_json("POST", resource_path(type, namespace_name), body_of(object));
}

json KubeClient::replace(const ResourceType& type, const std::string& namespace_name,
                         const json& object) {
  require_namespace(type, namespace_name, "replace");
  const std::string name = name_of(object, "replace");
  return state_->perform_json("PUT", resource_path(type, namespace_name, name), body_of(object));
}

void KubeClient::remove(const ResourceType& type, const std::string& namespace_name,
                        const std::string& name,
                        const std::optional<std::string>& resource_version) {
  require_namespace(type, namespace_name, "delete");
  json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (resource_version) options["preconditions"] = {{"resourceVersion", *resource_version}};
  state_->perform("DELETE", resource_path(type, namespace_name, name), options.dump());
}

void KubeClient::watch(const ResourceType& type, const std::string& namespace_name,
                       const std::string& resource_version,
                       const std::function<void(const WatchEvent&)>& on_event,
                       const std::atomic<bool>& stop) {
  const Timeouts& timeouts = state_->timeouts;
  std::string path = resource_path(type, namespace_name) +
                     "?watch=1&allowWatchBookmarks=true&timeoutSeconds=" +
                     std::to_string(timeouts.watch_duration.count());
  if (!resource_version.empty()) path += "&resourceVersion=" + escape(resource_version);
  const std::string what = "watch " + path;
  if (state_->stopped) throw ApiError::stopped_request(what);

  std::array<char, CURL_ERROR_SIZE> error_text{};  // outlives the handle
  EasyHandle easy = state_->take_handle();
  const HeaderList headers = state_->prepare(easy.get(), path, false, error_text);
  WatchStream stream;
  set_option(easy.get(), CURLOPT_WRITEFUNCTION, append_to_string);
  set_option(easy.get(), CURLOPT_WRITEDATA, &stream.received);
  // Idle limit: less than one byte a second for watch_idle ends the watch.
  set_option(easy.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
  set_option(easy.get(), CURLOPT_LOW_SPEED_TIME, static_cast<long>(timeouts.watch_idle.count()));
  // A server that ignores timeoutSeconds is cut off a little later.
  const auto longest = std::chrono::duration_cast<std::chrono::milliseconds>(
      timeouts.watch_duration + timeouts.watch_idle);
  set_option(easy.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(longest.count()));
  set_option(easy.get(), CURLOPT_TCP_KEEPALIVE, 1L);

  const MultiHandle multi(curl_multi_init());
  if (!multi) throw ApiError(0, "", what + ": libcurl could not create a multi handle");
  curl_multi_add_handle(multi.get(), easy.get());
  // Detaches the transfer however this ends (events may throw).
  struct Detach {
    CURLM* multi;
    CURL* easy;
    ~Detach() { curl_multi_remove_handle(multi, easy); }
  } detach{multi.get(), easy.get()};

  long status = 0;
  const auto handle_lines = [&] {
    curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &status);
    if (status == 0 || status >= 300) return;  // an error body is decoded at the end
    for (const std::string& line : stream.take_lines()) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json event;
      try {
        event = json::parse(line);
      } catch (const json::parse_error& error) {
        throw ApiError(static_cast<int>(status), "InvalidResponse",
                       what + ": an event is not JSON: " + error.what());
      }
      if (!event.is_object()) {
        throw ApiError(static_cast<int>(status), "InvalidResponse",
                       what + ": an event is not a JSON object");
      }
      const auto type_member = event.find("type");
      if (type_member == event.end() || !type_member->is_string()) {
        throw ApiError(static_cast<int>(status), "InvalidResponse",
                       what + ": an event has no type");
      }
      const std::string event_type = type_member->get<std::string>();
      if (event_type == "ERROR") throw error_from_status(what, event.value("object", json()));
      on_event(WatchEvent{event_type, event.value("object", json())});
    }
  };

  int running = 1;
  while (running > 0) {
    const CURLMcode performed = curl_multi_perform(multi.get(), &running);
    if (performed != CURLM_OK) {
      throw ApiError(0, "", what + ": " + curl_multi_strerror(performed));
    }
    handle_lines();
    if (stop) return;
    if (state_->stopped) throw ApiError::stopped_request(what);
    if (running > 0)
      curl_multi_poll(multi.get(), nullptr, 0, static_cast<int>(kStopPoll.count()), nullptr);
  }

  CURLcode result = CURLE_OK;
  int left = 0;
  while (const CURLMsg* message = curl_multi_info_read(multi.get(), &left)) {
    if (message->msg == CURLMSG_DONE) result = message->data.result;
  }
  // Our own limits cut off an accepted watch that went quiet (no bookmarks
  // from this server) or outlived timeoutSeconds: a normal end, as when the
  // server ends it. Any partial last event is dropped; the next watch resumes
  // from the last one handled.
  if (result == CURLE_OPERATION_TIMEDOUT && status == 200) return;
  if (result != CURLE_OK) {
    throw ApiError(
        0, "",
        what + ": " + (error_text[0] != '\0' ? error_text.data() : curl_easy_strerror(result)));
  }
  if (status >= 300) throw error_from_answer(what, status, stream.received);
  stream.received.push_back('\n');  // a last event without its newline
  handle_lines();
}

}  // namespace dowser::kube
