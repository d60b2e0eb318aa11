#!/usr/bin/env bash
# Builds the udev rule parser with clang's libFuzzer (plus ASan and UBSan) and
# fuzzes it for a bounded time. Fails on any finding; a reproducer is left
# in the build directory. Usage: run_udev_rule_fuzz.sh <source-dir> <build-dir> [seconds]
set -euo pipefail
source_dir=$1 build_dir=$2 seconds=${3:-20}
here="$source_dir/tests/fuzz/udev"
udev="$source_dir/handlers/udev"
work="$build_dir/fuzz/udev"
mkdir -p "$work/corpus"

command -v clang++ >/dev/null || {
  echo "clang++ not found: install clang and libclang-rt-14-dev (.ci/install-deps)" >&2
  exit 1
}
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$udev" "$udev/udev_rule.cpp" "$udev/udev_glob.cpp" "$here/udev_rule_fuzz.cpp" \
  -o "$work/udev_rule_fuzz"

# New inputs go to the build tree's corpus; the seeds in the source tree stay as they are.
"$work/udev_rule_fuzz" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
  -dict="$here/udev_rule.dict" -artifact_prefix="$work/" -print_final_stats=1 \
  "$work/corpus" "$here/corpus"
