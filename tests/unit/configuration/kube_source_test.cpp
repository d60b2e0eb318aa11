// KubeConfigurationSource against the test API server: when Configurations
// are evaluated while Secrets or ConfigMaps cannot be read, and what the
// ones that need them are told.
#include <gtest/gtest.h>

#include "apiserver_peer.hpp"
#include "configuration.hpp"
#include "eventually.hpp"
#include "kube_client.hpp"
#include "log_capture.hpp"
#include "recorder.hpp"

#include <algorithm>
#include <functional>

namespace dowser::configuration {
namespace {

using kube::testing::TestApiServer;
using nlohmann::json;

using kube::resources::kConfigMaps;
using kube::resources::kConfigurations;
using kube::resources::kEvents;
using kube::resources::kNamespaces;
using kube::resources::kSecrets;

// A debugEcho Configuration with one discovery property, taken from
// value_from (a secretKeyRef or configMapKeyRef object) unless it is null.
json configuration(const std::string& namespace_name, const std::string& name,
                   const json& value_from = nullptr) {
  json handler = {{"name", "debugEcho"}, {"discoveryDetails", "descriptions: [foo0]"}};
  if (!value_from.is_null())
    handler["discoveryProperties"] = json::array({{{"name", "LOGIN"}, {"valueFrom", value_from}}});
  return {{"apiVersion", "akri.sh/v0"},
          {"kind", "Configuration"},
          {"metadata", {{"name", name}, {"namespace", namespace_name}}},
          {"spec", {{"discoveryHandler", handler}}}};
}

// The source's events as "upserted ns/name", "removed ns/name", "unresolved
// ns/name: reason" (after "unreadable " when a kind it needs may not be
// read), "invalid <error>", "valid <source>", "synced".
ConfigurationSource::Events recording(test::Recorder& recorder) {
  ConfigurationSource::Events events;
  events.upserted = [&recorder](const Configuration& c) {
    recorder.add("upserted " + c.namespace_name + "/" + c.name);
  };
  events.removed = [&recorder](const std::string& namespace_name, const std::string& name) {
    recorder.add("removed " + namespace_name + "/" + name);
  };
  events.invalid = [&recorder](const ConfigurationError& error) {
    recorder.add(std::string("invalid ") + error.what());
  };
  events.unresolved = [&recorder](const Configuration& c, const std::string& reason,
                                  UnresolvedReference::Cause why) {
    recorder.add(
        std::string(why == UnresolvedReference::Cause::awaiting_access ? "unreadable " : "") +
        "unresolved " + c.namespace_name + "/" + c.name + ": " + reason);
  };
  events.valid = [&recorder](const std::string& source) { recorder.add("valid " + source); };
  events.synced = [&recorder] { recorder.add("synced"); };
  return events;
}

// The reported reason of an unresolved Configuration ("" until one comes).
std::string unresolved_reason(test::Recorder& recorder, const std::string& configuration) {
  const std::string prefix = "unresolved " + configuration + ": ";
  std::string reason;
  recorder.wait_for([&](const std::vector<std::string>& entries) {
    for (const auto& entry : entries)
      if (auto at = entry.find(prefix); at != std::string::npos)
        reason = entry.substr(at + prefix.size());
    return !reason.empty();
  });
  return reason;
}

size_t count_starting(const std::vector<std::string>& entries, const std::string& prefix) {
  return static_cast<size_t>(std::count_if(entries.begin(), entries.end(), [&](const auto& entry) {
    return entry.rfind(prefix, 0) == 0;
  }));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// An operator who keeps dowserd away from Secrets (Roles only where they
// live, which a list across all namespaces does not pass) loses the
// Configurations that need a Secret, and those only: the others run, and
// the ones that need one say why they cannot, on the object too.
TEST(KubeConfigurationSource, SecretsItMayNotReadHoldBackOnlyTheConfigurationsUsingThem) {
  TestApiServer server({"--forbid", "secrets"});
  kube::KubeClient client(server.access());
  client.create(kConfigMaps, "default",
                {{"metadata", {{"name", "logins"}}}, {"data", {{"user", "admin"}}}});
  client.create(kConfigurations, "default", configuration("default", "plain"));
  client.create(kConfigurations, "default",
                configuration("default", "from-config-map",
                              {{"configMapKeyRef", {{"name", "logins"}, {"key", "user"}}}}));
  client.create(kConfigurations, "default",
                configuration("default", "from-secret",
                              {{"secretKeyRef", {{"name", "logins"}, {"key", "user"}}}}));
  // Refused for the ConfigMap missing, whatever comes of the Secret after it.
  json both = configuration("default", "config-map-missing",
                            {{"configMapKeyRef", {{"name", "absent"}, {"key", "user"}}}});
  both["spec"]["discoveryHandler"]["discoveryProperties"].push_back(
      {{"name", "PASSWORD"},
       {"valueFrom", {{"secretKeyRef", {{"name", "logins"}, {"key", "password"}}}}}});
  client.create(kConfigurations, "default", both);

  test::Recorder recorder;
  KubeConfigurationSource source(client, "", "node-a", recording(recorder));
  source.start();
  EXPECT_TRUE(recorder.wait_for_entry("upserted default/plain"))
      << ::testing::PrintToString(recorder.entries());
  EXPECT_TRUE(recorder.wait_for_entry("upserted default/from-config-map"))
      << ::testing::PrintToString(recorder.entries());
  const std::string reason = unresolved_reason(recorder, "default/from-secret");
  EXPECT_TRUE(contains(reason,
                       "spec.discoveryHandler.discoveryProperties[0].valueFrom.secretKeyRef: "
                       "discovery property LOGIN needs key user of Secret default/logins: "
                       "dowserd cannot read secrets: it lists and watches them in all "
                       "namespaces, which needs a ClusterRole"))
      << reason;
  EXPECT_TRUE(contains(reason, "HTTP 403 Forbidden")) << reason;

  // The same reason on the object, where kubectl describe shows it.
  EXPECT_TRUE(test::eventually([&] {
    const json events = client.list(kEvents, "default");
    for (const json& event : events.at("items")) {
      if (event.value("reason", "") == "UnresolvedProperty" &&
          event["involvedObject"].value("name", "") == "from-secret" &&
          contains(event.value("message", ""), "dowserd cannot read secrets"))
        return true;
    }
    return false;
  })) << client.list(kEvents, "default").dump();
  // Told as waiting for access, so that the daemon keeps its Instances (the
  // pods using them still run), before synced, which comes all the same: the
  // Instances of Configurations really gone are withdrawn meanwhile.
  EXPECT_TRUE(recorder.wait_for_entry("synced")) << ::testing::PrintToString(recorder.entries());
  const auto entries = recorder.entries();
  const auto told_before_synced = [&](const std::string& prefix) {
    const auto synced = std::find(entries.begin(), entries.end(), "synced");
    return count_starting({entries.begin(), synced}, prefix);
  };
  EXPECT_EQ(told_before_synced("unreadable unresolved default/from-secret: "), 1u)
      << ::testing::PrintToString(entries);
  EXPECT_EQ(told_before_synced("unresolved default/config-map-missing: "), 1u)
      << ::testing::PrintToString(entries);
  source.stop();
}

// Akri reads a reference without a namespace from "default", whatever the
// Configuration's namespace, and so does dowserd. With --namespace edge it
// reads nothing outside edge: such a reference must say so, not wait for
// a Secret it will never see.
TEST(KubeConfigurationSource, AReferenceOutsideTheWatchedNamespaceIsRefusedSayingWhy) {
  TestApiServer server;
  kube::KubeClient client(server.access());
  client.create(kNamespaces, "", {{"metadata", {{"name", "edge"}}}});
  for (const char* namespace_name : {"default", "edge"}) {
    client.create(kSecrets, namespace_name,
                  {{"metadata", {{"name", "login"}}}, {"stringData", {{"user", "admin"}}}});
  }
  client.create(
      kConfigurations, "edge",
      configuration("edge", "implicit", {{"secretKeyRef", {{"name", "login"}, {"key", "user"}}}}));
  client.create(kConfigurations, "edge",
                configuration("edge", "explicit",
                              {{"secretKeyRef",
                                {{"name", "login"}, {"key", "user"}, {"namespace", "edge"}}}}));

  test::Recorder recorder;
  KubeConfigurationSource source(client, "edge", "node-a", recording(recorder));
  source.start();
  EXPECT_TRUE(recorder.wait_for_entry("upserted edge/explicit"))
      << ::testing::PrintToString(recorder.entries());
  const std::string reason = unresolved_reason(recorder, "edge/implicit");
  EXPECT_TRUE(contains(reason,
                       "discovery property LOGIN needs key user of Secret default/login: "
                       "outside namespace edge, the only one dowserd reads (--namespace "
                       "edge); a reference without a namespace means \"default\", as in "
                       "Akri"))
      << reason;
  EXPECT_EQ(count_starting(recorder.entries(), "unreadable "), 0u)
      << "no access to be granted will let dowserd follow it";
  source.stop();
}

// The daemon holds an unresolved Configuration as refused (the status API
// and dowserctl show it) until the source says otherwise: when it is deleted
// (though never delivered), and when it resolves again, also to the version
// already running (its Secret deleted and re-created with the same value).
TEST(KubeConfigurationSource, AnUnresolvedConfigurationThatGoesOrResolvesAgainIsTold) {
  TestApiServer server;
  kube::KubeClient client(server.access());
  const json secret = {{"metadata", {{"name", "login"}}}, {"stringData", {{"user", "admin"}}}};
  client.create(kSecrets, "default", secret);
  client.create(kConfigurations, "default",
                configuration("default", "from-secret",
                              {{"secretKeyRef", {{"name", "login"}, {"key", "user"}}}}));
  client.create(kConfigurations, "default",
                configuration("default", "never",
                              {{"secretKeyRef", {{"name", "missing"}, {"key", "user"}}}}));
  test::Recorder recorder;
  KubeConfigurationSource source(client, "", "node-a", recording(recorder));
  source.start();
  ASSERT_TRUE(recorder.wait_for_entry("upserted default/from-secret"))
      << ::testing::PrintToString(recorder.entries());
  ASSERT_FALSE(unresolved_reason(recorder, "default/never").empty());
  EXPECT_EQ(count_starting(recorder.entries(), "unreadable "), 0u)
      << "a missing Secret is no want of access";

  client.remove(kConfigurations, "default", "never");
  EXPECT_TRUE(recorder.wait_for_entry("removed default/never"))
      << ::testing::PrintToString(recorder.entries());

  client.remove(kSecrets, "default", "login");
  ASSERT_FALSE(unresolved_reason(recorder, "default/from-secret").empty());
  client.create(kSecrets, "default", secret);
  EXPECT_TRUE(recorder.wait_for([](const std::vector<std::string>& entries) {
    return std::count(entries.begin(), entries.end(), "upserted default/from-secret") == 2;
  })) << ::testing::PrintToString(recorder.entries());
  source.stop();
}

// A source on a server that keeps 3 changes of history, whose watch a
// test makes lose its place (lose_the_watch_while); admin (a client
// certificate) makes the changes.
struct ReListing {
  static kube::Timeouts short_watches() {
    kube::Timeouts timeouts;
    timeouts.watch_duration = std::chrono::seconds(1);  // the next watch meets the token change
    return timeouts;
  }

  // The source's token stops working; meanwhile changes objects, and enough
  // other changes follow that the server's history no longer holds them:
  // the source lists again once its token works again.
  void lose_the_watch_while(const std::function<void()>& meanwhile) {
    const std::string token = kube::testing::read_text(server.token_file());
    kube::testing::write_text(server.token_file(), "not-the-token");
    ASSERT_TRUE(test::eventually([&] {
      return contains(log.text(), "Kubernetes configurations: ");
    })) << log.text();
    meanwhile();
    for (int i = 0; i < 4; ++i)  // past the history of 3
      admin.create(kConfigurations, "default",
                   configuration("default", "filler-" + std::to_string(i)));
    kube::testing::write_text(server.token_file(), token);
  }

  TestApiServer server{{"--history", "3"}};
  kube::KubeClient client{server.access(), short_watches()};
  kube::KubeClient admin{server.access("dowser-test-client-certificate")};  // no token
  test::Recorder recorder;
  const test::LogCapture log;
  KubeConfigurationSource source{client, "", "node-a", recording(recorder)};
};

// One deleted while the source could not watch is found gone by the re-list
// that follows (its version left the server's history), also when it was
// never delivered: its refusal must not stay reported.
TEST(KubeConfigurationSource, AnUnresolvedConfigurationDeletedWhileNotWatchingIsToldOnTheReList) {
  ReListing relisting;
  relisting.admin.create(kConfigurations, "default",
                         configuration("default", "never",
                                       {{"secretKeyRef", {{"name", "missing"}, {"key", "user"}}}}));
  relisting.source.start();
  ASSERT_FALSE(unresolved_reason(relisting.recorder, "default/never").empty());

  relisting.lose_the_watch_while(
      [&] { relisting.admin.remove(kConfigurations, "default", "never"); });
  EXPECT_TRUE(relisting.recorder.wait_for_entry("upserted default/filler-3"))
      << ::testing::PrintToString(relisting.recorder.entries());
  EXPECT_TRUE(relisting.recorder.wait_for_entry("removed default/never"))
      << ::testing::PrintToString(relisting.recorder.entries());
  relisting.source.stop();
}

// The daemon keeps the Instances of one reported invalid (and its resource
// name with them) until told it is gone: a deleted invalid object is
// removed, once, whether it was never delivered or its last good version was.
TEST(KubeConfigurationSource, AnInvalidConfigurationIsRemovedOnceDeleted) {
  TestApiServer server;
  kube::KubeClient client(server.access());
  const json broken =  // a secretKeyRef needs a key
      configuration("default", "broken", {{"secretKeyRef", {{"name", "s"}}}});
  client.create(kConfigurations, "default", broken);
  client.create(kConfigurations, "default", configuration("default", "edited"));
  test::Recorder recorder;
  KubeConfigurationSource source(client, "", "node-a", recording(recorder));
  source.start();
  ASSERT_TRUE(recorder.wait_for_entry("upserted default/edited"))
      << ::testing::PrintToString(recorder.entries());
  json edited = client.get(kConfigurations, "default", "edited");
  edited["spec"] = broken["spec"];
  client.replace(kConfigurations, "default", edited);
  ASSERT_TRUE(recorder.wait_for([](const std::vector<std::string>& entries) {
    return count_starting(entries, "invalid default/") == 2;
  })) << ::testing::PrintToString(recorder.entries());

  client.remove(kConfigurations, "default", "broken");
  client.remove(kConfigurations, "default", "edited");
  client.create(kConfigurations, "default", configuration("default", "last"));
  ASSERT_TRUE(recorder.wait_for_entry("upserted default/last"))
      << ::testing::PrintToString(recorder.entries());
  const auto entries = recorder.entries();
  EXPECT_EQ(std::count(entries.begin(), entries.end(), "removed default/broken"), 1)
      << ::testing::PrintToString(entries);
  EXPECT_EQ(std::count(entries.begin(), entries.end(), "removed default/edited"), 1)
      << ::testing::PrintToString(entries);
  source.stop();
}

// The daemon keeps an invalid one's Instances, and withdraws every Instance
// no Configuration claims when one it never ran is removed. So a fixed one
// is told `valid` right before it is upserted, with nothing between: a
// re-list (the watch lost its place) that also finds another invalid one
// deleted tells that removal first, then the fixed one's valid and upsert.
TEST(KubeConfigurationSource, AFixedObjectIsToldValidRightBeforeItsVerdictAlsoOnAReList) {
  ReListing relisting;
  kube::KubeClient& admin = relisting.admin;
  const json broken = {{"secretKeyRef", {{"name", "s"}}}};  // a secretKeyRef needs a key
  admin.create(kConfigurations, "default", configuration("default", "deleted", broken));
  admin.create(kConfigurations, "default", configuration("default", "fixed", broken));
  relisting.source.start();
  ASSERT_TRUE(relisting.recorder.wait_for([](const std::vector<std::string>& entries) {
    return count_starting(entries, "invalid default/") == 2 &&
           std::count(entries.begin(), entries.end(), "synced") == 1;
  })) << ::testing::PrintToString(relisting.recorder.entries());

  relisting.lose_the_watch_while([&] {
    admin.remove(kConfigurations, "default", "deleted");
    json fixed = admin.get(kConfigurations, "default", "fixed");
    fixed["spec"] = configuration("default", "fixed")["spec"];
    admin.replace(kConfigurations, "default", fixed);
  });
  ASSERT_TRUE(relisting.recorder.wait_for_entry("upserted default/fixed"))
      << ::testing::PrintToString(relisting.recorder.entries());
  const auto entries = relisting.recorder.entries();
  const auto valid = std::find(entries.begin(), entries.end(), "valid default/fixed");
  ASSERT_NE(valid, entries.end()) << ::testing::PrintToString(entries);
  ASSERT_NE(valid + 1, entries.end()) << ::testing::PrintToString(entries);
  EXPECT_EQ(*(valid + 1), "upserted default/fixed") << ::testing::PrintToString(entries);
  EXPECT_EQ(std::count(entries.begin(), entries.end(), "removed default/deleted"), 1)
      << ::testing::PrintToString(entries);
  relisting.source.stop();
}

// Fixed back to the version delivered before it turned invalid, an object
// is still told valid and then upserted (or unresolved, as before): the
// daemon keeps it until it hears what came of it.
TEST(KubeConfigurationSource, AnObjectFixedBackToItsLastVersionIsToldAgain) {
  TestApiServer server;
  kube::KubeClient client(server.access());
  const json broken = {{"secretKeyRef", {{"name", "s"}}}};  // a secretKeyRef needs a key
  const json missing = {{"secretKeyRef", {{"name", "missing"}, {"key", "user"}}}};
  client.create(kConfigurations, "default", configuration("default", "runs"));
  client.create(kConfigurations, "default", configuration("default", "waits", missing));
  test::Recorder recorder;
  KubeConfigurationSource source(client, "", "node-a", recording(recorder));
  source.start();
  ASSERT_TRUE(recorder.wait_for_entry("upserted default/runs"))
      << ::testing::PrintToString(recorder.entries());
  ASSERT_FALSE(unresolved_reason(recorder, "default/waits").empty());

  for (const auto& [name, good] : {std::pair{"runs", json()}, std::pair{"waits", missing}}) {
    json object = client.get(kConfigurations, "default", name);
    object["spec"] = configuration("default", name, broken)["spec"];
    object = client.replace(kConfigurations, "default", object);  // watched in order
    object["spec"] = configuration("default", name, good)["spec"];
    client.replace(kConfigurations, "default", object);
  }
  const auto told_after_valid = [](const std::vector<std::string>& entries,
                                   const std::string& configuration, const std::string& verdict) {
    const auto valid = std::find(entries.begin(), entries.end(), "valid " + configuration);
    return valid != entries.end() && valid + 1 != entries.end() &&
           (valid + 1)->rfind(verdict + " " + configuration, 0) == 0;
  };
  EXPECT_TRUE(recorder.wait_for([&](const std::vector<std::string>& entries) {
    return told_after_valid(entries, "default/runs", "upserted") &&
           told_after_valid(entries, "default/waits", "unresolved");
  })) << ::testing::PrintToString(recorder.entries());
  source.stop();
}

// The names of the Events on a Configuration with this reason.
std::vector<std::string> event_names(kube::KubeClient& client, const std::string& configuration,
                                     const std::string& reason) {
  std::vector<std::string> names;
  const json events = client.list(kEvents, "default");
  for (const json& event : events.at("items"))
    if (event.value("reason", "") == reason &&
        event["involvedObject"].value("name", "") == configuration)
      names.push_back(event["metadata"]["name"].get<std::string>());
  return names;
}

// A source on node-a that refreshes its Events every 100 ms, not started,
// and two problems that stand: "never" needs a Secret that is not there, and
// "broken" is invalid.
struct StandingProblems {
  explicit StandingProblems(std::vector<std::string> server_options = {})
      : server(std::move(server_options)), client(server.access()) {
    client.create(kConfigurations, "default",
                  configuration("default", "never",
                                {{"secretKeyRef", {{"name", "missing"}, {"key", "user"}}}}));
    client.create(kConfigurations, "default",  // a secretKeyRef needs a key
                  configuration("default", "broken", {{"secretKeyRef", {{"name", "s"}}}}));
  }

  TestApiServer server;
  kube::KubeClient client;
  test::Recorder recorder;
  KubeConfigurationSource source{client, "", "node-a", recording(recorder),
                                 std::chrono::milliseconds(100)};
};

// Events live an hour in the API server (--event-ttl): a problem that stands
// longer is posted again once its Event is gone, or kubectl describe stops
// saying why the Configuration does not run.
TEST(KubeConfigurationSource, TheEventOfAStandingProblemIsPostedAgainOnceTheServerDroppedIt) {
  StandingProblems standing;
  // Not a structured binding: clang 14 (clang-tidy) cannot capture those.
  auto& client = standing.client;
  auto& recorder = standing.recorder;
  auto& source = standing.source;
  source.start();
  ASSERT_FALSE(unresolved_reason(recorder, "default/never").empty());
  std::vector<std::string> unresolved, refused;
  ASSERT_TRUE(test::eventually([&] {
    unresolved = event_names(client, "never", "UnresolvedProperty");
    refused = event_names(client, "broken", "InvalidConfiguration");
    return unresolved.size() == 1 && refused.size() == 1;
  })) << client.list(kEvents, "default").dump();

  client.remove(kEvents, "default", unresolved[0]);  // as the TTL does
  client.remove(kEvents, "default", refused[0]);
  EXPECT_TRUE(test::eventually([&] {
    return event_names(client, "never", "UnresolvedProperty") == unresolved &&
           event_names(client, "broken", "InvalidConfiguration") == refused;
  })) << client.list(kEvents, "default").dump();
  source.stop();
}

// An edit that keeps a problem keeps its one Event: the refresh posts it
// under the name first told, and so does a node started after the edit (a
// name per version would give each node its own Event until the TTL, and
// after it for good).
TEST(KubeConfigurationSource, AnEditThatKeepsAProblemKeepsItsOneEvent) {
  StandingProblems standing;
  // Not a structured binding: clang 14 (clang-tidy) cannot capture those.
  auto& client = standing.client;
  auto& recorder = standing.recorder;
  auto& source = standing.source;
  source.start();
  std::vector<std::string> first;
  ASSERT_TRUE(test::eventually([&] {
    first = event_names(client, "never", "UnresolvedProperty");
    return first.size() == 1;
  })) << client.list(kEvents, "default").dump();

  json edited = client.get(kConfigurations, "default", "never");
  edited["spec"]["capacity"] = 3;  // the Secret is still missing
  client.replace(kConfigurations, "default", edited);
  // Watch events come in order: once this one is seen, so was the edit.
  client.create(kConfigurations, "default", configuration("default", "after-the-edit"));
  ASSERT_TRUE(recorder.wait_for_entry("upserted default/after-the-edit"))
      << ::testing::PrintToString(recorder.entries());
  client.remove(kEvents, "default", first[0]);  // as the TTL does
  EXPECT_TRUE(test::eventually([&] {
    return event_names(client, "never", "UnresolvedProperty") == first;
  })) << client.list(kEvents, "default").dump();

  // Only node-b can post it now.
  source.stop();
  client.remove(kEvents, "default", first[0]);
  test::Recorder later_recorder;
  KubeConfigurationSource later(client, "", "node-b", recording(later_recorder));
  later.start();
  std::vector<std::string> from_node_b;
  EXPECT_TRUE(test::eventually([&] {
    from_node_b = event_names(client, "never", "UnresolvedProperty");
    return !from_node_b.empty();
  })) << client.list(kEvents, "default").dump();
  EXPECT_EQ(from_node_b, first);
  later.stop();
}

// The daemon's problems (a refusal, a Configuration not validated) stand
// until the daemon says its handler took that version: their Events are
// posted again meanwhile, and not after.
TEST(KubeConfigurationSource, TheDaemonsProblemsArePostedAgainUntilResolved) {
  TestApiServer server;
  kube::KubeClient client(server.access());
  client.create(kConfigurations, "default", configuration("default", "cams"));
  client.create(kConfigurations, "default", configuration("default", "mics"));
  test::Recorder recorder;
  std::map<std::string, Configuration> delivered;  // read once the recorder has the entry
  ConfigurationSource::Events events = recording(recorder);
  events.upserted = [&](const Configuration& c) {
    delivered.insert_or_assign(c.name, c);
    recorder.add("upserted " + c.namespace_name + "/" + c.name);
  };
  KubeConfigurationSource source(client, "", "node-a", std::move(events),
                                 std::chrono::milliseconds(100));
  source.start();
  ASSERT_TRUE(recorder.wait_for_entry("upserted default/cams"));
  ASSERT_TRUE(recorder.wait_for_entry("upserted default/mics"));
  source.report_problem(delivered.at("cams"), "NotValidated", "no handler named 'debugEcho'");
  source.report_problem(delivered.at("mics"), "Refused", "refused by handler debugEcho: no");
  std::vector<std::string> not_validated, refused;
  ASSERT_TRUE(test::eventually([&] {
    not_validated = event_names(client, "cams", "NotValidated");
    refused = event_names(client, "mics", "Refused");
    return not_validated.size() == 1 && refused.size() == 1;
  })) << client.list(kEvents, "default").dump();

  source.problems_resolved(delivered.at("cams"));  // its handler came, and started it
  // Posted again by a refresh that began after that (one refresh at a time):
  // the one under way may have read cams' problem before.
  const auto mics_posted_again = [&] {
    client.remove(kEvents, "default", refused[0]);  // as the TTL does
    return test::eventually([&] { return event_names(client, "mics", "Refused") == refused; });
  };
  ASSERT_TRUE(mics_posted_again()) << client.list(kEvents, "default").dump();
  client.remove(kEvents, "default", not_validated[0]);
  ASSERT_TRUE(mics_posted_again()) << client.list(kEvents, "default").dump();
  // A refresh posts in the order of the objects' names: cams came first.
  EXPECT_TRUE(event_names(client, "cams", "NotValidated").empty());
  source.stop();
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// With Events forbidden (RBAC), every refresh fails alike for every problem:
// one warning says so, not one per problem and period.
TEST(KubeConfigurationSource, RefreshesThatCannotPostEventsAreToldOnce) {
  StandingProblems standing({"--forbid", "events"});
  const test::LogCapture log;
  spdlog::default_logger()->set_level(spdlog::level::debug);  // the capture's own logger
  standing.source.start();
  const std::string refresh_failed = "Events of standing problems";
  ASSERT_TRUE(test::eventually([&] { return occurrences(log.text(), refresh_failed) >= 3; }))
      << log.text();
  standing.source.stop();
  const std::string text = log.text();
  EXPECT_EQ(occurrences(text, "[warning] cannot post Event"), 2u) << text;  // the first posts
  EXPECT_EQ(occurrences(text, "[warning] cannot refresh"), 1u) << text;
  EXPECT_NE(text.find("events is forbidden"), std::string::npos) << text;
}

}  // namespace
}  // namespace dowser::configuration
