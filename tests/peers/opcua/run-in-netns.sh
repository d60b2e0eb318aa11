#!/usr/bin/env bash
# Runs a command inside a private network namespace where `lo` is the only
# interface: node-opcua's LDS always announces over mDNS, which must not
# reach a real network. Installs node-opcua first (that needs the registry).
# Usage: run-in-netns.sh <command> [args...]    (needs root for unshare -n)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/install.sh"

if ! unshare -n true 2>/dev/null; then
  echo "run-in-netns.sh: 'unshare -n' failed; the OPC UA peer tests need root (CAP_SYS_ADMIN)" >&2
  exit 1
fi
exec unshare -n bash -c '
  set -e
  ip link set lo up
  ip link set lo multicast on
  ip route add 224.0.0.0/4 dev lo
  ip addr add 10.77.0.1/32 dev lo
  exec "$@"' run-in-netns "$@"
