#!/usr/bin/env bash
# Builds the OPC UA decoder (handlers/opcua/codec) with clang's libFuzzer,
# ASan and UBSan, and fuzzes it for a bounded time, seeded with the messages
# captured from node-opcua. Fails on any finding; the reproducer is left in
# the build directory.
# Usage: run_opcua_decoder_fuzz.sh <source-dir> <build-dir> [seconds]
set -euo pipefail
source_dir=$1 build_dir=$2 seconds=${3:-20}
here="$source_dir/tests/fuzz/opcua"
codec="$source_dir/handlers/opcua/codec"
seeds="$source_dir/tests/unit/opcua/vectors"
work="$build_dir/fuzz/opcua"
mkdir -p "$work/corpus"

command -v clang++ >/dev/null || {
  echo "clang++ not found: install clang and libclang-rt-14-dev (.ci/install-deps)" >&2
  exit 1
}
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$codec" "$codec/ua_binary.cpp" "$codec/ua_transport.cpp" "$codec/ua_services.cpp" \
  "$here/opcua_decoder_fuzz.cpp" -o "$work/opcua_decoder_fuzz"

# New inputs go to the build tree's corpus; the seeds in the source tree stay as they are.
"$work/opcua_decoder_fuzz" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
  -dict="$here/opcua.dict" -artifact_prefix="$work/" -print_final_stats=1 \
  "$work/corpus" "$seeds"
