#!/usr/bin/env bash
# start-apiserver.sh DIR [--no-crds] [SERVER OPTIONS...]
# Makes PKI (once per DIR) and a fresh random token, starts apiserver.mjs in
# the background on a free port, waits (with a deadline) until it listens,
# applies packaging/kubernetes/crds.yaml with kubectl unless --no-crds, and
# prints the kubeconfig path (DIR/kubeconfig) as its only line on stdout.
# Other options go to the server, e.g. --owner-pid $$ --bookmark-interval-ms 200.
#   DIR/token          the bearer token (rewrite it to rotate)
#   DIR/apiserver.pid  the server's pid: stop it with SIGTERM
#   DIR/apiserver.out  its stdout and stderr;  DIR/requests.log  one line per request
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
dir=${1:?usage: start-apiserver.sh DIR [--no-crds] [SERVER OPTIONS...]}
shift
apply_crds=1
server_options=()
for option in "$@"; do
  if [[ "$option" == --no-crds ]]; then apply_crds=0; else server_options+=("$option"); fi
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
[[ -s "$dir/server.key" && -s "$dir/client.key" ]] || "$here/make-pki.sh" "$dir" >&2
(umask 077 && openssl rand -hex 24 > "$dir/token")
rm -f "$dir/ready" "$dir/kubeconfig"

# Detached from the caller's stdout and stderr, so a caller reading them
# (ctest, std::system) does not wait for the server.
node "$here/apiserver.mjs" --pki "$dir" --token-file "$dir/token" --port 0 --ready-file "$dir/ready" \
  --log "$dir/requests.log" "${server_options[@]}" </dev/null >"$dir/apiserver.out" 2>&1 &
pid=$!
echo "$pid" > "$dir/apiserver.pid"

deadline=$((SECONDS + 30))
until [[ -s "$dir/ready" ]]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "start-apiserver: the server exited; its output:" >&2
    cat "$dir/apiserver.out" >&2
    exit 1
  fi
  if ((SECONDS >= deadline)); then
    echo "start-apiserver: not listening after 30 s" >&2
    kill "$pid"
    exit 1
  fi
  sleep 0.05
done

if ((apply_crds)); then
  if ! KUBECONFIG="$dir/kubeconfig" KUBECACHEDIR="$dir/kubectl-cache" \
      kubectl apply -f "$repo/packaging/kubernetes/crds.yaml" >"$dir/crds.out" 2>&1; then
    echo "start-apiserver: applying the CRDs failed:" >&2
    cat "$dir/crds.out" >&2
    kill "$pid"
    exit 1
  fi
fi
echo "$dir/kubeconfig"
