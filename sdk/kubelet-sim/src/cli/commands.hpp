// The line protocol of dowser-kubelet-sim: one command per input line, one
// reply line per command, starting with "ok" or "error:".
#pragma once

#include "dowser/kubelet_sim.hpp"

#include <string>

namespace dowser::testkit {

struct Reply {
  std::string line;   // without the newline
  bool quit = false;  // the command was quit
};

Reply execute_command(KubeletSimulator& simulator, const std::string& line);

// The command summary for --help.
extern const char* const kCommandHelp;

}  // namespace dowser::testkit
