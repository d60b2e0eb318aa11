#!/usr/bin/env bash
# Installs the SDK from a build tree, then builds and tests the plain-C example
# handler (docs/examples/plain-c-handler) against that installed copy only, as
# a third party would: with CMake (find_package + conformance test) and by hand
# with pkg-config.
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

step "install the SDK from $build_dir into $prefix"
run "cmake --install" cmake --install "$build_dir" --prefix "$prefix"

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

echo "sdk_out_of_tree_test: passed"
