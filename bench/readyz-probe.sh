#!/bin/bash
# Time of a /readyz probe with many Instances in the file store: the probe
# runs on dowserd's core thread, so whatever it costs, an Allocate may wait.
#   bench/readyz-probe.sh DOWSERD [INSTANCES] [PROBES]
# The Instances are other nodes' (so dowserd keeps them without discovering
# anything); prints p50 and max in ms. Compare two builds in one run.
set -euo pipefail
dowserd=${1:?usage: $0 DOWSERD [INSTANCES] [PROBES]}
instances=${2:-5000}
probes=${3:-30}
handler_so=$(dirname "$0")/../build/default/lib/dowser/handlers/libdowser-handler-debug-echo.so
root=$(mktemp -d /tmp/dowser-readyz-XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$root"' EXIT
mkdir -p "$root/state/instances/default" "$root/configs" "$root/handlers" "$root/dp"
python3 - "$root/state/instances/default" "$instances" <<'PY'
import json, sys
directory, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    name = "cams-%06x" % i
    doc = {"apiVersion": "akri.sh/v0", "kind": "Instance",
           "metadata": {"name": name, "namespace": "default"}, "revision": i + 1,
           "spec": {"brokerProperties": {"DEBUG_ECHO_DESCRIPTION": "d%d" % i},
                    "capacity": 4, "cdiName": "akri.sh/cams=%06x" % i,
                    "configurationName": "cams", "deviceUsage": {},
                    "nodes": ["other-node"], "shared": True}}
    with open("%s/%s.json" % (directory, name), "w") as out:
        json.dump(doc, out)
PY
echo "$((instances + 1))" > "$root/state/instances/.revision"
install -m 644 "$handler_so" "$root/handlers/"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$dowserd" --node-name probe-node --state-dir "$root/state" --config-dir "$root/configs" \
  --handler-dir "$root/handlers" --kubelet-dir "$root/dp" --podresources-socket "$root/podres.sock" \
  --http-listen "127.0.0.1:$port" --log-level warn 2>"$root/log" &
pid=$!
python3 - "$port" "$probes" <<'PY'
import sys, time, urllib.error, urllib.request
port, probes = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 10
while True:  # until the status API answers
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/healthz" % port).read()
        break
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline:
            sys.exit("dowserd did not answer")
        time.sleep(0.05)
times = []
for _ in range(probes):
    start = time.perf_counter()
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/readyz" % port).read()
    except urllib.error.HTTPError:
        pass  # 503 (not ready) is an answer too
    times.append((time.perf_counter() - start) * 1000)
times.sort()
print("readyz: p50 %.2f ms, max %.2f ms over %d probes" % (times[len(times) // 2], times[-1], probes))
PY
