// Names must match Akri's byte for byte (akri-behaviour.md 2.2-2.4 and
// scenarios 1-2), and resource names must be ones the kubelet accepts.
#include "naming.hpp"

#include <gtest/gtest.h>

using namespace dowser::naming;

TEST(Naming, DigestsMatchAkrisTestVectors) {
  EXPECT_EQ(device_digest("my_local_device", false, "my_node"), "e77db4");
  EXPECT_EQ(device_digest("my_local_device", false, "my_other_node"), "099763");
  EXPECT_EQ(device_digest("my_shared_device", true, "my_node"), "4294ea");
  EXPECT_EQ(device_digest("dev_1", true, ""), "cb2ad7");
  EXPECT_EQ(device_digest("dev_2", true, ""), "7bbc11");
}

// The same on every node for the same problem (BLAKE2b with an 8-byte
// digest, checked against Python's hashlib.blake2b), another for another.
TEST(Naming, EventNamesComeFromTheProblem) {
  const std::string problem = "uid-1 42\nInvalidConfiguration\nspec: bad";
  EXPECT_EQ(event_name("bad", problem), "bad.92155ffac285af34");
  EXPECT_NE(event_name("bad", problem + "!"), event_name("bad", problem));
  // The longest object names leave room for the digest: a name of at most
  // 253, cut where no '-' ends it.
  const std::string cut = event_name(std::string(235, 'a') + "-bcd", problem);
  EXPECT_EQ(cut, std::string(235, 'a') + ".92155ffac285af34");
  EXPECT_EQ(node_name_problem(cut), "") << "not a DNS subdomain";  // the same rule as Nodes'
}

TEST(Naming, InstanceAndSlotNames) {
  EXPECT_EQ(instance_name("my_config", "my_local_device", false, "my_node"), "my_config-e77db4");
  EXPECT_EQ(instance_name("cams", "my_shared_device", true, "ignored"), "cams-4294ea");
  EXPECT_EQ(slot_name("cams-4294ea", 3), "cams-4294ea-3");
}

TEST(Naming, SlotIndexBelongsToItsInstanceAndCapacity) {
  EXPECT_EQ(slot_index("instance-a-1", "instance-a", 4), 1u);
  EXPECT_EQ(slot_index("my-other-slot-2", "my-other-slot", 3), 2u);
  EXPECT_FALSE(slot_index("not-a-slot-id", "not-a-slot", 4));
  EXPECT_FALSE(slot_index("instance-a-4", "instance-a", 4)) << "index beyond capacity";
  EXPECT_FALSE(slot_index("instance-b-1", "instance-a", 4)) << "another instance's slot";
  EXPECT_FALSE(slot_index("instance-a-01", "instance-a", 4)) << "one spelling per slot";
  EXPECT_FALSE(slot_index("instance-a-", "instance-a", 4));
  EXPECT_FALSE(slot_index("instance-a-1x", "instance-a", 4));
}

TEST(Naming, UsageGrammarOfAkriScenarioOne) {
  EXPECT_EQ(parse_usage("node-a"), SlotUsage::instance_level("node-a"));
  EXPECT_EQ(parse_usage("C:vdev1:node-a"), SlotUsage::configuration_level("vdev1", "node-a"));
  EXPECT_EQ(parse_usage(""), SlotUsage::free_slot());
  EXPECT_THROW(parse_usage("C:node-a"), UsageParseError);
  EXPECT_THROW(parse_usage("C::node-a"), UsageParseError);
  EXPECT_THROW(parse_usage("C:x:"), UsageParseError);
  EXPECT_THROW(parse_usage("C:x:a:b"), UsageParseError);
  EXPECT_THROW(parse_usage("X:a:b"), UsageParseError);
  // No node could have these names: unreadable, not some unknown node's claim.
  EXPECT_THROW(parse_usage("@@garbage@@"), UsageParseError);
  EXPECT_THROW(parse_usage("C:0:Node_A"), UsageParseError);
  for (const auto& usage : {SlotUsage::free_slot(), SlotUsage::instance_level("n"),
                            SlotUsage::configuration_level("7", "n")}) {
    EXPECT_EQ(parse_usage(format_usage(usage)), usage);
  }
}

TEST(Naming, ClaimsOfANodeAreItsILAndCLSlotsOnly) {
  EXPECT_TRUE(is_claim_of("node-a", "node-a"));
  EXPECT_TRUE(is_claim_of("C:3:node-a", "node-a"));
  EXPECT_FALSE(is_claim_of("C:3:node-b", "node-a"));
  EXPECT_FALSE(is_claim_of("", "node-a")) << "free";
  EXPECT_FALSE(is_claim_of("C:3", "node-a")) << "unreadable values are no one's";

  std::map<std::string, std::string> usage = {
      {"i-0", "node-a"}, {"i-1", "C:0:node-b"}, {"i-2", "C:1:node-a"}, {"i-3", "C::"}};
  EXPECT_TRUE(release_claims_of(usage, "node-a"));
  EXPECT_EQ(usage, (std::map<std::string, std::string>{{"i-1", "C:0:node-b"}, {"i-3", "C::"}}));
  EXPECT_FALSE(release_claims_of(usage, "node-a"));
}

TEST(Naming, ExtendedResourceNamesFollowTheKubeletsRules) {
  EXPECT_EQ(resource_name("akri.sh", "cams-4294ea"), "akri.sh/cams-4294ea");
  EXPECT_EQ(extended_resource_name_problem("vendor.example/resource"), "");
  EXPECT_NE(extended_resource_name_problem("nodomain"), "");
  EXPECT_NE(extended_resource_name_problem("kubernetes.io/x"), "");
  EXPECT_NE(extended_resource_name_problem("requests.x/y"), "");
  EXPECT_NE(extended_resource_name_problem("Akri.sh/x"), "") << "the prefix is lowercase";
  EXPECT_NE(extended_resource_name_problem("akri.sh/-x"), "");
  EXPECT_NE(extended_resource_name_problem("akri.sh/" + std::string(64, 'a')), "");
  EXPECT_EQ(extended_resource_name_problem("akri.sh/" + std::string(63, 'a')), "");
  EXPECT_NE(extended_resource_name_problem("akri.sh/a b"), "");
  EXPECT_THROW(resource_name("akri.sh", "bad/name"), std::invalid_argument);
}

TEST(Naming, NodeNamesAreDnsSubdomainsAsInKubernetes) {
  EXPECT_EQ(node_name_problem("node-a"), "");
  EXPECT_EQ(node_name_problem("edge-1.example.com"), "");
  EXPECT_EQ(node_name_problem("x:y"),
            "a node name must be a DNS subdomain (lowercase letters, digits, '-' and '.')")
      << "a claim C:<vdev>:<node> could not be read back";
  EXPECT_NE(node_name_problem("Node-A"), "");
  EXPECT_NE(node_name_problem("bad_node"), "");
  EXPECT_NE(node_name_problem("-node"), "");
  EXPECT_NE(node_name_problem(std::string(254, 'a')), "");
}
