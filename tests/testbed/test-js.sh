#!/usr/bin/env bash
# Type-checks (tsc --noEmit) and runs the node tests (node --test, TypeScript bundled by esbuild)
# of the TypeScript SDK and of every TypeScript plugin. No cluster; the whole-loop tests run the
# plugins' built components (plugins/dist) through `wasmop test`. Runs them all and fails at the
# end when any failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/testbed/js-toolchain.sh
source tests/testbed/js-toolchain.sh
# shellcheck source=tests/testbed/js-plugins.sh
source tests/testbed/js-plugins.sh
js_toolchain_ensure
# The whole-loop tests (FakeHost run_until_stable) run the built plugins through `wasmop test`:
# the workspace's debug build (`make test` builds it first), unless WASMOP names another.
WASMOP=${WASMOP:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/wasmop}
export WASMOP

failed=()
for dir in "$WASMOP_JS_SDK" $(js_plugin_dirs); do
  what=${dir#"$ROOT"/}
  [[ $dir == "$WASMOP_JS_SDK" ]] || js_npm_ci "$dir"
  echo "test-js: $what" >&2
  wasmop_guest check "$dir" || { failed+=("$what (tsc)"); continue; }
  wasmop_guest test "$dir" || failed+=("$what (node --test)")
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test-js: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test-js: all passed" >&2
