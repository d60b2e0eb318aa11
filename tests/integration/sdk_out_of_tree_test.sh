#!/usr/bin/env bash
# Installs the SDK from a build tree, then builds and tests the plain-C example
# handler (docs/examples/plain-c-handler) against that installed copy only, as
# a third party would: with CMake (find_package + conformance test), by hand
# with pkg-config, and with a GoogleTest test of their own that drives the
# handler through the installed test kit's FakeHost. Then builds and tests the
# C++ file-list handler of docs/handler-authors.md from the guide's own code
# blocks, so the guide cannot drift from what compiles and passes.
#
# usage: sdk_out_of_tree_test.sh <build-dir> <source-dir>
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <build-dir> <source-dir>" >&2
  exit 2
fi
build_dir=$(realpath "$1")
source_dir=$(realpath "$2")
example_dir="$source_dir/docs/examples/plain-c-handler"

work=$(mktemp -d "${TMPDIR:-/tmp}/dowser-sdk-out-of-tree.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
example_build="$work/example-build"
log="$work/step.log"

step() { echo "== $*"; }
fail() {
  echo "sdk_out_of_tree_test: FAILED: $*" >&2
  exit 1
}
# Runs a command quietly; on failure shows its output and stops.
run() {
  local what=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$what"
  fi
}

step "install the SDK (component sdk) from $build_dir into $prefix"
run "cmake --install" cmake --install "$build_dir" --prefix "$prefix" --component sdk

step "configure the example against the installed SDK only"
run "configuring $example_dir" \
  cmake -S "$example_dir" -B "$example_build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
sdk_dir=$(sed -n 's/^dowser-sdk_DIR:PATH=//p' "$example_build/CMakeCache.txt")
[[ "$sdk_dir" == "$prefix"/* ]] || fail "find_package(dowser-sdk) found '$sdk_dir', not the installed copy under $prefix"

step "build the example"
run "building the example" cmake --build "$example_build"

step "run its conformance test"
run "the example's conformance test (ctest in $example_build)" \
  ctest --test-dir "$example_build" --output-on-failure --no-tests=error

step "check that it exports the entry symbol and nothing else"
handler="$example_build/libexample-c-handler.so"
exported=$(nm -D --defined-only "$handler" | awk '{print $NF}')
[[ "$exported" == dowser_get_handler_api ]] ||
  fail "dowser_add_handler() left more than dowser_get_handler_api exported: $(tr '\n' ' ' <<<"$exported")"

step "test it with GoogleTest and the installed test kit's FakeHost"
testkit_user="$work/testkit-user"
mkdir -p "$testkit_user"
cat >"$testkit_user/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(testkit-user LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)  # what a handler author may use: the SDK is C++17
set(CMAKE_CXX_STANDARD_REQUIRED ON)
enable_testing()
find_package(dowser-sdk REQUIRED)
find_package(GTest REQUIRED)
add_executable(example_handler_test example_handler_test.cpp)
target_link_libraries(example_handler_test PRIVATE dowser::testkit GTest::gtest_main)
target_compile_definitions(example_handler_test PRIVATE EXAMPLE_HANDLER="${EXAMPLE_HANDLER}")
add_test(NAME example_handler_test COMMAND example_handler_test)
CMAKE
cat >"$testkit_user/example_handler_test.cpp" <<'CPP'
#include <dowser/testkit.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

TEST(ExampleHandler, ReportsEveryIdAndRefusesEmptyDetails) {
  dowser::testkit::FakeHost host{std::filesystem::path(EXAMPLE_HANDLER)};
  EXPECT_EQ(host.handler().name(), "exampleC");
  auto session = host.start({"a,b", {}});
  ASSERT_TRUE(host.wait_for_snapshot(
      session, [](const dowser::testkit::Snapshot& s) { return s.size() == 2; },
      std::chrono::seconds(10)));
  EXPECT_EQ(host.latest_snapshot(session)->at(1).properties.at("EXAMPLE_ID"), "b");
  host.stop(session);
  EXPECT_THROW(host.start({"", {}}), dowser::host::HandlerCallError);
  EXPECT_TRUE(host.violations().empty());
}
CPP
# The test kit is a static library: a sanitized SDK build needs a sanitized user.
sanitize=()
if grep -q '^DOWSER_SANITIZE:BOOL=ON$' "$build_dir/CMakeCache.txt"; then
  flags="-fsanitize=address,undefined"
  sanitize=("-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_MODULE_LINKER_FLAGS=$flags")
fi
run "configuring a GoogleTest project against the installed test kit" \
  cmake -S "$testkit_user" -B "$testkit_user/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DEXAMPLE_HANDLER="$handler" "${sanitize[@]}"
run "building the GoogleTest project" cmake --build "$testkit_user/build"
run "its test, FakeHost driving the example handler" \
  ctest --test-dir "$testkit_user/build" --output-on-failure --no-tests=error

step "compile it by hand with pkg-config"
pc_file=$(find "$prefix" -name dowser-sdk.pc -print -quit)
[[ -n "$pc_file" ]] || fail "no dowser-sdk.pc installed under $prefix"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc_file")
cflags=$(pkg-config --cflags dowser-sdk) || fail "pkg-config --cflags dowser-sdk (PKG_CONFIG_PATH=$PKG_CONFIG_PATH)"
includedir=$(pkg-config --variable=includedir dowser-sdk)
[[ -f "$includedir/dowser/handler.h" ]] ||
  fail "pkg-config's includedir '$includedir' has no dowser/handler.h (is dowser-sdk.pc relocatable?)"
# shellcheck disable=SC2086  # cflags are several words on purpose
run "compiling example_handler.c with cc -std=c99 $cflags" \
  cc -std=c99 -Wall -Wextra -Werror $cflags -shared -fPIC -fvisibility=hidden \
  -o "$work/libexample-by-hand.so" "$example_dir/example_handler.c"
grep -qw dowser_get_handler_api <<<"$(nm -D --defined-only "$work/libexample-by-hand.so")" ||
  fail "the hand-built handler does not export dowser_get_handler_api"

step "build and test the C++ handler of docs/handler-authors.md, as the guide shows it"
guide="$source_dir/docs/handler-authors.md"
guide_project="$work/file-list"
mkdir -p "$guide_project"
# Each fenced block after a "<!-- file: NAME -->" line goes to NAME (appended
# when NAME comes again), so the guide's code is what gets built.
awk -v dir="$guide_project" '
  /^<!-- file: [^ ]+ -->$/ { name = dir "/" $3; next }
  name != "" && !inside && /^```/ { inside = 1; next }
  inside && /^```$/ { inside = 0; close(name); name = ""; next }
  inside { print >> name }
' "$guide"
for file in file_list.cpp file_list_test.cpp CMakeLists.txt; do
  [[ -s "$guide_project/$file" ]] || fail "$guide has no block marked <!-- file: $file -->"
done
# The conformance test's details, with the newline an editor leaves.
printf 'guide-device-1\nguide-device-2\n' >"$guide_project/list.txt"
printf '%s\n' "$guide_project/list.txt" >"$guide_project/details.txt"
run "configuring the guide's file-list project against the installed SDK" \
  cmake -S "$guide_project" -B "$guide_project/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "${sanitize[@]}"
run "building the guide's file-list project" cmake --build "$guide_project/build"
run "the guide's tests (conformance and FakeHost)" \
  ctest --test-dir "$guide_project/build" --output-on-failure --no-tests=error
tests_run=$(ctest --test-dir "$guide_project/build" -N | sed -n 's/^Total Tests: //p')
[[ "$tests_run" -ge 3 ]] ||
  fail "the guide's project registered $tests_run tests, expected the conformance test and 2 FakeHost tests"

echo "sdk_out_of_tree_test: passed"
