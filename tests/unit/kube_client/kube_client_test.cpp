// KubeClient and Reflector against the test API server over TLS: trust,
// authentication, CRUD with preconditions, watches, 410 and reconnects.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "apiserver_peer.hpp"
#include "eventually.hpp"
#include "kube_client.hpp"
#include "recorder.hpp"

namespace dowser::kube::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

using resources::kConfigMaps;
using resources::kNamespaces;

json config_map(const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}}},
          {"data", {{"value", value}}}};
}

std::string version_of(const json& object) {
  return object.at("metadata").at("resourceVersion").get<std::string>();
}

// The ApiError an action throws (status -1 if none).
ApiError error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ApiError& error) {
    return error;
  }
  return {-1, "", "no ApiError"};
}

using dowser::test::Recorder;

class KubeClientServerTest : public ::testing::Test {
 protected:
  TestApiServer server_;
};

TEST_F(KubeClientServerTest, RefusesAServerSignedByAnotherCa) {
  // Another CA, made the same way: the server's certificate does not chain to
  // it.
  const TemporaryDirectory other;
  ASSERT_EQ(
      std::system((std::string(KUBE_APISERVER_DIR) + "/make-pki.sh " +  // NOLINT(cert-env33-c)
                   other.path().string() + " >/dev/null 2>&1")
                      .c_str()),
      0);
  ClusterAccess access = server_.access();
  access.certificate_authority_data = read_text(other.path() / "ca.crt");
  KubeClient client(access);
  const ApiError refused = error_of([&] { client.list(kNamespaces, ""); });
  EXPECT_EQ(refused.status(), 0) << refused.what();

  access.certificate_authority_data.clear();  // the system's CAs do not know it either
  KubeClient system_trust(access);
  EXPECT_EQ(error_of([&] { system_trust.list(kNamespaces, ""); }).status(), 0);

  access.certificate_authority_file = server_.ca_file();  // the right CA, from a file
  KubeClient trusting(access);
  EXPECT_NO_THROW(trusting.list(kNamespaces, ""));
}

TEST_F(KubeClientServerTest, AuthenticatesWithABearerToken) {
  ClusterAccess access = server_.access();
  ASSERT_FALSE(access.token.empty());
  KubeClient client(access);
  EXPECT_FALSE(client.list(kNamespaces, "").at("items").empty());

  access.token = "wrong";
  KubeClient wrong(access);
  const ApiError refused = error_of([&] { wrong.list(kNamespaces, ""); });
  EXPECT_EQ(refused.status(), 401) << refused.what();
  EXPECT_EQ(refused.reason(), "Unauthorized");
}

TEST_F(KubeClientServerTest, ReReadsTheTokenFileWhenItIsRotated) {
  // The server accepts whatever its token file holds, and so does our client
  // from its own copy: a client keeping the old token would get 401.
  const TemporaryDirectory own;
  const fs::path token_file = own.path() / "token";
  write_text(token_file, "stale-token\n");
  ClusterAccess access = server_.access("dowser-test-token-file");
  access.token_file = token_file;
  KubeClient client(access);
  EXPECT_EQ(error_of([&] { client.list(kNamespaces, ""); }).status(), 401);

  write_text(token_file, read_text(server_.token_file()));
  EXPECT_NO_THROW(client.list(kNamespaces, ""));

  write_text(server_.token_file(),
             "rotated-token-0123456789\n");  // the server rotates
  EXPECT_EQ(error_of([&] { client.list(kNamespaces, ""); }).status(), 401);
  write_text(token_file,
             "rotated-token-0123456789\n");  // and so does the kubelet
  EXPECT_NO_THROW(client.list(kNamespaces, ""));
}

TEST_F(KubeClientServerTest, AuthenticatesWithAClientCertificateFromDataOrFiles) {
  ClusterAccess access = server_.access("dowser-test-client-certificate");
  ASSERT_TRUE(access.token.empty() && access.token_file.empty());
  KubeClient from_data(access);
  EXPECT_NO_THROW(from_data.list(kNamespaces, ""));

  access.client_certificate_data.clear();
  access.client_key_data.clear();
  access.client_certificate_file = server_.directory() / "client.crt";
  access.client_key_file = server_.directory() / "client.key";
  KubeClient from_files(access);
  EXPECT_NO_THROW(from_files.list(kNamespaces, ""));

  access.client_certificate_file.clear();
  access.client_key_file.clear();
  KubeClient anonymous(access);
  EXPECT_EQ(error_of([&] { anonymous.list(kNamespaces, ""); }).status(), 401);
}

