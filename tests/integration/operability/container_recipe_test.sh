#!/usr/bin/env bash
# What can be checked of the container image without a container engine
# (none runs here): the image's build configures (tests off, as in the
# Containerfile), and every flag the image and the DaemonSet pass to dowserd
# is one dowserd accepts.
#
# usage: container_recipe_test.sh <dowserd> <source-dir>
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <dowserd> <source-dir>" >&2
  exit 2
fi
dowserd=$1
source_dir=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/dowser-container.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "container_recipe_test: FAILED: $*" >&2
  exit 1
}

containerfile="$source_dir/packaging/container/Containerfile"
daemonset="$source_dir/packaging/kubernetes/daemonset.yaml"

echo "== the image's configure step (BUILD_TESTING=OFF)"
grep -q -- '-DBUILD_TESTING=OFF' "$containerfile" || fail "the Containerfile no longer builds without tests; update this test"
if ! cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DBUILD_TESTING=OFF >"$work/configure.log" 2>&1; then
  cat "$work/configure.log" >&2
  fail "the source tree does not configure without tests, as the image builds it"
fi

echo "== flags passed to dowserd"
"$dowserd" --help >"$work/help.txt"
# --flag=value or --flag value, as written in the Containerfile's CMD and the DaemonSet's args.
flags=$( (sed -n '/^CMD/,/]/p' "$containerfile"; sed -n '/args:/,/env:/p' "$daemonset") |
  grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
[[ -n $flags ]] || fail "found no dowserd flags in the Containerfile or the DaemonSet"
for flag in $flags; do
  grep -qE -- "(^|[ ,])$flag([ =,]|$)" "$work/help.txt" || fail "dowserd does not accept $flag"
done
echo "container_recipe_test: passed ($(wc -w <<<"$flags") flags)"
