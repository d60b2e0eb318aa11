#!/usr/bin/env bash
# Runs a command inside a private network namespace where `lo` is the only
# interface, multicast-capable with a route for 224.0.0.0/4: WS-Discovery
# multicast (239.255.255.250:3702) never reaches a real network there.
# Usage: run-in-netns.sh <command> [args...]    (needs root for unshare -n)
set -euo pipefail
if ! unshare -n true 2>/dev/null; then
  echo "run-in-netns.sh: 'unshare -n' failed; the ONVIF multicast tests need root (CAP_SYS_ADMIN)" >&2
  exit 1
fi
exec unshare -n bash -c '
  set -e
  ip link set lo up
  ip link set lo multicast on
  ip route add 224.0.0.0/4 dev lo
  exec "$@"' run-in-netns "$@"
