#!/usr/bin/env bash
# Runs the unit and integration tests against one control plane started for this run, and
# stops exactly that control plane afterwards, whatever happens.
# Set WASMOP_TEST_KUBECONFIG to use an existing cluster (kind, k3d, ...) instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-target/test-cluster}"

if [[ -z "${WASMOP_TEST_KUBECONFIG:-}" ]]; then
  trap 'tests/testbed/cluster.sh down "$dir"' EXIT
  WASMOP_TEST_KUBECONFIG="$(tests/testbed/cluster.sh up "$dir" --watch-pid $$ | tail -n 1)"
  export WASMOP_TEST_KUBECONFIG
fi
echo "using the cluster of $WASMOP_TEST_KUBECONFIG" >&2
# The Python and TypeScript SDKs' and plugins' own tests: native, no cluster, no wasm.
tests/testbed/test-python.sh
tests/testbed/test-js.sh
cargo test --workspace --all-targets "${@:2}"
# Documentation examples run too: the SDK promises runnable ones.
cargo test --workspace --doc
