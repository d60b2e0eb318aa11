// AcceptedRequests: digests of accepted discovery requests, kept in a file.
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

TEST(AcceptedRequests, RemembersAcrossInstancesThroughItsFileWithoutTheRequests) {
  const dowser::test::TempDir dir{"dowser-accepted"};
  const auto file = dir.path() / "state" / "accepted-requests";  // its directory is made
  const std::string digest = request_digest("udev", request("secret-password"));
  {
    AcceptedRequests accepted(file);
    EXPECT_FALSE(accepted.contains(digest));
    accepted.add(digest);
    accepted.add(digest);
    EXPECT_TRUE(accepted.contains(digest));
  }
  std::ifstream in(file);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  EXPECT_EQ(text, digest + "\n") << "once, and only the digest";
  std::ofstream(file, std::ios::app) << "0123";  // a line torn by a crash
  AcceptedRequests reopened(file);
  EXPECT_TRUE(reopened.contains(digest));
  EXPECT_FALSE(reopened.contains("0123"));

  AcceptedRequests in_memory(std::nullopt);
  in_memory.add(digest);
  EXPECT_TRUE(in_memory.contains(digest));
}

}  // namespace