TEST_F(KubeClientServerTest, CreatesReadsReplacesAndRemovesWithPreconditions) {
  KubeClient client(server_.access());
  const json created = client.create(kConfigMaps, "default", config_map("settings", "one"));
  EXPECT_EQ(created.at("data").at("value"), "one");
  const std::string first_version = version_of(created);
  EXPECT_EQ(client.get(kConfigMaps, "default", "settings"), created);

  const ApiError exists =
      error_of([&] { client.create(kConfigMaps, "default", config_map("settings", "two")); });
  EXPECT_EQ(exists.status(), 409);
  EXPECT_EQ(exists.reason(), "AlreadyExists");

  json changed = created;
  changed["data"]["value"] = "two";
  const json replaced = client.replace(kConfigMaps, "default", changed);
  EXPECT_EQ(replaced.at("data").at("value"), "two");
  EXPECT_NE(version_of(replaced), first_version);

  changed["data"]["value"] = "stale";  // still carries first_version
  const ApiError stale = error_of([&] { client.replace(kConfigMaps, "default", changed); });
  EXPECT_TRUE(stale.conflict()) << stale.what();
  EXPECT_EQ(stale.reason(), "Conflict");

  const json listed = client.list(kConfigMaps, "default");
  ASSERT_EQ(listed.at("items").size(), 1u);
  EXPECT_EQ(listed.at("items")[0].at("data").at("value"), "two");
  EXPECT_FALSE(version_of(listed).empty());
  EXPECT_EQ(client.list(kConfigMaps, "").at("items").size(),
            1u);  // all namespaces

  EXPECT_TRUE(error_of([&] {
                client.remove(kConfigMaps, "default", "settings", first_version);
              }).conflict());
  client.remove(kConfigMaps, "default", "settings", version_of(replaced));
  const ApiError gone = error_of([&] { client.get(kConfigMaps, "default", "settings"); });
  EXPECT_TRUE(gone.not_found()) << gone.what();
  EXPECT_EQ(gone.reason(), "NotFound");
  EXPECT_TRUE(error_of([&] { client.remove(kConfigMaps, "default", "settings"); }).not_found());
  EXPECT_TRUE(error_of([&] {
                client.create(kConfigMaps, "absent-namespace", config_map("x", "y"));
              }).not_found());
}

// How many requests the server answered with status.
size_t requests_answered(const TestApiServer& server, int status) {
  std::istringstream log(read_text(server.directory() / "requests.log"));
  size_t count = 0;
  for (std::string line; std::getline(log, line);)
    if (line.find(" " + std::to_string(status) + " user=") != std::string::npos) ++count;
  return count;
}

// A write the server turns away for now (429 with Retry-After: 1, as API
// Priority and Fairness does) is sent again after that wait, so a claim does
// not fail its pod for it; but not for longer than about 2 s in all.
TEST(KubeClientThrottleTest, AWriteTurnedAwayForNowIsSentAgainForAWhile) {
  TestApiServer server({"--no-crds", "--throttle-writes", "3"});
  KubeClient client(server.access());
  const ApiError throttled =
      error_of([&] { client.create(kConfigMaps, "default", config_map("settings", "one")); });
  EXPECT_EQ(throttled.status(), 429) << throttled.what();
  EXPECT_EQ(throttled.reason(), "TooManyRequests");
  // The request log is written as each answer's connection closes: waited for.
  auto answered = [&](int status, size_t count) {
    return dowser::test::eventually([&] { return requests_answered(server, status) == count; });
  };
  EXPECT_TRUE(answered(429, 2)) << "one retry fits the budget";

  const json created = client.create(kConfigMaps, "default", config_map("settings", "one"));
  EXPECT_EQ(created.at("data").at("value"), "one");
  EXPECT_TRUE(answered(429, 3));
  EXPECT_TRUE(answered(201, 1));
}

// Text from a handler (an Event's message) may hold bytes that are not
// UTF-8: they are replaced, not thrown on where nothing catches it.
TEST_F(KubeClientServerTest, BytesThatAreNotUtf8AreSentAsReplacementCharacters) {
  KubeClient client(server_.access());
  const json created = client.create(kConfigMaps, "default", config_map("odd", "bad \xc3 byte"));
  EXPECT_EQ(created.at("data").at("value"), "bad \xef\xbf\xbd byte");
  json changed = created;
  changed["data"]["value"] = "cut \xe2\x82";
  EXPECT_EQ(client.replace(kConfigMaps, "default", changed).at("data").at("value"),
            "cut \xef\xbf\xbd");
}

