#!/usr/bin/env bash
# Validates the camera simulator with the npm `onvif` client.
# Usage: check-simulator.sh <onvif-camera-sim> unicast|multicast
#   unicast:   host namespace, the simulator on an ephemeral WS-Discovery port
#   multicast: run it through run-in-netns.sh; the simulator on port 3702
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sim=$1 mode=$2
"$here/install.sh"
config=$(mktemp /tmp/onvif-sim-XXXXXX.json)
trap 'rm -f "$config"' EXIT
cat >"$config" <<'JSON'
{"cameras": [
  {"name": "lobby", "manufacturer": "Acme", "model": "Eye 2", "ip": "10.1.0.7",
   "mac": "02:00:00:00:01:07"},
  {"name": "gate", "username": "operator", "password": "s3cret!", "ip": "10.1.0.8",
   "mac": "02:00:00:00:01:08"}]}
JSON
args=(--config "$config")
[[ $mode == multicast ]] && args+=(--multicast --wsd-port 3702)
coproc SIM { exec "$sim" "${args[@]}"; }
sim_pid=$SIM_PID
read -r ready <&"${SIM[0]}"
echo "simulator: $ready"
port=$(sed 's/.*wsd=\([0-9]*\).*/\1/' <<<"$ready")
target=()
[[ $mode == unicast ]] && target=(--unicast "127.0.0.1:$port")
# One camera needs credentials: the client uses them for both (the open
# camera ignores them), and the simulator checks every digest it gets.
status=0
node "$here/validate-with-npm-onvif.mjs" --expect 2 "${target[@]}" \
  --user operator --password 's3cret!' || status=$?
echo quit >&"${SIM[1]}"
wait "$sim_pid" || true
exit "$status"
