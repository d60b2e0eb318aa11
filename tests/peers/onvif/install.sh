#!/usr/bin/env bash
# Installs the pinned npm `onvif` client (package-lock.json) next to this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../npm-ci-pinned.sh" "$here" "the ONVIF client check (npm onvif)"
