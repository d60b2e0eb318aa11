// AcceptedRequests: the digest of the request each Configuration's handler
// last accepted, kept in a file.
#include "accepted_requests.hpp"
#include "log_capture.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

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
  boost::asio::io_context io;
  {
    AcceptedRequests accepted(file, io);
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
  AcceptedRequests reopened(file, io);
  EXPECT_TRUE(reopened.accepted(cams, second));
  EXPECT_FALSE(reopened.accepted({"default", "torn"}, "0123"));

  AcceptedRequests in_memory(std::nullopt, io);
  in_memory.accept(cams, first);
  EXPECT_TRUE(in_memory.accepted(cams, first));
}

TEST(AcceptedRequests, ADeletedConfigurationsLineGoes) {
  const dowser::test::TempDir dir{"dowser-accepted"};
  const auto file = dir.path() / "accepted-requests";
  const AcceptedRequests::Configuration cams{"default", "cams"}, other{"default", "other"};
  const std::string digest = request_digest("udev", request("a"));
  boost::asio::io_context io;
  AcceptedRequests accepted(file, io);
  accepted.accept(cams, digest);
  accepted.accept(other, digest);
  accepted.forget(cams);
  EXPECT_FALSE(accepted.accepted(cams, digest));
  EXPECT_EQ(text_of(file), "default/other " + digest + "\n");
  accepted.forget({"default", "never-accepted"});  // nothing to forget
  EXPECT_TRUE(AcceptedRequests(file, io).accepted(other, digest));
}

// A digest of a request with a Secret's value is worth guessing against:
// the file is the owner's alone, also when a crash left its temporary file.
TEST(AcceptedRequests, TheFileIsTheOwnersAlone) {
  const dowser::test::TempDir dir{"dowser-accepted"};
  const auto file = dir.path() / "accepted-requests";
  const auto owner_only = std::filesystem::perms::owner_read | std::filesystem::perms::owner_write;
  const std::string digest = request_digest("onvif", request("", {{"PASS", "s3cret"}}));
  std::ofstream(file) << "default/old " << digest << "\n";  // as an older dowserd left it
  std::filesystem::permissions(file, std::filesystem::perms::all);
  std::ofstream(file.string() + ".tmp") << "left by a crash\n";
  std::filesystem::permissions(file.string() + ".tmp", std::filesystem::perms::all);
  boost::asio::io_context io;
  AcceptedRequests accepted(file, io);
  EXPECT_EQ(std::filesystem::status(file).permissions(), owner_only) << "as soon as it is read";
  accepted.accept({"default", "cams"}, digest);
  EXPECT_EQ(std::filesystem::status(file).permissions(), owner_only) << "as written anew";
  EXPECT_TRUE(AcceptedRequests(file, io).accepted({"default", "old"}, digest));
}

// One that exists and cannot be read stops the daemon, naming it: saving
// over it would lose every other Configuration's record.
TEST(AcceptedRequests, AFileThatCannotBeReadIsAnErrorNotAnEmptyFile) {
  const dowser::test::TempDir dir{"dowser-accepted"};
  const auto file = dir.path() / "accepted-requests";
  std::filesystem::create_directories(file);  // read() fails: EISDIR
  boost::asio::io_context io;
  try {
    AcceptedRequests accepted(file, io);
    ADD_FAILURE() << "read as empty";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("cannot read " + file.string() + ": Is a directory"),
              std::string::npos)
        << error.what();
  }
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// A file that cannot be written (here its temporary file's name is taken by
// a directory that is not empty) is written again later, with backoff, without another accept:
// a full disk that frees up must not leave it unwritten. Logged once.
TEST(AcceptedRequests, AFileThatCannotBeWrittenIsRetriedAndLoggedOnce) {
  const dowser::test::TempDir dir{"dowser-accepted"};
  const auto file = dir.path() / "accepted-requests";
  const auto blocker = file.string() + ".tmp";
  std::filesystem::create_directories(std::filesystem::path(blocker) / "in-use");  // not removable
  const std::string digest = request_digest("udev", request("a"));
  const dowser::test::LogCapture log;
  boost::asio::io_context io;  // only the retries run on it
  AcceptedRequests accepted(
      file, io, {.first = std::chrono::milliseconds(1), .max = std::chrono::milliseconds(4)});

  accepted.accept({"default", "cams"}, digest);
  EXPECT_TRUE(accepted.accepted({"default", "cams"}, digest)) << "remembered all the same";
  for (int retry = 0; retry < 3; ++retry)
    ASSERT_EQ(io.run_one_for(std::chrono::seconds(5)), 1u) << "no retry " << retry;
  EXPECT_FALSE(std::filesystem::exists(file));
  const std::string warning = "cannot record accepted discovery requests in " + file.string() +
                              ": open " + blocker + ": Is a directory";
  EXPECT_EQ(count_of(log.text(), warning), 1u) << log.text();

  std::filesystem::remove_all(blocker);
  ASSERT_EQ(io.run_one_for(std::chrono::seconds(5)), 1u) << "no retry after room came back";
  EXPECT_EQ(text_of(file), "default/cams " + digest + "\n");
  EXPECT_EQ(
      count_of(log.text(), "recorded accepted discovery requests in " + file.string() + " again"),
      1u)
      << log.text();
  EXPECT_EQ(io.run_one_for(std::chrono::seconds(5)), 0u) << "no retry once written";
}

}  // namespace
