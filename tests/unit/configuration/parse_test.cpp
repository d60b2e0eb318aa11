#include "configuration.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dowser::configuration {
namespace {

constexpr const char* kSource = "/etc/dowser/configs/test.yaml";

// An Akri example using every field.
constexpr const char* kFullExample = R"(apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: akri-onvif
  namespace: cameras
  labels:
    app: akri
  annotations:
    note: unknown metadata is fine
  uid: 1234
spec:
  discoveryHandler:
    name: onvif
    discoveryDetails: |+
      ipAddresses:
        action: Exclude
        items: []
      discoveryTimeoutSeconds: 1
    discoveryProperties:
    - name: nvr_host
      value: "10.0.0.5"
    - name: USERNAME
      valueFrom:
        secretKeyRef:
          name: onvif-auth
          key: username
          namespace: security
          optional: true
    - name: _config
      valueFrom:
        configMapKeyRef:
          name: onvif-config
          key: config
    - name: present_without_value
  capacity: 5
  brokerProperties:
    RESOLUTION_WIDTH: 800
    ENABLED: true
    MODE: "fast"
  brokerSpec:
    brokerPodSpec:
      containers:
      - name: akri-onvif-video-broker
        image: ghcr.io/project-akri/akri/onvif-video-broker:latest
        resources:
          limits:
            "{{PLACEHOLDER}}": "1"
  instanceServiceSpec:
    type: ClusterIP
    ports:
    - name: grpc
      port: 80
      targetPort: 8083
  configurationServiceSpec:
    type: ClusterIP
    ports:
    - name: grpc
      port: 80
  uniqueInstances: Preferred
  sharedOfflineGraceSeconds: 60
status: {}
)";

constexpr const char* kHeader = R"(apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: cam
)";

constexpr const char* kMinimalSpec = R"(spec:
  discoveryHandler:
    name: debugEcho
)";

Configuration parse_one(const std::string& text) {
  std::vector<Configuration> configurations = parse_configurations(text, kSource);
  EXPECT_EQ(configurations.size(), 1u);
  return configurations.empty() ? Configuration{} : configurations.front();
}

// Checks that text is refused at field_path with a reason containing reason_part.
void expect_error(const std::string& text, const std::string& field_path,
                  const std::string& reason_part) {
  SCOPED_TRACE(text);
  try {
    parse_configurations(text, kSource);
    ADD_FAILURE() << "accepted; expected an error at " << field_path;
  } catch (const ConfigurationError& error) {
    EXPECT_EQ(error.source(), kSource);
    EXPECT_EQ(error.field_path(), field_path);
    EXPECT_NE(error.reason().find(reason_part), std::string::npos) << error.reason();
  }
}

// A document with the standard header and the given spec body (indented by two).
std::string with_spec(const std::string& spec_body) {
  return std::string(kHeader) + "spec:\n" + spec_body;
}

// A spec whose discoveryHandler has the given extra lines (indented by four).
std::string with_handler(const std::string& handler_body) {
  return with_spec("  discoveryHandler:\n    name: debugEcho\n" + handler_body);
}

// A handler with one discovery property (its lines indented by six).
std::string with_property(const std::string& property_body) {
  return with_handler("    discoveryProperties:\n    - name: p\n" + property_body);
}

TEST(ParseTest, FullAkriExampleKeepsEveryField) {
  Configuration c = parse_one(kFullExample);
  EXPECT_EQ(c.namespace_name, "cameras");
  EXPECT_EQ(c.name, "akri-onvif");
  EXPECT_EQ(c.handler_name, "onvif");
  EXPECT_EQ(c.discovery_details,
            "ipAddresses:\n  action: Exclude\n  items: []\ndiscoveryTimeoutSeconds: 1\n");
  ASSERT_EQ(c.discovery_properties.size(), 4u);
  EXPECT_EQ(c.discovery_properties[0], (DiscoveryProperty{"nvr_host", "10.0.0.5", {}, {}}));
  EXPECT_EQ(c.discovery_properties[1],
            (DiscoveryProperty{
                "USERNAME", {}, KeyReference{"onvif-auth", "username", "security", true}, {}}));
  EXPECT_EQ(c.discovery_properties[2],
            (DiscoveryProperty{
                "_config", {}, {}, KeyReference{"onvif-config", "config", "default", false}}));
  EXPECT_EQ(c.discovery_properties[3], (DiscoveryProperty{"present_without_value", {}, {}, {}}));
  EXPECT_EQ(c.capacity, 5u);
  EXPECT_EQ(c.broker_properties,
            (std::map<std::string, std::string>{
                {"ENABLED", "true"}, {"MODE", "fast"}, {"RESOLUTION_WIDTH", "800"}}));
  EXPECT_NE(c.broker_spec.find("brokerPodSpec"), std::string::npos) << c.broker_spec;
  EXPECT_NE(c.broker_spec.find("onvif-video-broker"), std::string::npos) << c.broker_spec;
  EXPECT_NE(c.instance_service_spec.find("targetPort: 8083"), std::string::npos)
      << c.instance_service_spec;
  EXPECT_NE(c.configuration_service_spec.find("ClusterIP"), std::string::npos)
      << c.configuration_service_spec;
  EXPECT_EQ(c.unique_instances, UniqueInstances::preferred);
  EXPECT_EQ(c.shared_offline_grace, std::chrono::seconds(60));
}

