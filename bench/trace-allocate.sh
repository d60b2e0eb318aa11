#!/usr/bin/env bash
# Where an Allocate's time goes: runs the harness and records, with perf trace,
# the socket reads and writes, the store lock and the journal's fdatasync of
# the Allocate stage's dowserd and of the harness (the kubelet's side), then
# splits each call into phases with bench/allocate_phases.py.
#
#   bench/trace-allocate.sh [build-dir] OUT [dowser-bench options...]
#   e.g. bench/trace-allocate.sh build/default /tmp/alloc --events 10 --calls 200 \
#          --allocate-instances 200 --scale 10 --idle-seconds 1
#
# TRACE_EVENTS= (empty) traces every system call, for the core thread's count
# per call; the default traces only what the phases need.
# Needs perf (Debian: linux-perf) and root. Tracing slows every traced call
# by a few microseconds: compare phases with each other, not with untraced runs.
set -euo pipefail
build=${1:-build/default}
out=${2:?OUT prefix required}
shift 2 || true
here=$(cd "$(dirname "$0")" && pwd)
"$here/run.sh" "$build" "$@" >"$out.txt" 2>&1 &
bench=$!
dowserd=""
for _ in $(seq 1 60000); do
  dowserd=$(pgrep -f -- "--config-dir=.*/allocate/configs" | head -1 || true)
  [ -n "$dowserd" ] && break
  kill -0 "$bench" 2>/dev/null || break
  sleep 0.01
done
if [ -z "$dowserd" ]; then
  echo "the harness never started the Allocate stage; see $out.txt" >&2
  exit 1
fi
harness=$(pgrep -n -f "dowser-bench --dowserd")
events=${TRACE_EVENTS-recvmsg,sendmsg,flock,fdatasync}
perf trace -T ${events:+-e "$events"} -p "$dowserd,$harness" -o "$out.trace" 2>/dev/null &
tracer=$!
wait "$bench"
kill -INT "$tracer" 2>/dev/null || true
wait "$tracer" || true
python3 "$here/allocate_phases.py" "$out.trace"