TEST_F(KubeClientServerTest, ListsBySelectorAndHandlesClusterScopedTypes) {
  KubeClient client(server_.access());
  json labelled = config_map("labelled", "1");
  labelled["metadata"]["labels"] = {{"app", "dowser"}};
  client.create(kConfigMaps, "default", labelled);
  client.create(kConfigMaps, "default", config_map("plain", "2"));
  const json selected = client.list(kConfigMaps, "default", "app=dowser");
  ASSERT_EQ(selected.at("items").size(), 1u);
  EXPECT_EQ(selected.at("items")[0].at("metadata").at("name"), "labelled");

  client.create(kNamespaces, "", {{"metadata", {{"name", "edge"}}}});
  EXPECT_EQ(client.get(kNamespaces, "", "edge").at("metadata").at("name"), "edge");
}

// History of 3 events; bookmarks at the default minute, so they do not
// move a watch's version along (a bookmark carries the server's latest).
class WatchTest : public ::testing::Test {
 protected:
  TestApiServer server_{{"--history", "3"}};
};

TEST(WatchBookmarkTest, DeliversChangesInOrderAndBookmarksUntilStopped) {
  TestApiServer server({"--bookmark-interval-ms", "100"});
  KubeClient client(server.access());
  const std::string from = version_of(client.list(kConfigMaps, "default"));
  Recorder recorder;
  std::atomic<bool> stop{false};
  std::exception_ptr failure;
  std::thread watching([&] {
    try {
      client.watch(
          kConfigMaps, "default", from,
          [&](const WatchEvent& event) {
            const json& metadata = event.object.at("metadata");
            recorder.add(event.type + " " + metadata.value("name", "") +
                         (event.type == "BOOKMARK" && !version_of(event.object).empty()
                              ? "with-version"
                              : "") +
                         (event.object.contains("data") ? " " + event.object["data"].dump() : ""));
          },
          stop);
    } catch (...) {
      failure = std::current_exception();
    }
    recorder.add("returned");
  });

  const json created = client.create(kConfigMaps, "default", config_map("watched", "one"));
  json changed = created;
  changed["data"]["value"] = "two";
  const json replaced = client.replace(kConfigMaps, "default", changed);
  client.remove(kConfigMaps, "default", "watched", version_of(replaced));
  EXPECT_TRUE(recorder.wait_for_entry("DELETED watched {\"value\":\"two\"}"));
  EXPECT_TRUE(recorder.wait_for_entry("BOOKMARK with-version"));
  stop = true;
  EXPECT_TRUE(recorder.wait_for_entry("returned"));
  watching.join();
  EXPECT_FALSE(failure);

  std::vector<std::string> changes;
  for (const std::string& entry : recorder.entries()) {
    if (entry.rfind("BOOKMARK", 0) != 0 && entry != "returned") changes.push_back(entry);
  }
  EXPECT_EQ(changes, (std::vector<std::string>{"ADDED watched {\"value\":\"one\"}",
                                               "MODIFIED watched {\"value\":\"two\"}",
                                               "DELETED watched {\"value\":\"two\"}"}));
}

TEST_F(WatchTest, AVersionOlderThanTheHistoryIsGone) {
  KubeClient client(server_.access());
  const std::string from = version_of(client.list(kConfigMaps, "default"));
  for (int i = 0; i < 5; ++i)
    client.create(kConfigMaps, "default", config_map("cm" + std::to_string(i), "x"));
  const std::atomic<bool> stop{false};
  const ApiError gone = error_of([&] {
    client.watch(
        kConfigMaps, "default", from, [](const WatchEvent&) {}, stop);
  });
  EXPECT_TRUE(gone.gone()) << gone.what();
  EXPECT_EQ(gone.reason(), "Expired");
}

// Reflector handlers that record "listed a,b", "ADDED x", "failed <status>".
Reflector::Handlers recording(Recorder& recorder) {
  Reflector::Handlers handlers;
  handlers.listed = [&recorder](const Reflector::Listing& listing) {
    std::string names;
    for (const json& object : listing.objects)
      names += (names.empty() ? "" : ",") + object["metadata"]["name"].get<std::string>();
    recorder.add("listed " + names);
  };
  handlers.changed = [&recorder](const std::string& type, const json& object) {
    recorder.add(type + " " + object["metadata"]["name"].get<std::string>());
  };
  handlers.failed = [&recorder](const ApiError& error) {
    recorder.add("failed " + std::to_string(error.status()));
  };
  return handlers;
}

