// The store contract, run against KubeInstanceStore on the test API server
// (one server per test: each test is its own process under ctest), plus what
// is particular to Kubernetes: Akri's object shape, owner references kept
// across updates, garbage collection with the Configuration.
#include <filesystem>
#include <fstream>
#include <memory>

#include "apiserver_peer.hpp"
#include "eventually.hpp"
#include "kube_client.hpp"
#include "log_capture.hpp"
#include "recorder.hpp"
#include "store_contract.hpp"

namespace dowser::store::testing {
namespace {

using kube::testing::TestApiServer;
using nlohmann::json;

using kube::resources::kConfigurations;
using kube::resources::kInstances;
using kube::resources::kNamespaces;

// The namespaces the contract uses besides "default": Kubernetes refuses
// objects in a namespace that does not exist.
void create_namespaces(kube::KubeClient& client) {
  for (const char* name : {"edge", "other", "fresh-namespace"}) {
    client.create(kNamespaces, "", {{"metadata", {{"name", name}}}});
  }
}

// Every handle has its own client (its own connections), as a node would.
std::unique_ptr<InstanceStore> open_store(const TestApiServer& server) {
  return std::make_unique<KubeInstanceStore>(std::make_shared<kube::KubeClient>(server.access()));
}

StoreOpener make_kube_store() {
  auto server = std::make_shared<TestApiServer>();
  kube::KubeClient client(server->access());
  create_namespaces(client);
  return [server] { return open_store(*server); };
}

INSTANTIATE_TEST_SUITE_P(Kube, InstanceStoreContract,
                         ::testing::Values(StoreImplementation{"KubeInstanceStore",
                                                               make_kube_store}),
                         implementation_name);

class KubeInstanceStoreTest : public ::testing::Test {
 protected:
  KubeInstanceStoreTest()
      : client_(std::make_shared<kube::KubeClient>(server_.access())), store_(client_) {}

  json create_configuration(const std::string& name) {
    return client_->create(kConfigurations, "default",
                           {{"apiVersion", "akri.sh/v0"},
                            {"kind", "Configuration"},
                            {"metadata", {{"name", name}}},
                            {"spec", {{"discoveryHandler", {{"name", "debugEcho"}}}}}});
  }
  json raw(const std::string& name) { return client_->get(kInstances, "default", name); }

