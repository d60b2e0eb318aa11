// The status API's JSON: written in full, read leniently (missing fields keep
// their defaults), so dowserctl copes with an older or newer daemon.
#include "status_api.hpp"

namespace dowser::status_api {
namespace {

template <typename T>
void read(const nlohmann::json& json, const char* key, T& field) {
  if (auto it = json.find(key); it != json.end() && !it->is_null()) it->get_to(field);
}

}  // namespace

void to_json(nlohmann::json& json, const HandlerStatus& value) {
  json = {{"name", value.name},   {"version", value.version},
          {"path", value.path},   {"shares_devices", value.shares_devices},
          {"state", value.state}, {"error", value.error}};
}

void from_json(const nlohmann::json& json, HandlerStatus& value) {
  read(json, "name", value.name);
  read(json, "version", value.version);
  read(json, "path", value.path);
  read(json, "shares_devices", value.shares_devices);
  read(json, "state", value.state);
  read(json, "error", value.error);
}

void to_json(nlohmann::json& json, const ConfigurationStatus& value) {
  json = {{"namespace", value.namespace_name},
          {"name", value.name},
          {"handler", value.handler},
          {"resource", value.resource},
          {"capacity", value.capacity},
          {"unique_instances", value.unique_instances},
          {"state", value.state},
          {"last_error", value.last_error},
          {"snapshots", value.snapshots},
          {"errors", value.errors},
          {"devices", value.devices},
          {"instances", value.instances},
          {"last_snapshot", value.last_snapshot}};
}

void from_json(const nlohmann::json& json, ConfigurationStatus& value) {
  read(json, "namespace", value.namespace_name);
  read(json, "name", value.name);
  read(json, "handler", value.handler);
  read(json, "resource", value.resource);
  read(json, "capacity", value.capacity);
  read(json, "unique_instances", value.unique_instances);
  read(json, "state", value.state);
  read(json, "last_error", value.last_error);
  read(json, "snapshots", value.snapshots);
  read(json, "errors", value.errors);
  read(json, "devices", value.devices);
  read(json, "instances", value.instances);
  read(json, "last_snapshot", value.last_snapshot);
}

void to_json(nlohmann::json& json, const ConfigurationErrorStatus& value) {
  json = {{"source", value.source},
          {"field", value.field_path},
          {"reason", value.reason},
          {"since", value.since}};
}

void from_json(const nlohmann::json& json, ConfigurationErrorStatus& value) {
  read(json, "source", value.source);
  read(json, "field", value.field_path);
  read(json, "reason", value.reason);
  read(json, "since", value.since);
}

void to_json(nlohmann::json& json, const SlotStatus& value) {
  json = {{"name", value.name}, {"index", value.index}, {"usage", value.usage}};
}

void from_json(const nlohmann::json& json, SlotStatus& value) {
  read(json, "name", value.name);
  read(json, "index", value.index);
  read(json, "usage", value.usage);
}

void to_json(nlohmann::json& json, const InstanceStatus& value) {
  json = {{"namespace", value.namespace_name},
          {"name", value.name},
          {"configuration", value.configuration},
          {"shared", value.shared},
          {"capacity", value.capacity},
          {"nodes", value.nodes},
          {"here", value.here},
          {"offline", value.offline},
          {"slots", value.slots}};
}

void from_json(const nlohmann::json& json, InstanceStatus& value) {
  read(json, "namespace", value.namespace_name);
  read(json, "name", value.name);
  read(json, "configuration", value.configuration);
  read(json, "shared", value.shared);
  read(json, "capacity", value.capacity);
  read(json, "nodes", value.nodes);
  read(json, "here", value.here);
  read(json, "offline", value.offline);
  read(json, "slots", value.slots);
}

void to_json(nlohmann::json& json, const PluginDeviceStatus& value) {
  json = {{"id", value.id}, {"healthy", value.healthy}};
}

void from_json(const nlohmann::json& json, PluginDeviceStatus& value) {
  read(json, "id", value.id);
  read(json, "healthy", value.healthy);
}

void to_json(nlohmann::json& json, const PluginStatus& value) {
  json = {{"resource", value.resource},
          {"kind", value.kind},
          {"socket", value.socket},
          {"registered", value.registered},
          {"registrations", value.registrations},
          {"lists_sent", value.lists_sent},
          {"last_error", value.last_error},
          {"devices", value.devices}};
}

void from_json(const nlohmann::json& json, PluginStatus& value) {
  read(json, "resource", value.resource);
  read(json, "kind", value.kind);
  read(json, "socket", value.socket);
  read(json, "registered", value.registered);
  read(json, "registrations", value.registrations);
  read(json, "lists_sent", value.lists_sent);
  read(json, "last_error", value.last_error);
  read(json, "devices", value.devices);
}

void to_json(nlohmann::json& json, const Check& value) {
  json = {{"name", value.name}, {"ok", value.ok}, {"detail", value.detail}};
}

void from_json(const nlohmann::json& json, Check& value) {
  read(json, "name", value.name);
  read(json, "ok", value.ok);
  read(json, "detail", value.detail);
}

void to_json(nlohmann::json& json, const Readiness& value) {
  json = {{"ready", value.ready}, {"checks", value.checks}};
}

void from_json(const nlohmann::json& json, Readiness& value) {
  read(json, "ready", value.ready);
  read(json, "checks", value.checks);
}

void to_json(nlohmann::json& json, const Summary& value) {
  json = {{"node", value.node},
          {"version", value.version},
          {"uptime_seconds", value.uptime_seconds},
          {"ready", value.readiness.ready},
          {"checks", value.readiness.checks},
          {"handlers", value.handlers},
          {"configurations", value.configurations},
          {"instances", value.instances},
          {"plugins", value.plugins},
          {"configuration_errors", value.configuration_errors}};
}

void from_json(const nlohmann::json& json, Summary& value) {
  read(json, "node", value.node);
  read(json, "version", value.version);
  read(json, "uptime_seconds", value.uptime_seconds);
  read(json, "ready", value.readiness.ready);
  read(json, "checks", value.readiness.checks);
  read(json, "handlers", value.handlers);
  read(json, "configurations", value.configurations);
  read(json, "instances", value.instances);
  read(json, "plugins", value.plugins);
  read(json, "configuration_errors", value.configuration_errors);
}

}  // namespace dowser::status_api
