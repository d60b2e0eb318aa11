#!/usr/bin/env bash
# Installs the pinned node-opcua (package-lock.json) next to this script. The
# OPC UA tests call it before entering their private network namespace.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../npm-ci-pinned.sh" "$here" "the OPC UA peer tests (node-opcua 2.186.4)"