// A reflector on `server` (3 events of history) lists again once changes
// elsewhere push its version out of the history.
void expect_a_reflector_to_relist_when_its_version_expires(TestApiServer& server) {
  Timeouts timeouts;
  timeouts.watch_duration = 1s;  // reconnects often, each time from its last version
  KubeClient client(server.access(), timeouts);
  client.create(kConfigMaps, "default", config_map("before", "x"));
  Recorder recorder;
  Reflector reflector(client, kConfigMaps, "default", recording(recorder), Backoff{10ms, 100ms});
  EXPECT_FALSE(reflector.synced());
  reflector.start();
  ASSERT_TRUE(recorder.wait_for_entry("listed before"));

  // Changes elsewhere push the reflector's version out of the 3-event
  // history; once its watch ends it cannot resume, and must list again.
  for (int i = 0; i < 5; ++i)
    client.create(kNamespaces, "", {{"metadata", {{"name", "filler-" + std::to_string(i)}}}});
  client.create(kConfigMaps, "default", config_map("removed", "x"));
  client.create(kConfigMaps, "default", config_map("after", "x"));
  client.remove(kConfigMaps, "default", "removed");
  for (int i = 5; i < 10; ++i)
    client.create(kNamespaces, "", {{"metadata", {{"name", "filler-" + std::to_string(i)}}}});
  // Either the live watch saw "after" or the re-list does; the re-list must
  // come.
  EXPECT_TRUE(recorder.wait_for([](const auto& entries) {
    return std::count_if(entries.begin(), entries.end(), [](const std::string& entry) {
             return entry.rfind("listed ", 0) == 0;
           }) >= 2;
  })) << ::testing::PrintToString(recorder.entries());
  EXPECT_TRUE(recorder.wait_for_entry("listed after,before"));
  reflector.stop();
  EXPECT_TRUE(reflector.synced());  // set once the first list was handled
  for (const std::string& entry : recorder.entries())
    EXPECT_EQ(entry.rfind("failed", 0), std::string::npos) << entry;
}

TEST_F(WatchTest, AReflectorReListsWhenItsVersionExpires) {
  expect_a_reflector_to_relist_when_its_version_expires(server_);
}

// The ERROR event's Status says Expired but has no code: still a re-list
// (before, the reflector retried the dead version forever, seeing nothing).
TEST(ReflectorExpiredTest, ReListsOnAnExpiredErrorWithoutACode) {
  TestApiServer server({"--history", "3", "--watch-errors-without-code"});
  expect_a_reflector_to_relist_when_its_version_expires(server);
}

TEST(ReflectorRestartTest, ReconnectsAfterTheServerRestarts) {
  TestApiServer server;
  Timeouts timeouts;
  timeouts.connect = 1s;
  // The token-file context: the restarted server has a new token.
  KubeClient client(server.access("dowser-test-token-file"), timeouts);
  Recorder recorder;
  Reflector reflector(client, kConfigMaps, "default", recording(recorder), Backoff{20ms, 200ms});
  reflector.start();
  ASSERT_TRUE(recorder.wait_for_entry("listed "));

  // Stop it while the watch is established, not while it connects.
  client.create(kConfigMaps, "default", config_map("before-restart", "x"));
  ASSERT_TRUE(recorder.wait_for_entry("ADDED before-restart"));

  server.restart();
  // The new server starts from an empty store and lower versions, so the
  // first of these that follows the reconnected watch shows up.
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    const std::string name = "after-restart-" + std::to_string(i);
    client.create(kConfigMaps, "default", config_map(name, "x"));
    seen = recorder.wait_for(
        [&](const auto& entries) {
          return std::any_of(entries.begin(), entries.end(), [](const std::string& entry) {
            return entry.find("after-restart-") != std::string::npos;
          });
        },
        200ms);
  }
  EXPECT_TRUE(seen) << ::testing::PrintToString(recorder.entries());
  reflector.stop();
}

// How many watch requests the server has finished (its log has a line per
// request, written when the request ends).
size_t finished_watches(const TestApiServer& server) {
  const std::string log = read_text(server.directory() / "requests.log");
  size_t count = 0;
  for (size_t at = log.find("watch=1"); at != std::string::npos; at = log.find("watch=1", at + 1))
    ++count;
  return count;
}

bool any_failed(const std::vector<std::string>& entries) {
  return std::any_of(entries.begin(), entries.end(),
                     [](const std::string& entry) { return entry.rfind("failed", 0) == 0; });
}

