// Small helpers shared by the kubelet simulator tests.
#pragma once

#include <stdlib.h>
#include "temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <string>

namespace dowser::testkit::test {

// Generous: waits end as soon as their condition holds.
inline constexpr std::chrono::seconds kDeadline{10};

using dowser::test::TempDir;

}  // namespace dowser::testkit::test
