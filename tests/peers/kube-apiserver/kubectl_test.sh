#!/usr/bin/env bash
# kube.peer.kubectl: the real kubectl against the test API server, so the
# server's realism is checked by a third-party client. Also applies
# packaging/kubernetes/ as a user would.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
data=$here/testdata

work=$(mktemp -d "${TMPDIR:-/tmp}/kube-peer-kubectl.XXXXXX")
background=()
cleanup() {
  local status=$?
  for pid in "${background[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ -s "$work/pki/apiserver.pid" ]]; then kill "$(cat "$work/pki/apiserver.pid")" 2>/dev/null || true; fi
  if ((status != 0)); then
    echo "--- server output"; cat "$work/pki/apiserver.out" 2>/dev/null || true
    echo "--- last requests"; tail -n 40 "$work/pki/requests.log" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local seconds=$1 description=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out after ${seconds}s waiting for: $description"
    sleep 0.1
  done
}

# expect_failure PATTERN COMMAND...: COMMAND must fail and say PATTERN.
expect_failure() {
  local pattern=$1
  shift
  local output
  if output=$("$@" 2>&1); then fail "succeeded but should have failed: $*"$'\n'"$output"; fi
  grep -qE "$pattern" <<<"$output" || fail "expected /$pattern/ from: $*"$'\n'"$output"
}

# A short history, so that resourceVersion 1 has expired by the 410 check.
kubeconfig=$("$here/start-apiserver.sh" "$work/pki" --no-crds --owner-pid $$ --history 10 --bookmark-interval-ms 200)
export KUBECONFIG=$kubeconfig KUBECACHEDIR=$work/kubectl-cache
kubectl() { command kubectl --request-timeout=20s "$@"; }
json_field() {  # json_field FILE EXPRESSION: prints EXPRESSION evaluated on the parsed FILE (as `d`)
  node -e "const d = JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8')); console.log($2)" "$1"
}

# --- basics: discovery, version, built-in lists
kubectl version -o json > "$work/version.json"
# Debian's kubernetes-client is kubectl 1.20: no fieldValidation (1.25), no --subresource (1.24).
kubectl_minor=$(json_field "$work/version.json" 'parseInt(d.clientVersion.minor)')
[[ $(json_field "$work/version.json" 'd.serverVersion.gitVersion') == v1.32.4 ]] || fail "server version"
kubectl api-resources > "$work/api-resources"
grep -qE '^daemonsets +ds +apps/v1 +true +DaemonSet' "$work/api-resources" || fail "api-resources: $(cat "$work/api-resources")"
grep -qx namespace/kube-system <<<"$(kubectl get namespaces -o name)" || fail "kube-system namespace"
kubectl create -f "$data/node.yaml" >/dev/null
grep -qx True <<<"$(kubectl get nodes node-a -o jsonpath='{.status.conditions[0].status}')" || fail "node status kept on create"
pass "discovery, version, namespaces, nodes"

# --- the manifests: created, then unchanged when applied again
kubectl apply -f "$repo/packaging/kubernetes/" > "$work/apply1"
for object in customresourcedefinition.apiextensions.k8s.io/configurations.akri.sh \
    customresourcedefinition.apiextensions.k8s.io/instances.akri.sh namespace/dowser daemonset.apps/dowser \
    serviceaccount/dowser clusterrole.rbac.authorization.k8s.io/dowser clusterrolebinding.rbac.authorization.k8s.io/dowser; do
  grep -qx "$object created" "$work/apply1" || fail "$object not created: $(cat "$work/apply1")"
done
kubectl apply -f "$repo/packaging/kubernetes/" > "$work/apply2"
if grep -v ' unchanged$' "$work/apply2"; then fail "second apply changed something"; fi
kubectl get crd -o name > "$work/crds"
grep -qx customresourcedefinition.apiextensions.k8s.io/instances.akri.sh "$work/crds" || fail "kubectl get crd"
grep -qx True <<<"$(kubectl get crd configurations.akri.sh -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" \
  || fail "CRD not Established"
pass "kubectl apply -f packaging/kubernetes/ (twice), kubectl get crd"