TEST(ParseTest, BrokerJobSpecIsKeptAsText) {
  Configuration c = parse_one(with_spec(
      "  discoveryHandler: {name: h}\n  brokerSpec: {\"brokerJobSpec\": {\"parallelism\": 2}}\n"));
  EXPECT_NE(c.broker_spec.find("brokerJobSpec"), std::string::npos) << c.broker_spec;
  EXPECT_NE(c.broker_spec.find("parallelism"), std::string::npos) << c.broker_spec;
}

TEST(ParseTest, OnlyADiscoveryHandlerGivesTheDefaults) {
  Configuration c = parse_one(std::string(kHeader) + kMinimalSpec);
  EXPECT_EQ(c.namespace_name, "default");
  EXPECT_EQ(c.name, "cam");
  EXPECT_EQ(c.handler_name, "debugEcho");
  EXPECT_EQ(c.discovery_details, "");
  EXPECT_TRUE(c.discovery_properties.empty());
  EXPECT_EQ(c.capacity, 1u);
  EXPECT_TRUE(c.broker_properties.empty());
  EXPECT_EQ(c.broker_spec, "");
  EXPECT_EQ(c.instance_service_spec, "");
  EXPECT_EQ(c.configuration_service_spec, "");
  EXPECT_EQ(c.unique_instances, UniqueInstances::required);
  EXPECT_EQ(c.shared_offline_grace, std::chrono::seconds(300));
}

TEST(ParseTest, JsonIsAccepted) {
  Configuration c = parse_one(R"({"apiVersion": "akri.sh/v0", "kind": "Configuration",
    "metadata": {"name": "cam.json"},
    "spec": {"discoveryHandler": {"name": "udev", "discoveryDetails": "udevRules: []"},
             "capacity": 3, "brokerProperties": {"A": "b"}, "uniqueInstances": "Required",
             "sharedOfflineGraceSeconds": 0}})");
  EXPECT_EQ(c.name, "cam.json");
  EXPECT_EQ(c.discovery_details, "udevRules: []");
  EXPECT_EQ(c.capacity, 3u);
  EXPECT_EQ(c.shared_offline_grace, std::chrono::seconds(0));
}

TEST(ParseTest, BoundaryValuesAreAccepted) {
  EXPECT_EQ(parse_one(with_spec("  discoveryHandler: {name: h}\n  capacity: 1000000\n")).capacity,
            1000000u);
  std::string longest(56, 'a');
  std::string text = kHeader;
  text.replace(text.find("name: cam"), 9, "name: " + longest);
  EXPECT_EQ(parse_one(text + kMinimalSpec).name, longest);
  text = kHeader;
  text.replace(text.find("name: cam"), 9, "name: a.b-c.0");
  EXPECT_EQ(parse_one(text + kMinimalSpec).name, "a.b-c.0");
}

TEST(ParseTest, SeveralDocumentsAndEmptyOnesAreRead) {
  std::string text = "---\n# only a comment\n---\n" + std::string(kHeader) + kMinimalSpec +
                     "---\n---\n" + kHeader + "  namespace: other\n" + kMinimalSpec + "...\n";
  std::vector<Configuration> configurations = parse_configurations(text, kSource);
  ASSERT_EQ(configurations.size(), 2u);
  EXPECT_EQ(configurations[0].namespace_name, "default");
  EXPECT_EQ(configurations[1].namespace_name, "other");
  EXPECT_TRUE(parse_configurations("", kSource).empty());
  EXPECT_TRUE(parse_configurations("# nothing here\n", kSource).empty());
}

