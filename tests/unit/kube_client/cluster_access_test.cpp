// Loading ClusterAccess from kubeconfig files and from a pod's service
// account (both written to a temporary directory), base64 and backoff bounds.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>

#include "apiserver_peer.hpp"
#include "kube_client.hpp"

namespace dowser::kube::testing {
namespace {

constexpr const char* kClusters = R"(
clusters:
- name: far
  cluster:
    server: https://far.example:6443
    certificate-authority-data: Q0EgUEVN
- name: near
  cluster:
    server: https://127.0.0.1:8443
    certificate-authority: pki/ca.crt
)";

constexpr const char* kUsers = R"(
users:
- name: alice
  user:
    token: alice-token
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: robot
  user:
    tokenFile: secrets/token
    client-certificate: /etc/robot.crt
    client-key: robot.key
)";

constexpr const char* kContexts = R"(
contexts:
- name: far-alice
  context: {cluster: far, user: alice}
- name: near-robot
  context: {cluster: near, user: robot, namespace: edge}
current-context: far-alice
)";

class KubeconfigTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& text) {
    const fs::path file = directory_.path() / "config";
    write_text(file, text);
    return file;
  }

  // The ConfigError message of loading text.
  std::string error_of(const std::string& text, const std::string& context = "") {
    const fs::path file = write(text);
    try {
      load_kubeconfig(file, context);
    } catch (const ConfigError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(file.string()), std::string::npos) << message;
      return message;
    }
    ADD_FAILURE() << "no ConfigError for:\n" << text;
    return "";
  }

  TemporaryDirectory directory_;
};

TEST_F(KubeconfigTest, ReadsTheCurrentContextWithInlineData) {
  const ClusterAccess access = load_kubeconfig(write(std::string(kClusters) + kUsers + kContexts));
  EXPECT_EQ(access.server, "https://far.example:6443");
  EXPECT_EQ(access.certificate_authority_data, "CA PEM");
  EXPECT_TRUE(access.certificate_authority_file.empty());
  EXPECT_EQ(access.token, "alice-token");
  EXPECT_EQ(access.client_certificate_data, "CERT");
  EXPECT_EQ(access.client_key_data, "KEY");
  EXPECT_EQ(access.default_namespace, "default");
  EXPECT_FALSE(access.allow_insecure_http);
}

TEST_F(KubeconfigTest, ReadsTheNamedContextAndResolvesRelativePathsAgainstItsDirectory) {
  const ClusterAccess access =
      load_kubeconfig(write(std::string(kClusters) + kUsers + kContexts), "near-robot");
  const fs::path base = fs::absolute(directory_.path());
  EXPECT_EQ(access.server, "https://127.0.0.1:8443");
  EXPECT_EQ(access.certificate_authority_file, base / "pki/ca.crt");
  EXPECT_EQ(access.token_file, base / "secrets/token");
  EXPECT_TRUE(access.token.empty());
  EXPECT_EQ(access.client_certificate_file, "/etc/robot.crt");
  EXPECT_EQ(access.client_key_file, base / "robot.key");
  EXPECT_EQ(access.default_namespace, "edge");
}

TEST_F(KubeconfigTest, ErrorsNameTheFileAndTheField) {
  const std::string users_and_contexts = std::string(kUsers) + kContexts;
  EXPECT_NE(error_of(std::string(kClusters) + kUsers).find("current-context: missing"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kClusters) + users_and_contexts, "nowhere")
                .find("contexts: no entry named \"nowhere\""),
            std::string::npos);
  EXPECT_NE(error_of(users_and_contexts).find("clusters: missing"), std::string::npos);
  EXPECT_NE(error_of(R"(
clusters:
- name: far
  cluster: {server: "http://far.example"}
)" + users_and_contexts)
                .find("clusters[0].cluster.server: must be an https:// URL"),
            std::string::npos);
  EXPECT_NE(error_of(R"(
clusters:
- name: far
  cluster: {server: "https://far.example", insecure-skip-tls-verify: true}
)" + users_and_contexts)
                .find("clusters[0].cluster.insecure-skip-tls-verify: not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"(
clusters:
- name: far
  cluster: {server: "https://far.example", certificate-authority-data: "not*base64"}
)" + users_and_contexts)
                .find("clusters[0].cluster.certificate-authority-data: not base64"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kClusters) + R"(
users:
- name: alice
  user: {exec: {command: aws}}
)" + kContexts)
                .find("users[0].user.exec: not supported"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kClusters) + R"(
users:
- name: alice
  user: {client-key-data: S0VZ}
)" + kContexts)
                .find("users[0].user.client-certificate: missing"),
            std::string::npos);
  EXPECT_NE(error_of("[not, a, mapping]").find("document: expected a mapping"), std::string::npos);
  EXPECT_NE(error_of("clusters: [unclosed").find("not YAML"), std::string::npos);
}

