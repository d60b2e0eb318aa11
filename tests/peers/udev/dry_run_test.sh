#!/usr/bin/env bash
# The dry run of handlers/udev/README.md against the device descriptions of
# this folder: dowser-handler-check, run under umockdev-run, must list the two
# capture devices of the example rules and not the metadata node.
# Usage: dry_run_test.sh <dowser-handler-check> <libdowser-handler-udev.so>
set -euo pipefail
check=$1 handler=$2
here=$(cd "$(dirname "$0")" && pwd)
details="$here/../../../handlers/udev/examples/video-devices.yaml"

devices=()
for name in base cameras ttys sound pci; do devices+=(-d "$here/$name.umockdev"); done

# umockdev-run preloads its library ahead of everything: under ASan, tell the
# runtime not to insist on coming first.
# (grep reads a captured output: with pipefail, `ldd | grep -q` fails when
# grep exits before ldd has written everything.)
if grep -q libasan <<<"$(ldd "$check")"; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
fi

output=$(umockdev-run "${devices[@]}" -- "$check" "$handler" --details "$details") || {
  echo "$output"
  echo "dowser-handler-check failed under umockdev-run" >&2
  exit 1
}
echo "$output"
usb=/devices/pci0000:00/0000:00:14.0/usb1
expect() { grep -qF -- "$1" <<<"$output" || { echo "missing: $1" >&2; exit 1; }; }
refuse() { ! grep -qF -- "$1" <<<"$output" || { echo "unexpected: $1" >&2; exit 1; }; }
expect "$usb/1-1/1-1:1.0/video4linux/video0"
expect "$usb/1-10/1-10:1.0/video4linux/video2"
expect "device node /dev/video0 -> /dev/video0 (rw)"
refuse "video4linux/video1"
expect "discover: 1 snapshot(s) in 1000 ms, the latest with 2 device(s)"
