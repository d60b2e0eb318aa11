#!/usr/bin/env bash
# Installs the npm packages a peer folder pins (its package-lock.json) into
# that folder's node_modules with `npm ci`, once per change of the lockfile,
# so a fresh clone needs only the npm registry. Safe to run concurrently
# (flock on the lockfile).
# Usage: npm-ci-pinned.sh <peer-folder> <what the packages are for>
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 <peer-folder> <purpose>" >&2
  exit 2
fi
cd "$1"
purpose=$2
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "npm-ci-pinned: '$tool' is not on PATH; $purpose needs Node.js 20 or later with npm" >&2
    exit 1
  fi
done
exec 9<package-lock.json
flock 9
want=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.dowser-installed-lock
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi
echo "npm-ci-pinned: npm ci in $PWD ($purpose, pinned by package-lock.json)" >&2
npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
