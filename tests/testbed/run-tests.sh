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
# Integration test binaries that mostly compile (plugins scaffolded and built, `wasmop test` runs)
# or run a control plane of their own, and share no fixed port with the others: they run in a lane
# beside the rest, which mostly wait on the API server. Their output is printed once they are done.
# They run as built (cargo holds its build directory while `cargo test` runs, so a second
# `cargo test` would wait for the first), each from tests/ as cargo would run it.
beside=(scaffold faults plugin_test languages)
beside_log="${dir}-beside.log"
mkdir -p "$(dirname "$beside_log")"
# Every cargo command here selects the whole workspace (then the targets): features are unified
# over the packages selected, so selecting fewer would build the dependencies again.
mapfile -t beside_bins < <(cargo test --workspace "${beside[@]/#/--test=}" --no-run --message-format=json |
  python3 -c 'import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message["target"]["kind"] == ["test"]:
        print(message["executable"])')
((${#beside_bins[@]} == ${#beside[@]})) || { echo "expected ${#beside[@]} test binaries beside, got ${#beside_bins[@]}" >&2; exit 1; }
(
  cd tests
  lane=0
  for bin in "${beside_bins[@]}"; do
    echo "     Running $bin"
    "$bin" || lane=$?
  done
  exit "$lane"
) >"$beside_log" 2>&1 &
beside_pid=$!
# The workspace's other integration test targets, by name.
mapfile -t rest < <(cargo metadata --no-deps --format-version 1 | python3 -c 'import json, sys
beside = set(sys.argv[1:])
names = {t["name"] for p in json.load(sys.stdin)["packages"] for t in p["targets"] if t["kind"] == ["test"]}
for name in sorted(names - beside):
    print("--test=" + name)' "${beside[@]}")
status=0
# run COMMAND...: runs it; a failure is remembered and the next command runs anyway.
run() { "$@" || status=$?; }
# The Python and TypeScript SDKs' and plugins' own tests: native, no cluster, no wasm.
run tests/testbed/test-python.sh
run tests/testbed/test-js.sh
run cargo test --workspace --lib --bins --examples --benches "${rest[@]}" "${@:2}"
# Documentation examples run too: the SDK promises runnable ones.
run cargo test --workspace --doc
wait "$beside_pid" || status=$?
echo "--- the lane beside: ${beside[*]} ---"
cat "$beside_log"
exit "$status"
