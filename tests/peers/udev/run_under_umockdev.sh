#!/usr/bin/env bash
# Runs a program with libumockdev-preload, as umockdev-wrapper does, but puts
# the AddressSanitizer runtime first when the program uses it (ASan refuses
# to start when another preloaded library comes before it).
# Usage: run_under_umockdev.sh <program> [args...]
set -euo pipefail
asan=$(ldd "$1" 2>/dev/null | awk '/libasan/ { print $3; exit }')
preload="libumockdev-preload.so.0"
export LD_PRELOAD="${asan:+$asan:}$preload${LD_PRELOAD:+:$LD_PRELOAD}"
exec "$@"
