#!/usr/bin/env bash
# Runs the unit and integration tests against one control plane started for this run, and
# stops exactly that control plane afterwards, whatever happens.
# Set WASMOP_TEST_KUBECONFIG to use an existing cluster (kind, k3d, ...) instead, and
# WASMOP_TEST_THREADS to run the `integration` binary's tests with another number of threads.
#
# Three lanes run side by side, each printing its output once it is done:
# - the main lane: the Python and TypeScript SDKs' own tests, the workspace's unit tests, the
#   `integration` binary (tests that may run side by side, with more threads than cores: they
#   mostly wait on the API server), then the documentation examples;
# - the lane beside: the binaries that mostly compile (plugins scaffolded and built, `wasmop
#   test` runs) or run a control plane of their own;
# - the lane of turns: every other integration test binary (a fixed port, a resource loader over
#   every `ReconcilerPlugin` of the cluster, a CRD that others use removed), one after the other.
# Then, the lanes done, what needs a quiet machine runs, one after the other: the `integration`
# modules that bound how long a takeover takes or count the API server's watches, and the binary
# that stops replicas mid-burst and bounds what reaches the external service after a takeover.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-target/test-cluster}"

if [[ -z "${WASMOP_TEST_KUBECONFIG:-}" ]]; then
  trap 'tests/testbed/cluster.sh down "$dir"' EXIT
  WASMOP_TEST_KUBECONFIG="$(tests/testbed/cluster.sh up "$dir" --watch-pid $$ | tail -n 1)"
  export WASMOP_TEST_KUBECONFIG
fi
echo "using the cluster of $WASMOP_TEST_KUBECONFIG" >&2
beside=(scaffold faults plugin_test languages)
together=integration
alone=(shards:: shared_watch::)
quiet=(stopped)
mkdir -p "$(dirname "$dir")"

# Every integration test binary, built as `make test-build` built it, as "name path" lines.
# Every cargo command here selects the whole workspace (then the targets): features are unified
# over the packages selected, so selecting fewer would build the dependencies again.
mapfile -t binaries < <(cargo test --workspace --tests --no-run --message-format=json |
  python3 -c 'import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message["target"]["kind"] == ["test"]:
        print(message["target"]["name"], message["executable"])')
declare -A binary
for line in "${binaries[@]}"; do binary["${line%% *}"]="${line#* }"; done
for name in "${beside[@]}" "${quiet[@]}" "$together"; do
  [[ -n "${binary[$name]:-}" ]] || { echo "no integration test binary named $name" >&2; exit 1; }
done
turns=()
for name in $(printf '%s\n' "${!binary[@]}" | sort); do
  [[ " ${beside[*]} ${quiet[*]} $together " == *" $name "* ]] || turns+=("$name")
done

# lane NAME BINARY...: runs the binaries one after the other from tests/ (as cargo would run
# them; cargo holds its build directory while `cargo test` runs, so they run as built), in the
# background, its output in a log; every binary runs, the lane fails if one did.
declare -A lanes
lane() {
  local name="$1" log="$dir-$1.log"
  shift
  (
    cd tests
    status=0
    for test in "$@"; do
      echo "     Running ${binary[$test]}"
      "${binary[$test]}" || status=$?
    done
    exit "$status"
  ) >"$log" 2>&1 &
  lanes["$name"]=$!
}
lane beside "${beside[@]}"
lane turns "${turns[@]}"

status=0
# run COMMAND...: runs it; a failure is remembered and the next command runs anyway.
run() { "$@" || status=$?; }
# in_tests COMMAND...: runs it from tests/, as cargo runs that package's test binaries.
in_tests() { (cd tests && "$@"); }
# The Python, TypeScript and Go SDKs' and plugins' own tests: native, no cluster, no wasm.
run tests/testbed/test-python.sh
run tests/testbed/test-js.sh
run tests/testbed/test-go.sh
run cargo test --workspace --lib --bins --examples --benches
run in_tests "${binary[$together]}" --test-threads="${WASMOP_TEST_THREADS:-6}" \
  "${alone[@]/#/--skip=}"
# Documentation examples run too: the SDK promises runnable ones.
run cargo test --workspace --doc
for name in beside turns; do
  wait "${lanes[$name]}" || status=$?
  echo "--- the lane $name ---"
  cat "$dir-$name.log"
done
for module in "${alone[@]}"; do
  run in_tests "${binary[$together]}" "$module"
done
for name in "${quiet[@]}"; do
  run in_tests "${binary[$name]}"
done
exit "$status"
