#!/usr/bin/env bash
# Runs a program with libumockdev-preload, as umockdev-wrapper does, but puts
# the AddressSanitizer runtime first when the program uses it (ASan refuses
# to start when another preloaded library comes before it).
# Usage: run_under_umockdev.sh <program> [args...]
set -euo pipefail
# awk reads to the end: an early exit could kill ldd with SIGPIPE, and with
# pipefail that ended this script silently (a rare ASan-run failure).
asan=$(ldd "$1" 2>/dev/null | awk '/libasan/ && !found { print $3; found = 1 }')
preload="libumockdev-preload.so.0"
export LD_PRELOAD="${asan:+$asan:}$preload${LD_PRELOAD:+:$LD_PRELOAD}"
exec "$@"
