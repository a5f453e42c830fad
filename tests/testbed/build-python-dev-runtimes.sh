#!/usr/bin/env bash
# Builds the Python dev runtimes that `wasmop run --dev-source` runs (guest-sdk/python/dev-runtime):
# the SDK and a loader of the plugin's source, no plugin inside. One per world, built with the
# pinned componentize-py once per SDK, lock, loader and WIT into the cache
# (${WASMOP_CACHE:-~/.cache/wasmop}/dev/python[-http]-<digest>.wasm), then copied to
# plugins/dist/dev/python.wasm (the `operator` world, for plugins without an http grant) and
# plugins/dist/dev/python-http.wasm (`operator-http`, for plugins with one).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/testbed/python-toolchain.sh
source tests/testbed/python-toolchain.sh
python_toolchain_ensure

runtime_inputs=$( (find guest-sdk/python/dev-runtime wit -type f ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
                   echo "$(python_sdk_digest) $(sha256sum "$PYTHON_SDK/requirements.lock")") | sha256sum | cut -c1-16)
cache="${WASMOP_CACHE:-$HOME/.cache/wasmop}/dev"
mkdir -p "$cache" plugins/dist/dev
for world in operator operator-http; do
  suffix=${world#operator}
  cached="$cache/python$suffix-$runtime_inputs.wasm"
  if [[ ! -f "$cached" ]]; then
    start=$SECONDS
    VIRTUAL_ENV="$WASMOP_PYTHON_VENV" "$WASMOP_COMPONENTIZE" -d wit -w "$world" \
      componentize devruntime -p guest-sdk/python/dev-runtime -o "$cached.tmp" >/dev/null
    mv "$cached.tmp" "$cached"
    echo "build-python-dev-runtimes: $cached ($(wc -c <"$cached") bytes, $((SECONDS - start)) s)" >&2
  fi
  cp "$cached" "plugins/dist/dev/python$suffix.wasm.tmp"
  mv "plugins/dist/dev/python$suffix.wasm.tmp" "plugins/dist/dev/python$suffix.wasm"
done
