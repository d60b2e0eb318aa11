// AcceptedRequests: the digest of the request each Configuration's handler
// last accepted, kept in a file.
#include "accepted_requests.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

namespace {

using dowser::DiscoverRequest;
using dowser::discovery::AcceptedRequests;
using dowser::discovery::request_digest;

DiscoverRequest request(const std::string& details, dowser::Properties properties = {}) {
  DiscoverRequest result;
  result.discovery_details = details;
  result.properties = std::move(properties);
  return result;
}

std::string text_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(RequestDigest, ChangesWithTheHandlerTheDetailsAndEachProperty) {
  const std::string base = request_digest("udev", request("a", {{"K", "v"}}));
  EXPECT_EQ(base.size(), 32u);
  EXPECT_EQ(base, request_digest("udev", request("a", {{"K", "v"}})));
  EXPECT_NE(base, request_digest("onvif", request("a", {{"K", "v"}})));
  EXPECT_NE(base, request_digest("udev", request("b", {{"K", "v"}})));
  EXPECT_NE(base, request_digest("udev", request("a", {{"K", "w"}})));
  EXPECT_NE(base, request_digest("udev", request("a", {{"K", std::nullopt}})));
  EXPECT_NE(base, request_digest("udev", request("a")));
  // Fields cannot run into each other.
  EXPECT_NE(request_digest("ab", request("c")), request_digest("a", request("bc")));
}

TEST(AcceptedRequests, OnePerConfigurationRememberedThroughItsFileWithoutTheRequest) {
  const dowser::test::TempDir dir{"dowser-accepted"};
  const auto file = dir.path() / "state" / "accepted-requests";  // its directory is made
  const AcceptedRequests::Configuration cams{"default", "cams"}, other{"default", "other"};
  const std::string first = request_digest("udev", request("secret-password"));
  const std::string second = request_digest("udev", request("changed"));
  {
    AcceptedRequests accepted(file);
    EXPECT_FALSE(accepted.accepted(cams, first));
    accepted.accept(cams, first);
    EXPECT_TRUE(accepted.accepted(cams, first));
    EXPECT_FALSE(accepted.accepted(other, first)) << "another Configuration's, not this one's";
    accepted.accept(cams, second);
    EXPECT_FALSE(accepted.accepted(cams, first)) << "only the last one counts";
  }
  EXPECT_EQ(text_of(file), "default/cams " + second + "\n") << "one line, only a digest";
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".tmp"));

  std::ofstream(file, std::ios::app) << "default/torn 0123\n";  // not a line it writes
  AcceptedRequests reopened(file);
  EXPECT_TRUE(reopened.accepted(cams, second));
  EXPECT_FALSE(reopened.accepted({"default", "torn"}, "0123"));

  AcceptedRequests in_memory(std::nullopt);
  in_memory.accept(cams, first);
  EXPECT_TRUE(in_memory.accepted(cams, first));
}

}  // namespace
