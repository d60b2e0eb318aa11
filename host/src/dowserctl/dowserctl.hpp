// dowserctl: the parts of the CLI, shared between its source files.
#pragma once

#include <chrono>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace dowser::ctl {

// Exit codes scripts can rely on (docs/dowserctl.md).
enum ExitCode : int {
  kOk = 0,
  kProblems = 1,     // validate/discover found problems; status: not ready; slots: no such Instance
  kUsage = 2,        // bad command line
  kUnreachable = 3,  // the daemon could not be reached or its answer was unusable
};

enum class Format { table, json };

struct Output {
  Format format = Format::table;
  bool colour = false;  // only on a terminal, and never with NO_COLOR set
};

// ---- tables ------------------------------------------------------------------------

enum class Colour { none, green, yellow, red };

struct Cell {
  std::string text;
  Colour colour = Colour::none;
  Cell(std::string t = {}, Colour c = Colour::none) : text(std::move(t)), colour(c) {}
  Cell(const char* t) : text(t) {}
};

// Columns aligned to their widest cell; colour codes do not count as width.
class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  void add(std::vector<Cell> row);
  void print(std::ostream& out, bool colour) const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<Cell>> rows_;
};

std::string paint(const std::string& text, Colour colour, bool enabled);

// ---- commands that read the daemon (remote_commands.cpp) ------------------------------

struct Remote {
  std::string server = "http://127.0.0.1:8080";
  std::chrono::milliseconds timeout = std::chrono::seconds(5);
};

int show_status(const Remote& remote, const Output& output);
int show_handlers(const Remote& remote, const Output& output);
int show_configurations(const Remote& remote, const Output& output);
// Which Instances `instances` lists (configuration, namespace) or which one
// `slots` shows (name, namespace); empty fields select all.
struct InstanceFilter {
  std::string configuration;
  std::string name;
  std::string namespace_name;
};
int show_instances(const Remote& remote, const Output& output, const InstanceFilter& filter);
int show_slots(const Remote& remote, const Output& output, const InstanceFilter& instance);
int show_plugins(const Remote& remote, const Output& output);

// ---- commands that run without a daemon -----------------------------------------------

struct HandlerSetup {
  std::filesystem::path handler_dir = "/usr/lib/dowser/handlers";
  std::string resource_domain = "akri.sh";
};

struct ValidateOptions {
  std::vector<std::filesystem::path> files;
  bool skip_handlers = false;  // only the manifests, no handler-side checks
  bool strict = false;         // handler warnings count as problems
};

int validate(const HandlerSetup& setup, const ValidateOptions& options, const Output& output);

struct DiscoverOptions {
  std::string handler;
  std::filesystem::path details_file;
  std::vector<std::string> properties;  // KEY=VALUE or KEY (present, no value)
  std::string configuration = "discover";
  std::string node;
  // How messages name the node and where it came from (--node, NODE_NAME).
  std::string node_as_given;
  uint32_t capacity = 1;
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  bool strict = false;  // devices left out (or reports refused) fail it
};

int discover(const HandlerSetup& setup, const DiscoverOptions& options, const Output& output);

}  // namespace dowser::ctl