# A changed DaemonSet goes out as a strategic merge patch and comes back whole.
sed -e 's/0.0.0.0:8080/0.0.0.0:8081/' -e '/name: state, mountPath/d' "$repo/packaging/kubernetes/daemonset.yaml" > "$work/daemonset.yaml"
grep -qx 'daemonset.apps/dowser configured' <<<"$(kubectl apply -f "$work/daemonset.yaml")" || fail "DaemonSet not configured"
kubectl get ds -n dowser dowser -o json > "$work/ds.json"
[[ $(json_field "$work/ds.json" 'd.spec.template.spec.containers[0].volumeMounts.map(m => m.name).join()') == device-plugins,pod-resources,udev,handlers ]] \
  || fail "volumeMounts after the patch: $(json_field "$work/ds.json" 'JSON.stringify(d.spec.template.spec.containers[0].volumeMounts)')"
[[ $(json_field "$work/ds.json" 'd.metadata.generation') == 2 ]] || fail "DaemonSet generation not bumped"
grep -q 'PATCH /apis/apps/v1/namespaces/dowser/daemonsets/dowser' "$work/pki/requests.log" || fail "no PATCH seen"
pass "strategic merge patch of the DaemonSet"

# --- custom resources
kubectl apply -f "$data/configuration.yaml" -f "$data/instance.yaml" >/dev/null
grep -qx configuration.akri.sh/debug-echo <<<"$(kubectl get configurations.akri.sh -A -o name)" || fail "get configurations -A"
kubectl get configurations.akri.sh -A > "$work/configurations.txt"
grep -qE '^default +debug-echo ' "$work/configurations.txt" || fail "get configurations -A: $(cat "$work/configurations.txt")"
kubectl get instances.akri.sh -o json > "$work/instances.json"
[[ $(json_field "$work/instances.json" 'd.items.length + " " + d.items[0].kind + " " + d.items[0].metadata.name') == '1 Instance debug-echo-4294ea' ]] \
  || fail "instances list: $(cat "$work/instances.json")"
# kubectl rewraps lists as kind List: the server's own list, raw.
kubectl get --raw /apis/akri.sh/v0/namespaces/default/instances > "$work/instances-raw.json"
[[ $(json_field "$work/instances-raw.json" 'd.kind + " " + d.apiVersion + " " + /^[0-9]+$/.test(d.metadata.resourceVersion)') == 'InstanceList akri.sh/v0 true' ]] \
  || fail "raw instances list: $(cat "$work/instances-raw.json")"
# Schema defaults, as the real server applies them.
[[ $(json_field "$work/instances.json" 'JSON.stringify([d.items[0].spec.deviceUsage, d.items[0].spec.shared, d.items[0].spec.nodes])') == '[{},true,["node-a"]]' ]] \
  || fail "instance spec defaults: $(cat "$work/instances.json")"
grep -qx aHVudGVyMg== <<<"$(kubectl get secret echo-credentials -o jsonpath='{.data.password}')" || fail "stringData not merged into data"
grep -qx instance.akri.sh/debug-echo-4294ea <<<"$(kubectl get instances.akri.sh -l akri.sh/configuration=debug-echo -o name)" || fail "label selector"
[[ -z $(kubectl get instances.akri.sh -l akri.sh/configuration=other -o name) ]] || fail "label selector matched too much"
pass "Configuration and Instance: apply, get -A, get -o json, defaults, label selector"

expect_failure 'spec.capacity: Invalid value: 0.*greater than or equal to 1' kubectl apply -f "$data/configuration-invalid.yaml"
expect_failure 'spec.uniqueInstances: Unsupported value: "Sometimes"' kubectl apply -f "$data/configuration-invalid.yaml"
if ((kubectl_minor >= 25)); then
  expect_failure 'strict decoding error: unknown field "spec.capacityy"' kubectl apply -f "$data/configuration-unknown-field.yaml"
else
  grep -q 'Warning: unknown field "spec.capacityy"' <<<"$(kubectl apply -f "$data/configuration-unknown-field.yaml" 2>&1)" || fail "no unknown-field warning"
  kubectl delete -f "$data/configuration-unknown-field.yaml" >/dev/null
fi
expect_failure 'AlreadyExists' kubectl create -f "$data/instance.yaml"
expect_failure 'NotFound|not found' kubectl get instances.akri.sh no-such-instance
pass "schema validation, strict fields, AlreadyExists, NotFound"