// On a quiet resource only bookmarks come, and each says the view is current:
// that is how a caller learns a reflector is back after failed requests
// (it watches on from where it was, with no list).
TEST(ReflectorBookmarkTest, BookmarksTellThatTheViewIsCurrent) {
  TestApiServer server({"--bookmark-interval-ms", "100"});
  KubeClient client(server.access());  // watches last 300 s: none ends here
  Recorder recorder;
  std::atomic<int> current{0};
  Reflector::Handlers handlers = recording(recorder);
  handlers.current = [&current] { ++current; };
  Reflector reflector(client, kConfigMaps, "default", std::move(handlers));
  reflector.start();
  ASSERT_TRUE(recorder.wait_for_entry("listed "));
  EXPECT_TRUE(dowser::test::eventually([&] { return current >= 4; }, Recorder::kDeadline))
      << "the list and then bookmarks every 100 ms; told " << current << " times";
  reflector.stop();
  EXPECT_EQ(recorder.entries(), std::vector<std::string>{"listed "}) << "nothing changed";
}

// This server sends bookmarks once a minute only, like servers that send
// none: nothing keeps an idle watch talking, so the client's idle limit ends
// it. That is the normal end of a quiet watch, not a failure: nothing is
// reported and the reflector watches again at once, not after a backoff (an
// hour here, so that only an immediate reconnect sees the changes).
TEST(ReflectorIdleTest, AWatchEndedByTheIdleLimitIsNoFailure) {
  TestApiServer server;
  Timeouts timeouts;
  timeouts.watch_idle = 1s;
  KubeClient client(server.access(), timeouts);
  Recorder recorder;
  Reflector reflector(client, kConfigMaps, "default", recording(recorder), Backoff{1h, 1h});
  reflector.start();
  ASSERT_TRUE(recorder.wait_for_entry("listed "));
  EXPECT_TRUE(
      dowser::test::eventually([&] { return finished_watches(server) >= 3; }, Recorder::kDeadline))
      << "watches ended by the idle limit: " << finished_watches(server) << "; reflector saw "
      << ::testing::PrintToString(recorder.entries());
  client.create(kConfigMaps, "default", config_map("after-idle", "x"));
  EXPECT_TRUE(recorder.wait_for_entry("ADDED after-idle"));
  reflector.stop();
  EXPECT_FALSE(any_failed(recorder.entries())) << ::testing::PrintToString(recorder.entries());
}

// A server restored from an older backup (here: restarted, empty) is behind
// the version the reflector watches from: "too large", and waiting does not
// help, it will not get there. The reflector must list again, as client-go
// does, and see what the server has now.
TEST(ReflectorTooLargeTest, ReListsWhenTheServerHasNotReachedItsVersion) {
  TestApiServer server;
  Timeouts timeouts;
  timeouts.connect = 1s;
  // The token-file context: the restarted server has a new token.
  KubeClient client(server.access("dowser-test-token-file"), timeouts);
  // Far more writes than the restarted server makes before the reflector
  // reconnects (it applies the CRDs).
  for (int i = 0; i < 20; ++i)
    client.create(kConfigMaps, "default", config_map("before-" + std::to_string(i), "x"));
  Recorder recorder;
  Reflector reflector(client, kConfigMaps, "default", recording(recorder), Backoff{20ms, 200ms});
  reflector.start();
  ASSERT_TRUE(recorder.wait_for([](const auto& entries) {
    return !entries.empty() && entries.front().rfind("listed before-0,", 0) == 0;
  })) << ::testing::PrintToString(recorder.entries());

  server.restart();
  client.create(kConfigMaps, "default", config_map("after-restore", "x"));
  // In the re-list, or in the watch from the re-list's version.
  EXPECT_TRUE(recorder.wait_for([](const auto& entries) {
    return std::find(entries.begin(), entries.end(), "listed after-restore") != entries.end() ||
           std::find(entries.begin(), entries.end(), "ADDED after-restore") != entries.end();
  })) << ::testing::PrintToString(recorder.entries());
  reflector.stop();
  // Refused connections while the server restarted are failures; the
  // version is not: a re-list answers it, as for 410.
  const auto entries = recorder.entries();
  EXPECT_EQ(std::count(entries.begin(), entries.end(), "failed 504"), 0)
      << ::testing::PrintToString(entries);
}

