// kube_client: the Kubernetes REST client dowser uses when the cluster's API
// server is its store and its Configuration source. libcurl for HTTP (TLS
// always verified), nlohmann-json for bodies. Knows nothing about Akri: callers
// name the resources they want.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dowser::kube {

// How to reach and authenticate to one API server.
struct ClusterAccess {
  std::string server;  // "https://host:port" (http:// refused unless allow_insecure_http)
  // Trust: a PEM bundle given inline or as a file; neither means the system CAs.
  std::string certificate_authority_data;
  std::filesystem::path certificate_authority_file;
  // Client certificate authentication (inline PEM or files).
  std::string client_certificate_data, client_key_data;
  std::filesystem::path client_certificate_file, client_key_file;
  // Bearer token: inline, or a file re-read whenever it changes (rotated
  // service-account tokens).
  std::string token;
  std::filesystem::path token_file;
  std::string default_namespace = "default";
  bool allow_insecure_http = false;  // tests only; never set from a kubeconfig
};

// A kubeconfig file (the current context, or the named one). Relative file
// paths resolve against the kubeconfig's directory. Throws ConfigError naming
// the file and the field that is missing or wrong.
ClusterAccess load_kubeconfig(const std::filesystem::path& path, const std::string& context = "");

// In-cluster: KUBERNETES_SERVICE_HOST/PORT and the service-account directory
// (token, ca.crt, namespace). Throws ConfigError when not inside a pod.
ClusterAccess load_in_cluster(const std::filesystem::path& service_account_dir =
                                  "/var/run/secrets/kubernetes.io/serviceaccount");

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Standard base64 (RFC 4648, padding optional, no line breaks), as
// kubeconfig "-data" fields and Secret data use it. Throws
// std::invalid_argument naming the first bad character.
std::string decode_base64(std::string_view text);

// A failed request. status is the HTTP status (404, 409, 410, ...), or 0 when
// no HTTP answer came (connection, TLS, timeout). reason is the Status
// object's reason ("NotFound", "Conflict", "Expired", ...) when there was one,
// causes the reasons of its details.causes ("ResourceVersionTooLarge", ...).
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string reason, const std::string& message,
           std::vector<std::string> causes = {})
      : std::runtime_error(message),
        status_(status),
        reason_(std::move(reason)),
        causes_(std::move(causes)) {}
  int status() const noexcept { return status_; }
  const std::string& reason() const noexcept { return reason_; }
  const std::vector<std::string>& causes() const noexcept { return causes_; }
  bool not_found() const noexcept { return status_ == 404; }
  bool conflict() const noexcept { return status_ == 409; }
  // 410, or its reasons without the code (as client-go reads a watch's
  // ERROR event): the resourceVersion is no longer in the server's history.
  bool gone() const noexcept;
  // The server has not reached the resourceVersion asked for (504; after an
  // etcd restore, say): the version will not come, only a new list helps.
  bool resource_version_too_large() const;
  // The request ended because its caller, or the client, was stopped
  // (KubeClient::stop): no answer, and nothing to tell at a shutdown.
  bool stopped() const noexcept { return reason_ == kStoppedReason; }
  static ApiError stopped_request(const std::string& what) {
    return {0, kStoppedReason, what + ": stopped"};
  }

 private:
  static constexpr const char* kStoppedReason = "ClientStopped";  // never a server's
  int status_;
  std::string reason_;
  std::vector<std::string> causes_;
};

// A resource type: core ("", "v1", "secrets") or a group ("akri.sh", "v0",
// "instances"). Namespaced types take a namespace on every call; an empty
// namespace in list/watch means all namespaces.
struct ResourceType {
  std::string group;
  std::string version;
  std::string plural;
  bool namespaced = true;
};

// The resource types dowser reads and writes, named once for the product and its tests.
namespace resources {
inline const ResourceType kConfigurations{"akri.sh", "v0", "configurations", true};
inline const ResourceType kInstances{"akri.sh", "v0", "instances", true};
inline const ResourceType kSecrets{"", "v1", "secrets", true};
inline const ResourceType kConfigMaps{"", "v1", "configmaps", true};
inline const ResourceType kEvents{"", "v1", "events", true};
inline const ResourceType kNodes{"", "v1", "nodes", false};
inline const ResourceType kNamespaces{"", "v1", "namespaces", false};
}  // namespace resources

struct Timeouts {
  std::chrono::milliseconds connect{3000};
  std::chrono::milliseconds request{10000};  // whole request, except watches
  // A watch asks the server to end it after this long (timeoutSeconds) and
  // gives up if nothing (not even a bookmark) arrives for idle.
  std::chrono::seconds watch_duration{300};
  std::chrono::seconds watch_idle{90};
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  nlohmann::json object;
};

