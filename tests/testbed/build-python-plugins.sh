#!/usr/bin/env bash
# Builds every Python plugin (each directory under plugins/ holding an app.py) with the pinned
# componentize-py into plugins/dist/<dir>.wasm; fixtures under plugins/fixtures/ become
# fixture-<dir>.wasm, as their Rust counterparts do. Validates the components when wasm-tools is
# installed. A plugin that declares an http grant is built against the `operator-http` world,
# the others against `operator`. The toolchain comes from tests/testbed/python-toolchain.sh. A plugin whose inputs (its
# directory, the SDK, the lock file, the WIT) did not change since its last build is not built
# again: plugins/dist/.<name>.inputs holds their digest.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/testbed/python-toolchain.sh
source tests/testbed/python-toolchain.sh
python_toolchain_ensure

mapfile -t apps < <(find plugins -name app.py -not -path '*/dist/*' | sort)
if [[ ${#apps[@]} -eq 0 ]]; then
  echo "build-python-plugins: no Python plugins (app.py) found under plugins/" >&2
  exit 1
fi

# Exits 0 when the plugin in the current directory (app.py) declares an http grant.
GRANTS_HTTP='import sys, app; from wasmop.plugin import Plugin; sys.exit(Plugin(app.Reconciler).config.http_ is None)'

mkdir -p plugins/dist
wasm_tools=$(command -v wasm-tools || true)
[[ -n "$wasm_tools" ]] || echo "build-python-plugins: wasm-tools not installed; skipping validation" >&2
for app in "${apps[@]}"; do
  dir=$(dirname "$app")
  name=$(basename "$dir")
  [[ $dir == plugins/fixtures/* ]] && name="fixture-$name"
  dst="plugins/dist/$name.wasm"
  inputs=$( (find "$dir" wit -type f ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
             echo "$(python_sdk_digest) $(sha256sum "$PYTHON_SDK/requirements.lock")") | sha256sum | cut -c1-16)
  if [[ -f "$dst" && "$(cat "plugins/dist/.$name.inputs" 2>/dev/null)" == "$inputs" ]]; then
    echo "build-python-plugins: $dst is up to date" >&2
    continue
  fi
  start=$SECONDS
  # A plugin that declares an http grant is built against the world importing wasi:http (the
  # host refuses wasi:http to any other); it says so natively, imported as pytest imports it.
  world=operator
  if (cd "$dir" && "$WASMOP_PY" -c "$GRANTS_HTTP"); then world=operator-http; fi
  # The plugin's directory first, then the environment's site-packages (VIRTUAL_ENV), which hold
  # the SDK; the WIT world is the repository's.
  VIRTUAL_ENV="$WASMOP_PYTHON_VENV" "$WASMOP_COMPONENTIZE" -d wit -w "$world" \
    componentize app -p "$dir" -o "$dst.tmp" >/dev/null
  if [[ -n "$wasm_tools" ]]; then
    "$wasm_tools" validate "$dst.tmp"
    "$wasm_tools" component wit "$dst.tmp" | grep -q 'export wasmop:plugin/reconciler@' || {
      echo "build-python-plugins: $dst does not export wasmop:plugin/reconciler" >&2
      exit 1
    }
  fi
  # Written beside, then renamed, so a host watching plugins/dist never reads a half-written file.
  mv "$dst.tmp" "$dst"
  echo "$inputs" >"plugins/dist/.$name.inputs"
  echo "build-python-plugins: $dst ($(wc -c <"$dst") bytes, $((SECONDS - start)) s)" >&2
done
"$ROOT/tests/testbed/build-python-dev-runtimes.sh"
