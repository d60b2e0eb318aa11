// The status API's JSON: written in full, read leniently (missing fields keep
// their defaults), so dowserctl copes with an older or newer daemon. Each
// type is a table of its keys and members, which serves both directions.
#include "status_api.hpp"

#include <tuple>

namespace dowser::status_api {
namespace {

template <typename Member>
struct Field {
  const char* key;
  Member member;
};
template <typename Member>
Field(const char*, Member) -> Field<Member>;  // for compilers without aggregate deduction

template <typename T>
auto fields_of();

template <>
auto fields_of<HandlerStatus>() {
  using T = HandlerStatus;
  return std::tuple{Field{"name", &T::name},   Field{"version", &T::version},
                    Field{"path", &T::path},   Field{"shares_devices", &T::shares_devices},
                    Field{"state", &T::state}, Field{"error", &T::error}};
}

template <>
auto fields_of<ConfigurationStatus>() {
  using T = ConfigurationStatus;
  return std::tuple{Field{"namespace", &T::namespace_name},
                    Field{"name", &T::name},
                    Field{"handler", &T::handler},
                    Field{"resource", &T::resource},
                    Field{"capacity", &T::capacity},
                    Field{"unique_instances", &T::unique_instances},
                    Field{"state", &T::state},
                    Field{"last_error", &T::last_error},
                    Field{"last_error_current", &T::last_error_current},
                    Field{"last_error_at", &T::last_error_at},
                    Field{"change_refused", &T::change_refused},
                    Field{"snapshots", &T::snapshots},
                    Field{"errors", &T::errors},
                    Field{"report_problems", &T::report_problems},
                    Field{"last_report_problem", &T::last_report_problem},
                    Field{"last_report_problem_at", &T::last_report_problem_at},
                    Field{"devices", &T::devices},
                    Field{"instances", &T::instances},
                    Field{"slots", &T::slots},
                    Field{"last_snapshot", &T::last_snapshot}};
}

template <>
auto fields_of<ConfigurationErrorStatus>() {
  using T = ConfigurationErrorStatus;
  return std::tuple{Field{"source", &T::source}, Field{"field", &T::field_path},
                    Field{"reason", &T::reason}, Field{"since", &T::since}};
}

template <>
auto fields_of<SlotStatus>() {
  using T = SlotStatus;
  return std::tuple{Field{"name", &T::name}, Field{"index", &T::index}, Field{"usage", &T::usage}};
}

template <>
auto fields_of<InstanceStatus>() {
  using T = InstanceStatus;
  return std::tuple{Field{"namespace", &T::namespace_name},
                    Field{"name", &T::name},
                    Field{"configuration", &T::configuration},
                    Field{"shared", &T::shared},
                    Field{"capacity", &T::capacity},
                    Field{"nodes", &T::nodes},
                    Field{"here", &T::here},
                    Field{"offline", &T::offline},
                    Field{"slots", &T::slots}};
}

template <>
auto fields_of<PluginDeviceStatus>() {
  using T = PluginDeviceStatus;
  return std::tuple{Field{"id", &T::id}, Field{"healthy", &T::healthy}};
}

template <>
auto fields_of<PluginStatus>() {
  using T = PluginStatus;
  return std::tuple{Field{"resource", &T::resource},
                    Field{"kind", &T::kind},
                    Field{"socket", &T::socket},
                    Field{"registered", &T::registered},
                    Field{"registrations", &T::registrations},
                    Field{"lists_sent", &T::lists_sent},
                    Field{"last_error", &T::last_error},
                    Field{"devices", &T::devices}};
}

template <>
auto fields_of<Check>() {
  using T = Check;
  return std::tuple{Field{"name", &T::name}, Field{"ok", &T::ok}, Field{"detail", &T::detail}};
}

template <>
auto fields_of<Readiness>() {
  using T = Readiness;
  return std::tuple{Field{"ready", &T::ready}, Field{"checks", &T::checks}};
}

// The summary's readiness is flattened into it: see to_json(Summary).
template <>
auto fields_of<Summary>() {
  using T = Summary;
  return std::tuple{Field{"node", &T::node},
                    Field{"version", &T::version},
                    Field{"uptime_seconds", &T::uptime_seconds},
                    Field{"handlers", &T::handlers},
                    Field{"configurations", &T::configurations},
                    Field{"instances", &T::instances},
                    Field{"plugins", &T::plugins},
                    Field{"configuration_errors", &T::configuration_errors}};
}

// Sets the keys of value's fields in json, an object.
template <typename T>
void write_fields(nlohmann::json& json, const T& value) {
  std::apply([&](const auto&... field) { ((json[field.key] = value.*field.member), ...); },
             fields_of<T>());
}

// Reads the fields json has; the others keep what they hold.
template <typename T>
void read_fields(const nlohmann::json& json, T& value) {
  auto read = [&](const char* key, auto& member) {
    if (auto it = json.find(key); it != json.end() && !it->is_null()) it->get_to(member);
  };
  std::apply([&](const auto&... field) { (read(field.key, value.*field.member), ...); },
             fields_of<T>());
}

template <typename T>
void write_object(nlohmann::json& json, const T& value) {
  json = nlohmann::json::object();
  write_fields(json, value);
}

}  // namespace

void to_json(nlohmann::json& json, const HandlerStatus& value) { write_object(json, value); }
void from_json(const nlohmann::json& json, HandlerStatus& value) { read_fields(json, value); }

void to_json(nlohmann::json& json, const ConfigurationStatus& value) { write_object(json, value); }
void from_json(const nlohmann::json& json, ConfigurationStatus& value) { read_fields(json, value); }

void to_json(nlohmann::json& json, const ConfigurationErrorStatus& value) {
  write_object(json, value);
}
void from_json(const nlohmann::json& json, ConfigurationErrorStatus& value) {
  read_fields(json, value);
}

void to_json(nlohmann::json& json, const SlotStatus& value) { write_object(json, value); }
void from_json(const nlohmann::json& json, SlotStatus& value) { read_fields(json, value); }

void to_json(nlohmann::json& json, const InstanceStatus& value) { write_object(json, value); }
void from_json(const nlohmann::json& json, InstanceStatus& value) { read_fields(json, value); }

void to_json(nlohmann::json& json, const PluginDeviceStatus& value) { write_object(json, value); }
void from_json(const nlohmann::json& json, PluginDeviceStatus& value) { read_fields(json, value); }

void to_json(nlohmann::json& json, const PluginStatus& value) { write_object(json, value); }
void from_json(const nlohmann::json& json, PluginStatus& value) { read_fields(json, value); }

void to_json(nlohmann::json& json, const Check& value) { write_object(json, value); }
void from_json(const nlohmann::json& json, Check& value) { read_fields(json, value); }

void to_json(nlohmann::json& json, const Readiness& value) { write_object(json, value); }
void from_json(const nlohmann::json& json, Readiness& value) { read_fields(json, value); }

void to_json(nlohmann::json& json, const Summary& value) {
  write_object(json, value);
  write_fields(json, value.readiness);  // "ready" and "checks" at the top level
}
void from_json(const nlohmann::json& json, Summary& value) {
  read_fields(json, value);
  read_fields(json, value.readiness);
}

}  // namespace dowser::status_api
