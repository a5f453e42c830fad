#!/usr/bin/env bash
# `make run-dns`: the dnsrecord sample against the current kubeconfig's cluster (or a local
# control plane, as `make run`): starts the records service on 127.0.0.1:18053, stores its token
# in the Secret dns-api-token, installs the DnsRecord CRD and the example, and runs the host with
# the plugin and the operator's allowances for it (plugins/dnsrecord/wasmop.yaml: its Secrets, and
# its token over plain HTTP to the local service). Edit the DnsRecord (kubectl edit dnsrecord www)
# or change the record behind the host's back with curl, and watch the service's log put it back.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-target/cluster}"
token="${DNS_API_TOKEN:-demo-token}"

cargo build --quiet --release -p wasmop-tests --bin kube-apply --bin wasmop-records
apply=target/release/kube-apply
if ! "$apply" --check 2>/dev/null; then
  KUBECONFIG="$(tests/testbed/cluster.sh up "$dir" | tail -n 1)"
  export KUBECONFIG
  echo "local control plane up; export KUBECONFIG=$KUBECONFIG to use kubectl on it" >&2
fi
DNS_API_TOKEN="$token" target/release/wasmop-records &
records=$!
trap 'kill $records 2>/dev/null || true' EXIT
secret=$(mktemp)
trap 'kill $records 2>/dev/null || true; rm -f "$secret"' EXIT
printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: dns-api-token, namespace: default}\nstringData: {token: "%s"}\n' "$token" >"$secret"
"$apply" plugins/dnsrecord/crd.yaml "$secret" plugins/dnsrecord/example.yaml
target/release/wasmop run --plugin plugins/dist/dnsrecord.wasm --namespace default --config plugins/dnsrecord/wasmop.yaml
