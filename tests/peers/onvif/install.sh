#!/usr/bin/env bash
# Installs the pinned npm `onvif` client (package-lock.json) into
# node_modules next to this script with `npm ci`, once per change of the
# lockfile. Safe to run concurrently (flock).
set -euo pipefail
cd "$(dirname "$0")"
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "install.sh: '$tool' is not on PATH; the ONVIF client check needs Node.js 20 with npm" >&2
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
echo "install.sh: npm ci (onvif, pinned by package-lock.json)" >&2
npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
