#!/usr/bin/env bash
# Builds every plugin (each workspace member under plugins/ with a cdylib target) for
# wasm32-wasip2 in release and copies each component to plugins/dist/<crate-name>.wasm.
# Validates the components when wasm-tools is installed (`cargo install wasm-tools`). Then builds
# the Python, TypeScript and Go plugins (build-python-plugins.sh, build-js-plugins.sh,
# build-go-plugins.sh).
# Idempotent; cargo rebuilds only what changed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/testbed/guest-toolchain.sh
source tests/testbed/guest-toolchain.sh
guest_toolchain_ensure

# Workspace members, from cargo itself; keep those under plugins/ that build a cdylib.
plugins=()
while read -r manifest; do
  case "$manifest" in "$ROOT"/plugins/*) ;; *) continue ;; esac
  grep -Eq '^crate-type *=.*"cdylib"' "$manifest" || continue
  name=$(sed -n 's/^name *= *"\([^"]*\)".*/\1/p' "$manifest" | head -n1)
  plugins+=("$name")
done < <(cargo metadata --no-deps --format-version 1 \
  | grep -o '"manifest_path":"[^"]*"' | sed 's/^"manifest_path":"\(.*\)"$/\1/' | sort -u)
if [[ ${#plugins[@]} -eq 0 ]]; then
  echo "build-plugins: no plugin crates found under plugins/" >&2
  exit 1
fi

echo "build-plugins: building ${plugins[*]} for wasm32-wasip2 ($WASMOP_GUEST_ROUTE route)" >&2
guest_cargo build --release "${plugins[@]/#/--package=}"

mkdir -p plugins/dist
wasm_tools=$(command -v wasm-tools || true)
[[ -n "$wasm_tools" ]] || echo "build-plugins: wasm-tools not installed; skipping validation" >&2
for name in "${plugins[@]}"; do
  src="$WASMOP_GUEST_OUT/${name//-/_}.wasm"
  dst="plugins/dist/$name.wasm"
  [[ -f "$src" ]] || { echo "build-plugins: $src was not built" >&2; exit 1; }
  if [[ -n "$wasm_tools" ]]; then
    "$wasm_tools" validate "$src"
    "$wasm_tools" component wit "$src" | grep -q 'export wasmop:plugin/reconciler@' || {
      echo "build-plugins: $src does not export wasmop:plugin/reconciler" >&2
      exit 1
    }
  fi
  # Copy then rename, so a host watching plugins/dist never reads a half-written file.
  cp "$src" "$dst.tmp"
  mv "$dst.tmp" "$dst"
  echo "build-plugins: $dst ($(wc -c <"$dst") bytes)" >&2
done

# The Python, TypeScript and Go plugins, each with its pinned toolchain.
tests/testbed/build-python-plugins.sh
tests/testbed/build-js-plugins.sh
tests/testbed/build-go-plugins.sh