  TestApiServer server_;
  std::shared_ptr<kube::KubeClient> client_;
  KubeInstanceStore store_;
};

TEST_F(KubeInstanceStoreTest, StoresAkriInstanceObjectsWithTheResourceVersionAsRevision) {
  Instance instance = sample_instance("akri-onvif-4294ea");
  instance.device_usage = {{"akri-onvif-4294ea-1", "C:0:node-b"}};  // free slots absent
  const uint64_t revision = store_.create(instance);

  const json object = raw("akri-onvif-4294ea");
  EXPECT_EQ(object["apiVersion"], "akri.sh/v0");
  EXPECT_EQ(object["kind"], "Instance");
  EXPECT_EQ(object["metadata"]["resourceVersion"], std::to_string(revision));
  const json& spec = object["spec"];
  EXPECT_EQ(spec["configurationName"], "akri-onvif");
  EXPECT_EQ(spec["cdiName"], "akri.sh/akri-onvif=akri-onvif-4294ea");
  EXPECT_EQ(spec["capacity"], 3);
  EXPECT_EQ(spec["shared"], true);
  EXPECT_EQ(spec["nodes"], json::array({"node-a", "node-b"}));
  EXPECT_EQ(spec["deviceUsage"], json({{"akri-onvif-4294ea-1", "C:0:node-b"}}));
  EXPECT_EQ(spec["brokerProperties"]["UNICODE"], "caméra ✓");
}

TEST_F(KubeInstanceStoreTest, OwnedByItsConfigurationAcrossUpdatesAndCollectedWithIt) {
  const json configuration = create_configuration("akri-onvif");
  Instance instance = sample_instance("akri-onvif-4294ea");
  const uint64_t created = store_.create(instance);

  const json expected_owner = {
      {"apiVersion", "akri.sh/v0"}, {"kind", "Configuration"},
      {"name", "akri-onvif"},       {"uid", configuration["metadata"]["uid"]},
      {"controller", true},         {"blockOwnerDeletion", true}};
  EXPECT_EQ(raw("akri-onvif-4294ea")["metadata"]["ownerReferences"], json::array({expected_owner}));

  instance.nodes.insert("node-c");
  store_.update(instance, created);
  EXPECT_EQ(raw("akri-onvif-4294ea")["metadata"]["ownerReferences"], json::array({expected_owner}));

  client_->remove(kConfigurations, "default", "akri-onvif");
  EXPECT_FALSE(store_.get("default", "akri-onvif-4294ea").has_value());
}

TEST_F(KubeInstanceStoreTest, WithoutItsConfigurationAnInstanceHasNoOwner) {
  store_.create(sample_instance("akri-onvif-4294ea"));
  EXPECT_FALSE(raw("akri-onvif-4294ea")["metadata"].contains("ownerReferences"));
}

TEST_F(KubeInstanceStoreTest, ListSkipsAndGetRefusesAnObjectThatIsNotAnInstance) {
  store_.create(sample_instance("cam-000001"));
  // Valid for the CRD (an integer) but not for dowser (more than 32 bits).
  client_->create(kInstances, "default",
                  {{"apiVersion", "akri.sh/v0"},
                   {"kind", "Instance"},
                   {"metadata", {{"name", "cam-000002"}}},
                   {"spec",
                    {{"configurationName", "akri-onvif"},
                     {"cdiName", "akri.sh/akri-onvif=000002"},
                     {"capacity", uint64_t{1} << 40}}}});
  EXPECT_EQ(store_.list().size(), 1u);
  try {
    store_.get("default", "cam-000002");
    ADD_FAILURE() << "no StoreError";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreError::Kind::io);
    EXPECT_NE(std::string(error.what()).find("default/cam-000002"), std::string::npos);
  }
}

// Akri's agent leaves node-named finalizers: an Instance deleted since stays
// as terminating, and dowserd would go on serving it without a word.
TEST_F(KubeInstanceStoreTest, ATerminatingInstanceKeptByFinalizersIsWarnedOfOnce) {
  const dowser::test::LogCapture log;
  store_.create(sample_instance("cam-000001"));
  json object = raw("cam-000001");
  object["metadata"]["finalizers"] = json::array({"edge-1"});
  client_->replace(kInstances, "default", object);
  ASSERT_TRUE(store_.get("default", "cam-000001"));
  EXPECT_EQ(log.text().find("being deleted"), std::string::npos) << "not while it is not";

  client_->remove(kInstances, "default", "cam-000001");
  ASSERT_TRUE(store_.get("default", "cam-000001")) << "kept by its finalizer";
  ASSERT_TRUE(store_.get("default", "cam-000001"));
  const std::string text = log.text();
  const auto first = text.find("Instance default/cam-000001 is being deleted (since ");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_NE(text.find(R"(finalizers ["edge-1"] keep it)"), std::string::npos) << text;
  EXPECT_EQ(text.find("is being deleted", text.find("is being deleted") + 1), std::string::npos)
      << "once: " << text;
}

// A watch event as "upserted <name>" or "deleted <name>".
std::string event_text(const WatchEvent& event) {
  return (event.type == WatchEvent::Type::upserted ? "upserted " : "deleted ") +
         event.object.instance.name;
}

// The Instance lists the server has finished (one log line per request).
size_t finished_lists(const TestApiServer& server) {
  const std::string log = kube::testing::read_text(server.directory() / "requests.log");
  size_t count = 0;
  const std::string list = " GET /apis/akri.sh/v0/instances 200 ";
  for (size_t at = log.find(list); at != std::string::npos; at = log.find(list, at + 1)) ++count;
  return count;
}

// An Instance that exists but does not parse (another agent's newer format,
// a hand edit) must not be reported deleted when the watch re-lists: the
// daemon would take it as gone and re-create it. It keeps its last good
// state, as it does when a watch event brings the bad version.
TEST(KubeInstanceStoreRelistTest, AnUnreadableInstanceIsNotDeletedByAReList) {
  TestApiServer server({"--history", "3"});  // a short history: the watch must re-list
  kube::Timeouts timeouts;
  timeouts.watch_duration = std::chrono::seconds(1);  // resumes often, from its last version
  auto client = std::make_shared<kube::KubeClient>(server.access(), timeouts);
  create_namespaces(*client);
  KubeInstanceStore store(client);
  store.create(sample_instance("cam-000001"));
  dowser::test::Recorder events;
  const auto subscription =
      store.watch([&](const WatchEvent& event) { events.add(event_text(event)); });

  json object = client->get(kInstances, "default", "cam-000001");
  object["spec"]["capacity"] = uint64_t{1} << 40;  // valid for the CRD, not for dowser
  client->replace(kInstances, "default", object);
  for (const char* name : {"filler-1", "filler-2", "filler-3", "filler-4", "filler-5"})
    client->create(kNamespaces, "", {{"metadata", {{"name", name}}}});
  // The first list is watch()'s; the second, the re-list.
  ASSERT_TRUE(dowser::test::eventually([&] { return finished_lists(server) >= 2; },
                                       std::chrono::seconds(20)))
      << "the watch did not re-list";
  // Created after the re-list was served: its event follows the re-list's.
  store.create(sample_instance("cam-000002"));
  ASSERT_TRUE(events.wait_for_entry("upserted cam-000002"))
      << ::testing::PrintToString(events.entries());
  EXPECT_EQ(events.entries(), std::vector<std::string>{"upserted cam-000002"});
}

// watch() waits 10 s for the store's first list, then returns without it
// (the daemon serves on and lists by itself). An Instance this process knew
// of and another node deleted before that list came must still be reported
// deleted, or its plugin stays up on a deleted Instance until restart.
TEST(KubeInstanceStoreLateListTest, AnInstanceDeletedBeforeALateFirstListIsReportedDeleted) {
  dowser::test::TempDir hold_directory;
  const std::filesystem::path hold = hold_directory.path() / "hold-lists";
  TestApiServer server({"--hold-lists-while", hold.string()});
  auto client = std::make_shared<kube::KubeClient>(server.access());
  create_namespaces(*client);
  KubeInstanceStore store(client, "default");  // lists and watches "default" alone
  store.create(sample_instance("cam-000001"));
  store.create(sample_instance("cam-000002"));
  store.create(sample_instance("cam-elsewhere", "other"));  // never listed, never deleted
  std::ofstream(hold).close();
  dowser::test::Recorder events;
  const auto subscription =
      store.watch([&](const WatchEvent& event) { events.add(event_text(event)); });

  client->remove(kInstances, "default", "cam-000001");  // by another node
  std::filesystem::remove(hold);
  ASSERT_TRUE(events.wait_for_entry("deleted cam-000001"))
      << ::testing::PrintToString(events.entries());
  // A later event marks the end: anything the late list wrongly said is in by then.
  store.create(sample_instance("cam-000003"));
  ASSERT_TRUE(events.wait_for_entry("upserted cam-000003"))
      << ::testing::PrintToString(events.entries());
  // The late list reports what exists as changed, and nothing else.
  EXPECT_EQ(events.entries(), (std::vector<std::string>{"upserted cam-000002", "deleted cam-000001",
                                                        "upserted cam-000003"}));
}

TEST_F(KubeInstanceStoreTest, AnUnreachableServerIsAnIoError) {
  kube::ClusterAccess access = server_.access();
  access.server = "https://127.0.0.1:1";
  KubeInstanceStore unreachable(std::make_shared<kube::KubeClient>(access));
  try {
    unreachable.list();
    ADD_FAILURE() << "no StoreError";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreError::Kind::io) << error.what();
  }
}

}  // namespace
}  // namespace dowser::store::testing