// Thread-safe: each call uses its own curl easy handle (or one from a pool).
class KubeClient {
 public:
  explicit KubeClient(ClusterAccess access, Timeouts timeouts = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  const ClusterAccess& access() const noexcept;

  // Ends every request in flight, within about a second (a watch: 100 ms),
  // and every later one at once, with an ApiError whose stopped() is true:
  // at a shutdown no thread waits for a slow API server. For good.
  void stop();

  // All throw ApiError. Objects are returned as the server sent them.
  nlohmann::json get(const ResourceType& type, const std::string& namespace_name,
                     const std::string& name);
  // The List object (items, metadata.resourceVersion). With stop, ends
  // (ApiError "...: stopped") within about a second of it becoming true,
  // also while a slow server holds the answer.
  nlohmann::json list(const ResourceType& type, const std::string& namespace_name,
                      const std::string& label_selector = "",
                      const std::atomic<bool>* stop = nullptr);
  nlohmann::json create(const ResourceType& type, const std::string& namespace_name,
                        const nlohmann::json& object);
  // PUT: the object's metadata.resourceVersion is the precondition (409 when stale).
  nlohmann::json replace(const ResourceType& type, const std::string& namespace_name,
                         const nlohmann::json& object);
  // DELETE, with preconditions.resourceVersion when resource_version is given.
  void remove(const ResourceType& type, const std::string& namespace_name, const std::string& name,
              const std::optional<std::string>& resource_version = {});

  // One watch request from resource_version (with allowWatchBookmarks):
  // calls on_event for each event on the calling thread until the server
  // ends the stream (returns normally), the accepted (200) stream stays
  // silent for watch_idle or outlasts watch_duration + watch_idle (returns
  // normally too: servers that send no bookmarks go quiet on a type nobody
  // changes), stop becomes true (returns soon after, within about 100 ms), or
  // an error (throws ApiError; gone() when resource_version is too old,
  // resource_version_too_large() when the server has not reached it, also
  // when they arrive as an ERROR event, whose Status may lack a code).
  void watch(const ResourceType& type, const std::string& namespace_name,
             const std::string& resource_version,
             const std::function<void(const WatchEvent&)>& on_event, const std::atomic<bool>& stop);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Capped exponential backoff with full jitter, for reconnecting.
struct Backoff {
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max{30000};

  // The longest wait after `failures` consecutive failures (1, 2, ...):
  // initial, doubled per further failure, at most max; zero for none.
  std::chrono::milliseconds ceiling(int failures) const;
  // Full jitter: uniform in [0, ceiling(failures)], so reconnecting clients
  // spread out instead of retrying in step.
  std::chrono::milliseconds delay(int failures, std::minstd_rand& random) const;
};

// Keeps an up-to-date view of one resource type: list, then watch from the
// list's resourceVersion; on 410 Gone or a version too large re-lists; after
// a watch ends normally, watches again at once from the last resourceVersion
// seen (bookmarks included); on any other error, or a watch that ended at
// once with nothing, reconnects the same way with backoff. Handlers run on the reflector's own
// thread, in order; they must not throw and must not call stop().
class Reflector {
 public:
  // The complete current set (after the first list and every re-list), as of
  // the list's resourceVersion; it refers to the reflector's data, valid
  // during the handler's call only.
  struct Listing {
    const std::vector<nlohmann::json>& objects;
    const std::string& resource_version;
  };
  struct Handlers {
    std::function<void(const Listing& listing)> listed;
    // One change after the last list: "ADDED", "MODIFIED" or "DELETED".
    std::function<void(const std::string& type, const nlohmann::json& object)> changed;
    // A failed request (logged by the caller); the reflector retries by itself.
    // Not called for 410 Gone or a version too large, which a re-list answers.
    std::function<void(const ApiError& error)> failed;
    // The view is current as of now: after every list, every watch event
    // (bookmarks included, so a quiet resource still tells) and every watch
    // that ended normally (not one that ended at once with nothing, which
    // counts as a failure). After a failed request the reflector watches on
    // from where it was, without a list: this is what says it is back.
    // Any handler may be empty.
    std::function<void()> current;
  };

  Reflector(KubeClient& client, ResourceType type, std::string namespace_name, Handlers handlers,
            Backoff backoff = {});
  ~Reflector();  // stops
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void start();
  void stop();  // idempotent; joins the thread
  // True once the first list has been delivered.
  bool synced() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dowser::kube