TEST_F(KubeconfigTest, AMissingFileIsAConfigError) {
  EXPECT_THROW(load_kubeconfig(directory_.path() / "absent"), ConfigError);
}

// setenv is process-wide: these tests restore what they change.
class InClusterTest : public ::testing::Test {
 protected:
  InClusterTest() {
    write_text(directory_.path() / "token", "service-account-token\n");
    write_text(directory_.path() / "ca.crt", "CA PEM\n");
    write_text(directory_.path() / "namespace", "edge\n");
  }
  ~InClusterTest() override {
    ::unsetenv("KUBERNETES_SERVICE_HOST");
    ::unsetenv("KUBERNETES_SERVICE_PORT");
  }
  static void set_service(const char* host, const char* port) {
    ::setenv("KUBERNETES_SERVICE_HOST", host, 1);
    ::setenv("KUBERNETES_SERVICE_PORT", port, 1);
  }
  TemporaryDirectory directory_;
};

TEST_F(InClusterTest, ReadsTheServiceAccountAndTheServiceAddress) {
  set_service("10.96.0.1", "443");
  const ClusterAccess access = load_in_cluster(directory_.path());
  EXPECT_EQ(access.server, "https://10.96.0.1:443");
  EXPECT_EQ(access.token_file, directory_.path() / "token");
  EXPECT_TRUE(access.token.empty());  // read (and re-read) from the file
  EXPECT_EQ(access.certificate_authority_file, directory_.path() / "ca.crt");
  EXPECT_EQ(access.default_namespace, "edge");

  set_service("fd00::1", "6443");
  EXPECT_EQ(load_in_cluster(directory_.path()).server, "https://[fd00::1]:6443");
}

TEST_F(InClusterTest, OutsideAPodOrWithoutAServiceAccountIsAConfigError) {
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_THROW(load_in_cluster(directory_.path()), ConfigError);
  set_service("10.96.0.1", "443");
  fs::remove(directory_.path() / "token");
  try {
    load_in_cluster(directory_.path());
    ADD_FAILURE() << "no ConfigError without a token";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find((directory_.path() / "token").string()),
              std::string::npos);
  }
}

TEST(Base64Test, DecodesWithAndWithoutPaddingAndRefusesOtherText) {
  EXPECT_EQ(decode_base64(""), "");
  EXPECT_EQ(decode_base64("aHVudGVyMg=="), "hunter2");
  EXPECT_EQ(decode_base64("aHVudGVyMg"), "hunter2");
  EXPECT_EQ(decode_base64("aHVu\ndGVy"), "hunter");
  EXPECT_EQ(decode_base64("/+8="), std::string("\xff\xef"));
  EXPECT_THROW(decode_base64("aHVu*GVy"), std::invalid_argument);
  EXPECT_THROW(decode_base64("aHVudGVyMg==aA"), std::invalid_argument);
  EXPECT_THROW(decode_base64("a"), std::invalid_argument);
}

TEST(BackoffTest, TheCeilingDoublesFromInitialUpToMax) {
  const Backoff backoff{std::chrono::milliseconds(200), std::chrono::milliseconds(30000)};
  EXPECT_EQ(backoff.ceiling(0).count(), 0);
  EXPECT_EQ(backoff.ceiling(1).count(), 200);
  EXPECT_EQ(backoff.ceiling(2).count(), 400);
  EXPECT_EQ(backoff.ceiling(8).count(), 25600);
  EXPECT_EQ(backoff.ceiling(9).count(), 30000);
  EXPECT_EQ(backoff.ceiling(1000000).count(), 30000);
}

TEST(BackoffTest, DelaysAreFullyJitteredBelowTheCeiling) {
  const Backoff backoff{std::chrono::milliseconds(100), std::chrono::milliseconds(1000)};
  std::minstd_rand random(42);
  for (int failures = 1; failures <= 12; ++failures) {
    std::chrono::milliseconds shortest = backoff.ceiling(failures);
    std::chrono::milliseconds longest{0};
    for (int i = 0; i < 500; ++i) {
      const std::chrono::milliseconds delay = backoff.delay(failures, random);
      ASSERT_GE(delay.count(), 0);
      ASSERT_LE(delay, backoff.ceiling(failures));
      shortest = std::min(shortest, delay);
      longest = std::max(longest, delay);
    }
    // Spread over the whole range, not clustered at the ceiling.
    EXPECT_LT(shortest, backoff.ceiling(failures) / 4) << failures;
    EXPECT_GT(longest, backoff.ceiling(failures) * 3 / 4) << failures;
  }
}

TEST(KubeClientTest, PlainHttpIsRefusedUnlessAllowed) {
  ClusterAccess access;
  access.server = "http://127.0.0.1:1";
  EXPECT_THROW(KubeClient{access}, ConfigError);
  access.allow_insecure_http = true;
  EXPECT_NO_THROW(KubeClient{access});
}

}  // namespace
}  // namespace dowser::kube::testing