TEST(ParseTest, ErrorInALaterDocumentNamesTheDocument) {
  std::string text = std::string(kHeader) + kMinimalSpec + "---\n" + with_spec("  capacity: 2\n");
  expect_error(text, "spec.discoveryHandler", "(document 2)");
}

TEST(ParseTest, SameIdentityTwiceInOneTextIsRefused) {
  std::string text = std::string(kHeader) + kMinimalSpec + "---\n" + kHeader + kMinimalSpec;
  expect_error(text, "metadata.name", "default/cam is already defined in document 1");
}

TEST(ParseTest, WhatNamesSourcePathAndReason) {
  try {
    parse_configurations(with_spec("  discoveryHandler: {name: h}\n  capacity: 0\n"), kSource);
    FAIL() << "accepted capacity 0";
  } catch (const ConfigurationError& error) {
    EXPECT_STREQ(error.what(),
                 "/etc/dowser/configs/test.yaml: spec.capacity: must be an integer "
                 "from 1 to 1000000");
  }
}

TEST(ParseTest, YamlSyntaxErrorGivesLineAndColumn) {
  expect_error("apiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {name: [x\n", "(document)",
               "line 4");
  expect_error("a: b\n  c: d\n", "(document)", "invalid YAML at line 2");
}

TEST(ParseTest, DocumentLevelErrors) {
  std::string body = std::string("metadata: {name: cam}\n") + kMinimalSpec;
  expect_error("- a\n- b\n", "(document)", "must be a mapping");
  expect_error("kind: Configuration\n" + body, "apiVersion", "akri.sh/v0");
  expect_error("apiVersion: akri.sh/v1\nkind: Configuration\n" + body, "apiVersion", "akri.sh/v0");
  expect_error("apiVersion: akri.sh/v0\n" + body, "kind", "Configuration");
  expect_error("apiVersion: akri.sh/v0\nkind: Instance\n" + body, "kind", "Configuration");
  // kubectl get akric -A -o yaml: a List of them.
  expect_error("apiVersion: v1\nkind: List\nitems: []\nmetadata: {resourceVersion: \"\"}\n", "kind",
               "a document of its own");
  expect_error(
      "apiVersion: akri.sh/v0\nkind: Configuration\n"
      "metadata: {name: cam, deletionTimestamp: \"2026-01-01T00:00:00Z\"}\n" +
          std::string(kMinimalSpec),
      "metadata.deletionTimestamp", "being deleted when it was exported");
  expect_error("apiVersion: akri.sh/v0\nkind: Configuration\n" + std::string(kMinimalSpec),
               "metadata.name", "is required");
  expect_error(std::string(kHeader), "spec", "is required");
  expect_error(std::string(kHeader) + "spec: [1]\n", "spec", "must be a mapping");
}

TEST(ParseTest, MetadataErrors) {
  auto with_metadata = [](const std::string& metadata) {
    return "apiVersion: akri.sh/v0\nkind: Configuration\nmetadata:\n" + metadata + kMinimalSpec;
  };
  expect_error(with_metadata("  namespace: x\n"), "metadata.name", "is required");
  expect_error(with_metadata("  name: Cam\n"), "metadata.name", "DNS-1123 subdomain");
  expect_error(with_metadata("  name: -cam\n"), "metadata.name", "DNS-1123 subdomain");
  expect_error(with_metadata("  name: cam-\n"), "metadata.name", "DNS-1123 subdomain");
  expect_error(with_metadata("  name: a..b\n"), "metadata.name", "DNS-1123 subdomain");
  expect_error(with_metadata("  name: a_b\n"), "metadata.name", "DNS-1123 subdomain");
  expect_error(with_metadata("  name: " + std::string(57, 'a') + "\n"), "metadata.name",
               "at most 56 characters");
  expect_error(with_metadata("  name: " + std::string(57, 'a') + "\n"), "metadata.name",
               "<name>-<6 hex digits>");
  // 64 letters make a subdomain too: its length is what is wrong.
  expect_error(with_metadata("  name: " + std::string(64, 'a') + "\n"), "metadata.name",
               "at most 56 characters (it has 64)");
  expect_error(with_metadata("  name: cam\n  namespace: Cams\n"), "metadata.namespace",
               "DNS-1123 label");
  expect_error(with_metadata("  name: cam\n  namespace: a.b\n"), "metadata.namespace",
               "DNS-1123 label");
}

