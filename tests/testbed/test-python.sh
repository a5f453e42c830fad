#!/usr/bin/env bash
# Runs pytest for the Python SDK (guest-sdk/python) and for every Python plugin (each directory
# under plugins/ holding an app.py), natively: no cluster; the whole-loop tests run the plugins'
# built components (plugins/dist) through `wasmop test`. The toolchain comes from
# tests/testbed/python-toolchain.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/testbed/python-toolchain.sh
source tests/testbed/python-toolchain.sh
python_toolchain_ensure
# The whole-loop tests (FakeHost run_until_stable) run the built plugins through `wasmop test`:
# the workspace's debug build (`make test` builds it first), unless WASMOP names another.
WASMOP=${WASMOP:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/wasmop}
export WASMOP

echo "test-python: guest-sdk/python" >&2
(cd guest-sdk/python && "$WASMOP_PY" -m pytest -q)
# Each plugin in its own run: they all name their module `app`.
while read -r app; do
  dir=$(dirname "$app")
  echo "test-python: $dir" >&2
  (cd "$dir" && "$WASMOP_PY" -m pytest -q -p no:cacheprovider)
done < <(find plugins -name app.py -not -path '*/dist/*' | sort)
