#!/usr/bin/env bash
# Runs dowser-bench on a build tree: bench/run.sh [build-dir] [dowser-bench options...]
# Example: bench/run.sh build/default --json /tmp/bench.json
set -euo pipefail
build=${1:-build/default}
shift || true
umask 022
handlers=$(mktemp -d /tmp/dowser-bench-handlers-XXXXXX)
trap 'rm -rf "$handlers"' EXIT
cp "$build/lib/dowser/bench/libdowser-bench-handler.so" \
   "$build/lib/dowser/handlers/libdowser-handler-debug-echo.so" \
   "$build/lib/dowser/test-fixtures/libfixture-test-devices.so" "$handlers/"
"$build/bin/dowser-bench" --dowserd "$build/bin/dowserd" --handlers "$handlers" "$@"