TEST(ParseTest, SpecErrors) {
  expect_error(with_spec("  capacity: 2\n"), "spec.discoveryHandler", "is required");
  expect_error(with_spec("  discoveryHandler: {name: h}\n  capacty: 2\n"), "spec.capacty",
               "unknown field");
  expect_error(with_spec("  discoveryHandler: {name: h}\n  capacity: 2\n  capacity: 3\n"),
               "spec.capacity", "appears twice");
  for (const char* capacity : {"0", "1000001", "-1", "2.5", "\"3\"", "many", "[1]"}) {
    expect_error(
        with_spec("  discoveryHandler: {name: h}\n  capacity: " + std::string(capacity) + "\n"),
        "spec.capacity", "integer from 1 to 1000000");
  }
  for (const char* grace : {"-1", "1.5", "\"5\"", "2147483648"}) {
    expect_error(with_spec("  discoveryHandler: {name: h}\n  sharedOfflineGraceSeconds: " +
                           std::string(grace) + "\n"),
                 "spec.sharedOfflineGraceSeconds", "integer from 0");
  }
  expect_error(with_spec("  discoveryHandler: {name: h}\n  uniqueInstances: required\n"),
               "spec.uniqueInstances", "Required or Preferred");
}

TEST(ParseTest, DiscoveryHandlerErrors) {
  expect_error(with_spec("  discoveryHandler:\n    discoveryDetails: x\n"),
               "spec.discoveryHandler.name", "is required");
  expect_error(with_spec("  discoveryHandler:\n    name: \"\"\n"), "spec.discoveryHandler.name",
               "must not be empty");
  expect_error(with_spec("  discoveryHandler:\n    name: [a]\n"), "spec.discoveryHandler.name",
               "must be a string");
  expect_error(with_handler("    discoveryDetails:\n      udevRules: []\n"),
               "spec.discoveryHandler.discoveryDetails", "must be a string");
  expect_error(with_handler("    discoveryDetail: x\n"), "spec.discoveryHandler.discoveryDetail",
               "unknown field");
  expect_error(with_handler("    discoveryProperties: {a: b}\n"),
               "spec.discoveryHandler.discoveryProperties", "must be a list");
}

TEST(ParseTest, DiscoveryPropertyErrors) {
  const std::string at = "spec.discoveryHandler.discoveryProperties";
  expect_error(with_handler("    discoveryProperties:\n    - value: x\n"), at + "[0].name",
               "is required");
  expect_error(with_handler("    discoveryProperties:\n    - name: 1abc\n"), at + "[0].name",
               "^[_A-Za-z][_A-Za-z0-9]*$");
  expect_error(with_handler("    discoveryProperties:\n    - name: a-b\n"), at + "[0].name",
               "^[_A-Za-z][_A-Za-z0-9]*$");
  expect_error(
      with_handler("    discoveryProperties:\n    - name: a\n    - name: b\n    - name: a\n"),
      at + "[2].name", "duplicate property name a");
  expect_error(with_handler("    discoveryProperties:\n    - a\n"), at + "[0]",
               "must be a mapping");
  expect_error(with_property("      valu: x\n"), at + "[0].valu", "unknown field");
  expect_error(with_property("      value: {a: b}\n"), at + "[0].value", "must be a string");
}

