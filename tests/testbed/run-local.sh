#!/usr/bin/env bash
# `make run`: the host with the webpage plugin, against the current kubeconfig when it reaches a
# cluster, else against a local control plane started in the background (stop it with
# `make cluster-down`). Installs the WebPage CRD and the example WebPage first.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-target/cluster}"

cargo build --quiet --release -p wasmop-tests --bin kube-apply
apply=target/release/kube-apply
if "$apply" --check 2>/dev/null; then
  echo "using the cluster of the current kubeconfig" >&2
else
  echo "no reachable cluster in the current kubeconfig: starting a local control plane" >&2
  KUBECONFIG="$(tests/testbed/cluster.sh up "$dir" | tail -n 1)"
  export KUBECONFIG
  echo "local control plane up; export KUBECONFIG=$KUBECONFIG to use kubectl on it" >&2
fi
"$apply" plugins/webpage/crd.yaml plugins/webpage/example.yaml
# --watch: `make plugins` in another terminal swaps the new version in.
exec target/release/wasmop run --plugin plugins/dist/webpage.wasm --watch
