#!/usr/bin/env bash
# Builds every TypeScript plugin (each directory under plugins/ with a plugin.ts) into a
# component at plugins/dist/<name>.wasm (fixtures: fixture-<dir>.wasm). Validates the components
# when wasm-tools is installed. Skips a plugin whose sources, lock and SDK are unchanged since its
# last build (componentize-js takes 10-20 s a plugin); WASMOP_JS_REBUILD=1 builds all.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/testbed/js-toolchain.sh
source tests/testbed/js-toolchain.sh
# shellcheck source=tests/testbed/js-plugins.sh
source tests/testbed/js-plugins.sh
js_toolchain_ensure

mapfile -t dirs < <(js_plugin_dirs)
if [[ ${#dirs[@]} -eq 0 ]]; then
  echo "build-js-plugins: no plugin.ts found under plugins/" >&2
  exit 1
fi

# What a component is built from: the plugin's files but its tests, and the SDK and toolchain.
inputs() {
  (cd "$1" && find . -path ./node_modules -prune -o -type f ! -name '*.test.ts' -print | sort | xargs cat)
  cat "$WASMOP_JS_SDK/dist/.wasmop-source" "$WASMOP_JS_SDK/package-lock.json"
}

mkdir -p plugins/dist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
wasm_tools=$(command -v wasm-tools || true)
[[ -n "$wasm_tools" ]] || echo "build-js-plugins: wasm-tools not installed; skipping validation" >&2
for dir in "${dirs[@]}"; do
  name=$(js_plugin_name "$dir")
  dst="plugins/dist/$name.wasm"
  stamp="plugins/dist/.$name.wasm.inputs"
  hash=$(inputs "$dir" | sha256sum | cut -d' ' -f1)
  if [[ -z "${WASMOP_JS_REBUILD:-}" && -f "$dst" && -f "$stamp" && $(cat "$stamp") == "$hash" ]]; then
    echo "build-js-plugins: $dst is up to date" >&2
    continue
  fi
  js_npm_ci "$dir"
  echo "build-js-plugins: building ${dir#"$ROOT"/} into $dst" >&2
  start=$SECONDS
  wasmop_guest build "$dir" --out "$work/$name.wasm"
  if [[ -n "$wasm_tools" ]]; then
    "$wasm_tools" validate "$work/$name.wasm"
    "$wasm_tools" component wit "$work/$name.wasm" | grep -q 'export wasmop:plugin/reconciler@' || {
      echo "build-js-plugins: $name does not export wasmop:plugin/reconciler" >&2
      exit 1
    }
  fi
  # Copy then rename, so a host watching plugins/dist never reads a half-written file.
  cp "$work/$name.wasm" "$dst.tmp"
  mv "$dst.tmp" "$dst"
  echo "$hash" >"$stamp"
  echo "build-js-plugins: $dst ($(wc -c <"$dst") bytes, $((SECONDS - start)) s)" >&2
done
"$ROOT/tests/testbed/build-js-dev-runtimes.sh"
