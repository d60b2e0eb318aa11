// The simulator's answers as single-line JSON for the command protocol.
#pragma once

#include "dowser/kubelet_sim.hpp"

#include <grpcpp/support/status.h>
#include <nlohmann/json.hpp>

#include <string>

namespace dowser::testkit {

// {"resources": {name: {...}}, "allocations": [...]}
nlohmann::json to_json(const SimulatorStatus& status);

// {"ids": [...], "response": <the ContainerAllocateResponse the kubelet uses>}
nlohmann::json to_json(const AllocationResult& result);

// "INVALID_ARGUMENT", "UNAVAILABLE", ...
std::string status_code_name(grpc::StatusCode code);

}  // namespace dowser::testkit