// A test API server that holds every list until the fixture ends, and a
// client whose requests would wait for it far longer than the test does.
class KubeClientStopTest : public ::testing::Test {
 protected:
  KubeClientStopTest() { std::ofstream(hold_).close(); }
  ~KubeClientStopTest() override { release(); }

  // Whatever a test's calls wait for ends (the server answers the held
  // lists): a test declares this after its calls, whose futures wait.
  struct Release {
    KubeClientStopTest& test;
    ~Release() { test.release(); }
  };
  void release() {
    fs::remove(hold_);
    watch_stop_ = true;
  }

  // Starts f on another thread once the server holds a list f makes.
  std::future<ApiError> once_held(const std::function<void()>& f) {
    auto call = std::async(std::launch::async, [f] { return error_of(f); });
    EXPECT_TRUE(dowser::test::eventually([&] { return fs::exists(hold_.string() + ".waiting"); }))
        << "the server never held the list";
    return call;
  }

  static Timeouts long_requests() {
    Timeouts timeouts;
    timeouts.request = 2min;  // far longer than the waits below
    return timeouts;
  }

  const TemporaryDirectory hold_dir_;
  const fs::path hold_ = hold_dir_.path() / "hold";
  TestApiServer server_{{"--hold-lists-while", hold_.string()}};
  KubeClient client_{server_.access(), long_requests()};
  std::atomic<bool> watch_stop_{false};
};

// A list the server holds (a slow API server) ends when its caller stops,
// not when the request times out: dowserd's shutdown waited for that.
TEST_F(KubeClientStopTest, AListEndsWhenStoppedWhileTheServerHoldsIt) {
  std::atomic<bool> stop{false};
  auto listing = once_held([&] { client_.list(kConfigMaps, "default", "", &stop); });
  const Release release{*this};
  stop = true;
  ASSERT_EQ(listing.wait_for(20s), std::future_status::ready) << "the list was not stopped";
  const ApiError stopped = listing.get();
  EXPECT_TRUE(stopped.stopped()) << stopped.what();
  EXPECT_NE(std::string(stopped.what()).find(": stopped"), std::string::npos) << stopped.what();
}

// At a shutdown every thread's request ends, whoever made it and without a
// stop of its own (the Instance store's, the node cleaner's, the Event
// poster's), and none goes out after: the client is stopped for good.
TEST_F(KubeClientStopTest, StoppingTheClientEndsEveryRequestAndRefusesLaterOnes) {
  auto listing = once_held([&] { client_.list(kConfigMaps, "default"); });
  std::atomic<bool> watched{false};
  const auto seen = [&watched](const WatchEvent&) { watched = true; };
  auto watching = std::async(std::launch::async, [&] {
    return error_of([&] { client_.watch(kConfigMaps, "default", "", seen, watch_stop_); });
  });
  const Release release{*this};
  int made = 0;  // until the watch sees one: then it runs
  ASSERT_TRUE(dowser::test::eventually([&] {
    client_.create(kConfigMaps, "default", config_map("c" + std::to_string(made++), "v"));
    return watched.load();
  })) << "the watch never started";
  client_.stop();
  for (auto* call : {&listing, &watching}) {
    ASSERT_EQ(call->wait_for(20s), std::future_status::ready) << "a request was not stopped";
    const ApiError stopped = call->get();
    EXPECT_TRUE(stopped.stopped()) << stopped.what();
  }
  fs::remove(hold_);  // a list sent now would be answered
  const ApiError later = error_of([&] { client_.list(kConfigMaps, "default"); });
  EXPECT_TRUE(later.stopped()) << later.what();
  EXPECT_TRUE(
      error_of([&] { client_.create(kConfigMaps, "default", config_map("c", "v")); }).stopped());
}

TEST(ReflectorStopTest, StopsPromptlyWhileWaitingToReconnect) {
  ClusterAccess access;
  access.server = "https://127.0.0.1:1";  // nothing listens: every attempt fails
  KubeClient client(access);
  Recorder recorder;
  Reflector reflector(client, kConfigMaps, "default", recording(recorder), Backoff{1h, 1h});
  reflector.start();
  ASSERT_TRUE(recorder.wait_for_entry("failed 0"));
  // Now in an hour-long backoff wait: stop() must end it, not wait it out.
  std::thread stopping([&] {
    reflector.stop();
    recorder.add("stopped");
  });
  EXPECT_TRUE(recorder.wait_for_entry("stopped"));
  stopping.join();
  EXPECT_FALSE(reflector.synced());
}

}  // namespace
}  // namespace dowser::kube::testing