TEST(ParseTest, ValueFromErrors) {
  const std::string at = "spec.discoveryHandler.discoveryProperties[2].valueFrom";
  const std::string two_before = "    discoveryProperties:\n    - name: a\n    - name: b\n";
  expect_error(with_handler(two_before + "    - name: c\n      valueFrom:\n"
                                         "        secretKeyRef: {name: s, key: k}\n"
                                         "        configMapKeyRef: {name: m, key: k}\n"),
               at, "exactly one of secretKeyRef or configMapKeyRef");
  expect_error(with_handler(two_before + "    - name: c\n      valueFrom: {}\n"), at,
               "exactly one of secretKeyRef or configMapKeyRef");
  expect_error(with_handler(two_before +
                            "    - name: c\n      valueFrom:\n        fieldRef: {fieldPath: x}\n"),
               at + ".fieldRef", "unknown field");

  const std::string ref = "spec.discoveryHandler.discoveryProperties[0].valueFrom.secretKeyRef";
  auto with_secret = [](const std::string& fields) {
    return with_property("      valueFrom:\n        secretKeyRef: {" + fields + "}\n");
  };
  expect_error(with_secret("name: s"), ref + ".key", "is required");
  expect_error(with_secret("key: k"), ref + ".name", "is required");
  expect_error(with_secret("name: s, key: k, name1: x"), ref + ".name1", "unknown field");
  expect_error(with_secret("name: s, key: k, optional: yes"), ref + ".optional", "true or false");
  expect_error(with_secret("name: s, key: k, optional: \"true\""), ref + ".optional",
               "true or false");
  expect_error(with_secret("name: s, key: k, namespace: Bad_Ns"), ref + ".namespace",
               "DNS-1123 label");
  expect_error(with_property("      valueFrom:\n        configMapKeyRef: {key: k}\n"),
               "spec.discoveryHandler.discoveryProperties[0].valueFrom.configMapKeyRef.name",
               "is required");
}

TEST(ParseTest, BrokerErrors) {
  const std::string handler = "  discoveryHandler: {name: h}\n";
  expect_error(with_spec(handler + "  brokerProperties:\n    RESOLUTION: {w: 1}\n"),
               "spec.brokerProperties.RESOLUTION", "must be a string");
  expect_error(with_spec(handler + "  brokerProperties:\n    LIST: [1]\n"),
               "spec.brokerProperties.LIST", "must be a string");
  expect_error(with_spec(handler + "  brokerProperties: [a]\n"), "spec.brokerProperties",
               "must be a mapping");
  // Each property is an environment variable of the containers that get the device.
  expect_error(with_spec(handler + "  brokerProperties: {'A=B': x}\n"), "spec.brokerProperties",
               "'A=B' is not an environment variable name");
  expect_error(with_spec(handler + "  brokerProperties: {'': x}\n"), "spec.brokerProperties",
               "'' is not an environment variable name");
  expect_error(with_spec(handler + "  brokerProperties: {'with space': x}\n"),
               "spec.brokerProperties", "'with space' is not an environment variable name");
  expect_error(with_spec(handler + "  brokerProperties: {'1ST': x}\n"), "spec.brokerProperties",
               "'1ST' is not an environment variable name");
  expect_error(with_spec(handler + "  brokerSpec:\n    brokerPodSpec: {containers: []}\n"
                                   "    brokerJobSpec: {parallelism: 1}\n"),
               "spec.brokerSpec", "exactly one of brokerPodSpec or brokerJobSpec");
  expect_error(with_spec(handler + "  brokerSpec: {}\n"), "spec.brokerSpec",
               "exactly one of brokerPodSpec or brokerJobSpec");
  expect_error(with_spec(handler + "  brokerSpec: {brokerDeploymentSpec: {}}\n"),
               "spec.brokerSpec.brokerDeploymentSpec", "unknown field");
  expect_error(with_spec(handler + "  brokerSpec: {brokerPodSpec: [1]}\n"),
               "spec.brokerSpec.brokerPodSpec", "must be a mapping");
  expect_error(with_spec(handler + "  instanceServiceSpec: [1]\n"), "spec.instanceServiceSpec",
               "must be a mapping");
  expect_error(with_spec(handler + "  configurationServiceSpec: text\n"),
               "spec.configurationServiceSpec", "must be a mapping");
}

TEST(SameDiscoveryTest, ComparesHandlerDetailsAndPropertiesOnly) {
  Configuration base = parse_one(kFullExample);
  Configuration other = base;
  other.capacity = 9;
  other.broker_properties["X"] = "y";
  other.unique_instances = UniqueInstances::required;
  EXPECT_TRUE(base.same_discovery(other));
  EXPECT_FALSE(base == other);

  other = base;
  other.discovery_details += "x: 1\n";
  EXPECT_FALSE(base.same_discovery(other));
  other = base;
  other.handler_name = "udev";
  EXPECT_FALSE(base.same_discovery(other));
  other = base;
  other.discovery_properties[1].secret_key_ref->key = "password";
  EXPECT_FALSE(base.same_discovery(other));
}

}  // namespace
}  // namespace dowser::configuration
