// Discovery properties from Secrets and ConfigMaps (resolve_references), and
// one API object parsed by the file parser (parse_configuration_object).
#include "configuration.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

namespace dowser::configuration {
namespace {

constexpr const char* kObject = R"({"apiVersion": "akri.sh/v0", "kind": "Configuration",
  "metadata": {"name": "cams", "namespace": "video", "uid": "u-1", "resourceVersion": "7",
               "managedFields": [{"manager": "kubectl"}]},
  "spec": {"capacity": 2, "discoveryHandler": {"name": "debugEcho",
    "discoveryDetails": "descriptions: [a]",
    "discoveryProperties": [
      {"name": "PLAIN", "value": "p"},
      {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "auth", "key": "password",
                                                           "namespace": "video"}}},
      {"name": "MODE", "value": "wins", "valueFrom": {"configMapKeyRef": {"name": "modes",
                                                                        "key": "mode"}}},
      {"name": "EXTRA", "valueFrom": {"configMapKeyRef": {"name": "modes", "key": "extra",
                                                          "optional": true}}}]}},
  "status": {"anything": true}})";

// A Secret and a ConfigMap store, keyed like the Kubernetes source's caches.
struct Objects {
  std::map<std::tuple<ReferenceKind, std::string, std::string, std::string>, std::string> values;
  ReferenceLookup lookup() const {
    return [this](ReferenceKind kind, const KeyReference& reference) -> std::optional<std::string> {
      auto found = values.find({kind, reference.namespace_name, reference.name, reference.key});
      if (found == values.end()) return std::nullopt;
      return found->second;
    };
  }
};

const DiscoveryProperty* property(const Configuration& configuration, const std::string& name) {
  for (const auto& p : configuration.discovery_properties)
    if (p.name == name) return &p;
  return nullptr;
}

TEST(ParseConfigurationObject, AnApiObjectParsesWithTheFileParser) {
  Configuration parsed = parse_configuration_object(kObject, "video/cams");
  EXPECT_EQ(parsed.namespace_name, "video");
  EXPECT_EQ(parsed.name, "cams");
  EXPECT_EQ(parsed.capacity, 2u);
  ASSERT_EQ(parsed.discovery_properties.size(), 4u);
  EXPECT_TRUE(parsed.discovery_properties[1].secret_key_ref);
}

TEST(ParseConfigurationObject, ErrorsNameTheObjectAndTheFieldPath) {
  std::string bad = kObject;
  bad.replace(bad.find("\"capacity\": 2"), 13, "\"capacity\": \"2\"");
  try {
    parse_configuration_object(bad, "video/cams");
    FAIL() << "a quoted capacity is a string";
  } catch (const ConfigurationError& e) {
    EXPECT_EQ(e.source(), "video/cams");
    EXPECT_EQ(e.field_path(), "spec.capacity");
  }
}

TEST(ResolveReferences, ValuesComeFromTheirObjectsAndPlainValuesWin) {
  Objects objects;
  objects.values[{ReferenceKind::secret, "video", "auth", "password"}] = "s3cret";
  objects.values[{ReferenceKind::config_map, "default", "modes", "mode"}] = "from-map";
  objects.values[{ReferenceKind::config_map, "default", "modes", "extra"}] = "x";
  Configuration resolved =
      resolve_references(parse_configuration_object(kObject, "video/cams"), objects.lookup());
  EXPECT_EQ(property(resolved, "PLAIN")->value, "p");
  EXPECT_EQ(property(resolved, "PASSWORD")->value, "s3cret");
  EXPECT_TRUE(property(resolved, "PASSWORD")->secret_key_ref) << "kept, for same_discovery";
  EXPECT_EQ(property(resolved, "MODE")->value, "wins");
  EXPECT_EQ(property(resolved, "EXTRA")->value, "x");
}

TEST(ResolveReferences, AMissingOptionalReferenceLeavesThePropertyOut) {
  Objects objects;
  objects.values[{ReferenceKind::secret, "video", "auth", "password"}] = "s3cret";
  Configuration resolved =
      resolve_references(parse_configuration_object(kObject, "video/cams"), objects.lookup());
  EXPECT_EQ(property(resolved, "EXTRA"), nullptr);
  EXPECT_EQ(resolved.discovery_properties.size(), 3u);
}

TEST(ResolveReferences, AMissingRequiredReferenceNamesEverythingButTheValue) {
  Objects objects;
  objects.values[{ReferenceKind::secret, "video", "auth", "username"}] = "other-key-value";
  try {
    resolve_references(parse_configuration_object(kObject, "video/cams"), objects.lookup());
    FAIL() << "PASSWORD cannot be resolved";
  } catch (const UnresolvedReference& e) {
    EXPECT_EQ(e.cause(), UnresolvedReference::Cause::value_missing);
    EXPECT_EQ(e.source(), "video/cams");
    EXPECT_EQ(e.field_path(),
              "spec.discoveryHandler.discoveryProperties[1].valueFrom.secretKeyRef");
    std::string what = e.what();
    for (const char* part : {"PASSWORD", "Secret video/auth", "password"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in " << what;
    EXPECT_EQ(what.find("other-key-value"), std::string::npos);
  }
}

// The daemon keeps the Instances of one whose Secret it may be allowed to
// read later, and only of that one: the cause says which.
TEST(ResolveReferences, AnUnreadableRequiredReferenceSaysWhetherAccessMayCome) {
  using Cause = UnresolvedReference::Cause;
  using Unreadable = UnreadableReference (*)(const std::string&);
  const std::pair<Cause, Unreadable> causes[] = {
      {Cause::awaiting_access, &UnreadableReference::awaiting_access},
      {Cause::unreadable_for_good, &UnreadableReference::for_good}};
  for (const auto& [cause, unreadable_because] : causes) {
    const auto unreadable = [unreadable_because = unreadable_because](
                                ReferenceKind kind,
                                const KeyReference&) -> std::optional<std::string> {
      if (kind == ReferenceKind::secret) throw unreadable_because("secrets are forbidden");
      return std::nullopt;
    };
    try {
      resolve_references(parse_configuration_object(kObject, "video/cams"), unreadable);
      FAIL() << "PASSWORD cannot be read";
    } catch (const UnresolvedReference& e) {
      EXPECT_EQ(e.cause(), cause);
      EXPECT_NE(std::string(e.what()).find("secrets are forbidden"), std::string::npos) << e.what();
    }
  }
}

TEST(ResolveReferences, ANewValueIsANewDiscovery) {
  Objects objects;
  objects.values[{ReferenceKind::secret, "video", "auth", "password"}] = "one";
  Configuration parsed = parse_configuration_object(kObject, "video/cams");
  Configuration first = resolve_references(parsed, objects.lookup());
  objects.values[{ReferenceKind::secret, "video", "auth", "password"}] = "two";
  Configuration second = resolve_references(parsed, objects.lookup());
  EXPECT_FALSE(first.same_discovery(second));
  EXPECT_TRUE(first.same_discovery(resolve_references(parsed, [&](auto kind, const auto& ref) {
    return kind == ReferenceKind::secret && ref.key == "password"
               ? std::optional<std::string>("one")
               : std::nullopt;
  })));
}

}  // namespace
}  // namespace dowser::configuration
