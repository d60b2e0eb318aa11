// Where ClusterAccess comes from: a kubeconfig file or the pod's service
// account. Every error names the file and the field.
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "kube_client.hpp"

namespace dowser::kube {
namespace {

namespace fs = std::filesystem;

bool is_https(const std::string& server) { return server.rfind("https://", 0) == 0; }

class KubeconfigReader {
 public:
  explicit KubeconfigReader(const fs::path& file) : file_(file) {
    try {
      root_ = YAML::LoadFile(file.string());
    } catch (const YAML::BadFile&) {
      throw ConfigError(file.string() + ": cannot be read");
    } catch (const YAML::Exception& error) {
      throw ConfigError(file.string() + ": not YAML: " + error.what());
    }
    if (!root_.IsMap()) fail("document", "expected a mapping");
  }

  ClusterAccess read(const std::string& wanted_context) const {
    const std::string context_name =
        wanted_context.empty() ? required_scalar(root_, "current-context") : wanted_context;
    const auto [context, context_path] = named_entry("contexts", "context", context_name);
    ClusterAccess access;
    const auto [cluster, cluster_path] =
        named_entry("clusters", "cluster", required_scalar(context, context_path + ".cluster"));
    read_cluster(cluster, cluster_path, access);
    const std::string user_name = optional_scalar(context, context_path + ".user");
    if (!user_name.empty()) {
      const auto [user, user_path] = named_entry("users", "user", user_name);
      read_user(user, user_path, access);
    }
    const std::string namespace_name = optional_scalar(context, context_path + ".namespace");
    if (!namespace_name.empty()) access.default_namespace = namespace_name;
    return access;
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    throw ConfigError(file_.string() + ": " + field + ": " + reason);
  }

  static std::string leaf(const std::string& path) { return path.substr(path.rfind('.') + 1); }

  // The scalar at path (relative to parent: its last component), or "" when absent.
  std::string optional_scalar(const YAML::Node& parent, const std::string& path) const {
    const YAML::Node value = parent[leaf(path)];
    if (!value.IsDefined() || value.IsNull()) return "";
    if (!value.IsScalar()) fail(path, "expected a string");
    return value.as<std::string>();
  }

  std::string required_scalar(const YAML::Node& parent, const std::string& path) const {
    std::string value = optional_scalar(parent, path);
    if (value.empty()) fail(path, "missing");
    return value;
  }

  // The `item_key` mapping of the entry of list `list_key` named name, and its path.
  std::pair<YAML::Node, std::string> named_entry(const char* list_key, const char* item_key,
                                                 const std::string& name) const {
    const YAML::Node list = root_[list_key];
    if (!list.IsDefined() || list.IsNull()) fail(list_key, "missing");
    if (!list.IsSequence()) fail(list_key, "expected a list");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = std::string(list_key) + "[" + std::to_string(i) + "]";
      if (!list[i].IsMap()) fail(path, "expected a mapping");
      if (optional_scalar(list[i], path + ".name") != name) continue;
      const YAML::Node item = list[i][item_key];
      if (!item.IsMap()) fail(path + "." + item_key, "expected a mapping");
      return {item, path + "." + item_key};
    }
    fail(list_key, "no entry named \"" + name + "\"");
  }

  fs::path resolve(const std::string& file) const {
    fs::path path(file);
    if (path.empty() || path.is_absolute()) return path;
    return fs::absolute(file_).parent_path() / path;
  }

  std::string decoded(const YAML::Node& parent, const std::string& path) const {
    const std::string text = optional_scalar(parent, path);
    try {
      return decode_base64(text);
    } catch (const std::invalid_argument& error) {
      fail(path, error.what());
    }
  }

  void read_cluster(const YAML::Node& cluster, const std::string& path,
                    ClusterAccess& access) const {
    access.server = required_scalar(cluster, path + ".server");
    if (!is_https(access.server)) fail(path + ".server", "must be an https:// URL");
    if (cluster["insecure-skip-tls-verify"].IsDefined() &&
        optional_scalar(cluster, path + ".insecure-skip-tls-verify") == "true") {
      fail(path + ".insecure-skip-tls-verify", "not supported: TLS is always verified");
    }
    access.certificate_authority_data = decoded(cluster, path + ".certificate-authority-data");
    if (access.certificate_authority_data.empty()) {
      access.certificate_authority_file =
          resolve(optional_scalar(cluster, path + ".certificate-authority"));
    }
  }

  void read_user(const YAML::Node& user, const std::string& path, ClusterAccess& access) const {
    for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
      if (user[unsupported].IsDefined()) {
        fail(path + "." + unsupported,
             "not supported (use a token, tokenFile or a client certificate)");
      }
    }
    access.token = optional_scalar(user, path + ".token");
    if (access.token.empty())
      access.token_file = resolve(optional_scalar(user, path + ".tokenFile"));
    access.client_certificate_data = decoded(user, path + ".client-certificate-data");
    if (access.client_certificate_data.empty()) {
      access.client_certificate_file = resolve(optional_scalar(user, path + ".client-certificate"));
    }
    access.client_key_data = decoded(user, path + ".client-key-data");
    if (access.client_key_data.empty()) {
      access.client_key_file = resolve(optional_scalar(user, path + ".client-key"));
    }
    const bool has_certificate =
        !access.client_certificate_data.empty() || !access.client_certificate_file.empty();
    const bool has_key = !access.client_key_data.empty() || !access.client_key_file.empty();
    if (has_certificate != has_key) {
      fail(path + (has_certificate ? ".client-key" : ".client-certificate"),
           "missing (a client certificate needs both certificate and key)");
    }
  }

  fs::path file_;
  YAML::Node root_;
};

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path.string() + ": cannot be read");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string trimmed(std::string text) {
  const auto not_space = text.find_last_not_of(" \t\r\n");
  text.erase(not_space == std::string::npos ? 0 : not_space + 1);
  return text.substr(std::min(text.size(), text.find_first_not_of(" \t\r\n")));
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read once at start
  return value == nullptr ? "" : value;
}

}  // namespace

ClusterAccess load_kubeconfig(const fs::path& path, const std::string& context) {
  return KubeconfigReader(path).read(context);
}

ClusterAccess load_in_cluster(const fs::path& service_account_dir) {
  const std::string host = environment("KUBERNETES_SERVICE_HOST");
  const std::string port = environment("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    throw ConfigError(
        "not inside a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
  }
  ClusterAccess access;
  // An IPv6 service address needs brackets in a URL.
  const bool ipv6 = host.find(':') != std::string::npos;
  access.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  access.token_file = service_account_dir / "token";
  access.certificate_authority_file = service_account_dir / "ca.crt";
  for (const fs::path& required : {access.token_file, access.certificate_authority_file}) {
    if (!fs::exists(required)) {
      throw ConfigError(required.string() + ": missing (no service account mounted?)");
    }
  }
  const fs::path namespace_file = service_account_dir / "namespace";
  if (fs::exists(namespace_file)) {
    const std::string namespace_name = trimmed(read_text_file(namespace_file));
    if (!namespace_name.empty()) access.default_namespace = namespace_name;
  }
  return access;
}

}  // namespace dowser::kube
