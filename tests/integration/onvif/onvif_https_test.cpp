// The onvif handler against cameras whose device and media services speak
// HTTPS only, with a self-signed certificate made here by `openssl req
// -x509` (as cameras carry): found by unicast Probe on 127.0.0.1, read over
// TLS without verifying the certificate, with right and wrong digest
// credentials.
#include "camera_sim_process.hpp"
#include "snapshot_queries.hpp"

#include <gtest/gtest.h>
#include <dowser/testkit.hpp>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <system_error>

namespace onvif::peers {
namespace {

using dowser::testkit::FakeHost;

constexpr auto kWait = 20s;
const std::string kGateUuid = "9a7e0000-0000-4000-8000-000000000001";
const std::string kVaultUuid = "7a017000-0000-4000-8000-000000000002";

// "gate" open, "vault" with user operator/s3cret.
const std::string kCameras = R"({"cameras": [
  {"name": "gate", "uuid": "9a7e0000-0000-4000-8000-000000000001", "ip": "172.16.0.10",
   "mac": "00:aa:bb:cc:dd:01", "manufacturer": "Tls Cams", "model": "Gate 2",
   "profiles": [{"token": "hd", "uri": "rtsp://172.16.0.10/hd"},
                {"token": "sd", "uri": "rtsp://172.16.0.10/sd"}]},
  {"name": "vault", "uuid": "7a017000-0000-4000-8000-000000000002", "ip": "172.16.0.11",
   "mac": "00:aa:bb:cc:dd:02", "serial": "V-9", "username": "operator", "password": "s3cret",
   "profiles": [{"token": "only", "uri": "rtsp://172.16.0.11/only"}]}]})";

// A self-signed certificate and its key in a fresh directory, removed at the end.
class SelfSignedCertificate {
 public:
  SelfSignedCertificate() {
    std::string pattern = (fs::temp_directory_path() / "onvif-tls-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "mkdtemp");
    directory_ = pattern;
    std::string command =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2"
        " -subj /CN=onvif-test-camera -keyout '" +
        key().string() + "' -out '" + certificate().string() + "' 2>'" +
        (directory_ / "openssl.log").string() + "'";
    if (std::system(command.c_str()) != 0)
      throw std::runtime_error("openssl req -x509 failed: see " + directory_.string());
  }
  ~SelfSignedCertificate() { fs::remove_all(directory_); }
  SelfSignedCertificate(const SelfSignedCertificate&) = delete;
  SelfSignedCertificate& operator=(const SelfSignedCertificate&) = delete;

  fs::path certificate() const { return directory_ / "camera.crt"; }
  fs::path key() const { return directory_ / "camera.key"; }

 private:
  fs::path directory_;
};

class OnvifHttps : public ::testing::Test {
 protected:
  dowser::DiscoverRequest request(dowser::Properties properties) {
    properties["ONVIF_MULTICAST_INTERFACES"] = "none";
    properties["ONVIF_UNICAST_PROBE_TARGETS"] = sim_.probe_target();
    return {"discoveryTimeoutSeconds: 0.3\ndiscoveryIntervalSeconds: 0.5\n", properties};
  }

  std::string device_service(const std::string& name) const {
    return "https://127.0.0.1:" + std::to_string(sim_.http_port) + "/onvif/" + name +
           "/device_service";
  }

  std::string logs() const {
    std::string text;
    for (const auto& line : host_.logs()) text += line.text + "\n";
    return text + "--- simulator:\n" + sim_.transcript();
  }

  SelfSignedCertificate tls_;
  CameraSimulator sim_{
      kCameras, {"--tls-cert", tls_.certificate().string(), "--tls-key", tls_.key().string()}};
  FakeHost host_{ONVIF_MODULE_PATH};
};

TEST_F(OnvifHttps, CamerasServingHttpsOnlyAreReadWithTheirDigestCredentials) {
  auto session =
      host_.start(request({{"username_7a017000_0000_4000_8000_000000000002", "operator"},
                           {"password_7a017000_0000_4000_8000_000000000002", "s3cret"}}));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({kGateUuid, kVaultUuid}), kWait)) << logs();
  auto snapshot = *host_.latest_snapshot(session);
  const auto& gate = *find(snapshot, kGateUuid);
  EXPECT_EQ(property(gate, "ONVIF_DEVICE_SERVICE_URL"), device_service("gate"));
  EXPECT_EQ(property(gate, "ONVIF_DEVICE_IP_ADDRESS"), "172.16.0.10");
  EXPECT_EQ(property(gate, "ONVIF_DEVICE_MAC_ADDRESS"), "00:aa:bb:cc:dd:01");
  EXPECT_EQ(property(gate, "ONVIF_DEVICE_MANUFACTURER"), "Tls Cams");
  EXPECT_EQ(property(gate, "ONVIF_DEVICE_MODEL"), "Gate 2");
  EXPECT_EQ(property(gate, "ONVIF_DEVICE_STREAM_URIS"),
            "rtsp://172.16.0.10/hd rtsp://172.16.0.10/sd");
  const auto& vault = *find(snapshot, kVaultUuid);
  EXPECT_EQ(property(vault, "ONVIF_DEVICE_SERVICE_URL"), device_service("vault"));
  EXPECT_EQ(property(vault, "ONVIF_DEVICE_IP_ADDRESS"), "172.16.0.11");
  EXPECT_EQ(property(vault, "ONVIF_DEVICE_SERIAL_NUMBER"), "V-9");
  EXPECT_EQ(property(vault, "ONVIF_DEVICE_STREAM_URI"), "rtsp://172.16.0.11/only");
  EXPECT_EQ(sim_.count_lines("AUTH-FAILED"), 0u) << logs();
  host_.stop(session);
  EXPECT_TRUE(host_.violations().empty());
}

TEST_F(OnvifHttps, WrongCredentialsOverHttpsAreRefusedByTheCamera) {
  auto session =
      host_.start(request({{"username_default", "operator"}, {"password_default", "wrong"}}));
  ASSERT_TRUE(host_.wait_for_snapshot(session, has_ids({kGateUuid, kVaultUuid}), kWait)) << logs();
  auto snapshot = *host_.latest_snapshot(session);
  EXPECT_EQ(property(*find(snapshot, kGateUuid), "ONVIF_DEVICE_IP_ADDRESS"), "172.16.0.10")
      << "the open camera ignores the token";
  const auto& vault = *find(snapshot, kVaultUuid);
  EXPECT_EQ(property(vault, "ONVIF_DEVICE_SERVICE_URL"), device_service("vault"));
  EXPECT_EQ(property(vault, "ONVIF_DEVICE_IP_ADDRESS"), "<absent>");
  EXPECT_EQ(property(vault, "ONVIF_DEVICE_STREAM_URI"), "<absent>");
  EXPECT_GE(sim_.count_lines("AUTH-FAILED vault"), 1u) << "the token reached the camera over TLS";
  host_.stop(session);
}

}  // namespace
}  // namespace onvif::peers
