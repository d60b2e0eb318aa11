#!/usr/bin/env bash
# Compares the ABI a handler exports (the entry symbol and every type it
# reaches) with the committed baseline, using libabigail's abidiff.
#   abidiff_check.sh <baseline.abi> <handler.so>            the real check
#   abidiff_check.sh --must-differ <baseline.abi> <handler.so>
#       proves the check has teeth: a baseline with dowser_device one member
#       shorter must be reported as a change.
# After an intended change (a new minor appends members), regenerate with:
#   abidw --no-corpus-path --no-comp-dir-path --no-show-locs --exported-interfaces-only \
#         --type-id-style hash <handler.so> > sdk/abi/<name>.abi
set -euo pipefail

mode=check
if [[ "${1:-}" == --must-differ ]]; then mode=must-differ; shift; fi
baseline=$1 library=$2

if [[ $mode == must-differ ]]; then
  altered=$(mktemp)
  trap 'rm -f "$altered"' EXIT
  # dowser_device is 640 bits; pretend the baseline had it at 576 (no `sharing`).
  sed "s/\(name='dowser_device' size-in-bits='\)640'/\1576'/" "$baseline" > "$altered"
  if cmp -s "$baseline" "$altered"; then
    echo "could not alter the baseline: dowser_device not found at 640 bits" >&2
    exit 1
  fi
  if abidiff --no-show-locs "$altered" "$library" > /dev/null; then
    echo "abidiff missed a changed struct size" >&2
    exit 1
  fi
  echo "abidiff reports an altered struct, as it must"
  exit 0
fi

if ! abidiff --no-show-locs "$baseline" "$library"; then
  echo "ABI of $library differs from $baseline (see above)." >&2
  echo "Within a major, structs may only grow at the end, with a new minor; see sdk/include/dowser/handler.h." >&2
  exit 1
fi
echo "ABI matches $baseline"
