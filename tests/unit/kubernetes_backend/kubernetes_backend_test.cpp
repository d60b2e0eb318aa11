// kubernetes_backend::load against the real module, a missing file and a
// library that is not the module; ldd on dowserd and on the module.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>

#include "kubernetes_backend.hpp"
#include "test_support.hpp"

namespace dowser::kubernetes_backend {
namespace {

namespace fs = std::filesystem;

// BackendError's message of loading module with options; "" when it loads.
std::string load_error(const fs::path& module, const BackendOptions& options = {}) {
  try {
    load(module, options);
  } catch (const BackendError& e) {
    return e.what();
  }
  return "";
}

std::string ldd(const fs::path& file) {
  std::string output;
  FILE* pipe = ::popen(("ldd '" + file.string() + "'").c_str(), "r");
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer{};
  while (size_t read = std::fread(buffer.data(), 1, buffer.size(), pipe))
    output.append(buffer.data(), read);
  ::pclose(pipe);
  return output;
}

TEST(KubernetesBackend, DowserdMapsNoLibcurlTheModuleDoes) {
  const std::string dowserd = ldd(DOWSERD);
  ASSERT_NE(dowserd.find("libc.so"), std::string::npos) << dowserd;
  EXPECT_EQ(dowserd.find("libcurl"), std::string::npos) << dowserd;
  EXPECT_NE(ldd(KUBERNETES_MODULE).find("libcurl"), std::string::npos);
}

TEST(KubernetesBackend, DowserdLooksForTheModuleBesideItsBinDirectory) {
  // Tests run from bin/, as dowserd does: the same relative path.
  EXPECT_TRUE(fs::equivalent(default_module_path(), KUBERNETES_MODULE))
      << default_module_path() << " vs " << KUBERNETES_MODULE;
}

TEST(KubernetesBackend, AMissingModuleIsAnErrorNamingIt) {
  const std::string error = load_error("/nonexistent/lib/dowser/libdowser-kubernetes.so");
  EXPECT_NE(error.find("cannot load the Kubernetes module "
                       "/nonexistent/lib/dowser/libdowser-kubernetes.so: "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
}

TEST(KubernetesBackend, ALibraryWithoutTheFactoryIsRefused) {
  const std::string error = load_error(DEBUG_ECHO_SO);
  EXPECT_NE(error.find(std::string(DEBUG_ECHO_SO) + " is not dowser's Kubernetes module"),
            std::string::npos)
      << error;
}

TEST(KubernetesBackend, TheModuleReportsABadKubeconfig) {
  const std::string error = load_error(KUBERNETES_MODULE, {"/nonexistent/kubeconfig", "", "n"});
  EXPECT_NE(error.find("/nonexistent/kubeconfig"), std::string::npos) << error;
}

TEST(KubernetesBackend, TheModuleMakesABackendForTheKubeconfigsServer) {
  store::testing::TemporaryDirectory directory;
  const fs::path kubeconfig = directory.path() / "config";
  std::ofstream(kubeconfig) << R"(
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: robot
  user: {token: robot-token}
contexts:
- name: local
  context: {cluster: local, user: robot}
current-context: local
)";
  auto backend = load(KUBERNETES_MODULE, {kubeconfig, "edge", "node-a"});
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->server(), "https://127.0.0.1:1");
  EXPECT_FALSE(backend->api_status().ok) << "nothing asked yet";
  backend->stop();  // idempotent with the destructor's
}

}  // namespace
}  // namespace dowser::kubernetes_backend