# --- watch: a background kubectl --watch sees an update made with kubectl apply
kubectl get instances.akri.sh debug-echo-4294ea --watch --output-watch-events -o json > "$work/watch.out" 2>"$work/watch.err" &
background+=($!)
wait_for 20 "the watch's initial event" grep -Eq '"type": *"ADDED"' "$work/watch.out"
sed 's/nodes: \[node-a\]/nodes: [node-a, node-b]/' "$data/instance.yaml" | kubectl apply -f - >/dev/null
wait_for 20 "the watch to see node-b" grep -q '"node-b"' "$work/watch.out"
grep -Eq '"type": *"MODIFIED"' "$work/watch.out" || fail "no MODIFIED event: $(cat "$work/watch.out")"
pass "kubectl get --watch sees kubectl apply"

# --- optimistic concurrency: replacing from a stale copy is a Conflict
kubectl get instances.akri.sh debug-echo-4294ea -o json > "$work/stale.json"
kubectl patch instances.akri.sh debug-echo-4294ea --type=merge -p '{"spec":{"deviceUsage":{"debug-echo-4294ea-0":"node-a"}}}' >/dev/null
expect_failure 'Conflict|the object has been modified' kubectl replace -f "$work/stale.json"
kubectl get instances.akri.sh debug-echo-4294ea -o json > "$work/fresh.json"
kubectl replace -f "$work/fresh.json" >/dev/null
pass "stale kubectl replace fails with a Conflict, a fresh one succeeds"

# --- node status subresource: what the dead-node tests do
if ((kubectl_minor >= 24)); then
  kubectl patch node node-a --subresource=status --type=merge \
    -p '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"NodeStatusUnknown"}]}}' >/dev/null
  grep -qx False <<<"$(kubectl get node node-a -o jsonpath='{.status.conditions[0].status}')" || fail "node status patch"
  pass "node marked NotReady through the status subresource"
else
  echo "skip - kubectl 1.$kubectl_minor has no --subresource"
fi

# --- garbage collection: an Instance owned by its Configuration goes with it
uid=$(kubectl get configurations.akri.sh debug-echo -o jsonpath='{.metadata.uid}')
kubectl patch instances.akri.sh debug-echo-4294ea --type=merge -p "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"akri.sh/v0\",\"kind\":\"Configuration\",\"name\":\"debug-echo\",\"uid\":\"$uid\",\"controller\":true,\"blockOwnerDeletion\":true}]}}" >/dev/null
wait_for 20 "the watch to see the owner reference" grep -q "$uid" "$work/watch.out"
kubectl delete configurations.akri.sh debug-echo >/dev/null
expect_failure 'NotFound|not found' kubectl get instances.akri.sh debug-echo-4294ea
wait_for 20 "the watch to see the DELETED event" grep -Eq '"type": *"DELETED"' "$work/watch.out"
pass "deleting a Configuration deletes its Instances"

# --- raw watch semantics kubectl exposes with --raw
current=$(kubectl get namespaces -o jsonpath='{.metadata.resourceVersion}')
kubectl get --raw "/api/v1/namespaces?watch=1&allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion=$current" > "$work/bookmarks"
grep -q '"type":"BOOKMARK"' "$work/bookmarks" || fail "no BOOKMARK event: $(cat "$work/bookmarks")"
kubectl get --raw '/apis/akri.sh/v0/instances?watch=1&resourceVersion=1&timeoutSeconds=5' > "$work/expired"
grep -q '"type":"ERROR".*"reason":"Expired".*"code":410' "$work/expired" || fail "no 410 ERROR event: $(cat "$work/expired")"
pass "bookmarks, 410 Expired for a compacted resourceVersion, timeoutSeconds"

# --- authentication
expect_failure 'Unauthorized' kubectl --token=not-the-token get namespaces
grep -qx namespace/default <<<"$(kubectl --context dowser-test-client-certificate get namespaces -o name)" || fail "client certificate"
openssl rand -hex 24 > "$work/pki/token.new" && mv "$work/pki/token.new" "$work/pki/token"
expect_failure 'Unauthorized' kubectl get namespaces
grep -qx namespace/default <<<"$(kubectl --token="$(cat "$work/pki/token")" get namespaces -o name)" || fail "rotated token refused"
pass "wrong token refused, client certificate accepted, token file re-read"

# --- clean exit on SIGTERM
pid=$(cat "$work/pki/apiserver.pid")
kill -TERM "$pid"
wait_for 10 "the server to exit" bash -c "! kill -0 $pid"
grep -q 'listening on https://127.0.0.1:' "$work/pki/apiserver.out" || fail "server output"
pass "server exits on SIGTERM"
