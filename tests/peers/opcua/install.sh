#!/usr/bin/env bash
# Installs the pinned node-opcua (package-lock.json) into node_modules next
# to this script with `npm ci`, once per change of the lockfile. The OPC UA
# tests call it before entering their private network namespace, so a fresh
# clone needs only the npm registry. Safe to run concurrently (flock).
set -euo pipefail
cd "$(dirname "$0")"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "install.sh: '$tool' is not on PATH; the OPC UA peer tests need Node.js 20 or later" \
         "with npm (node-opcua 2.186.4 is verified on Node v20.20 and npm 11)" >&2
    exit 1
  fi
done

exec 9<"$0"
flock 9
want=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.dowser-installed-lock
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi
echo "install.sh: npm ci (node-opcua, pinned by package-lock.json)" >&2
npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
