#!/usr/bin/env bash
# Builds the TypeScript dev runtimes that `wasmop run --dev-source` runs (`wasmop-guest
# dev-runtime`): the SDK and a loader of the bundle /plugin/plugin.js, no plugin inside. One per
# world, built with the pinned componentize-js once per SDK, lock and WIT into the cache
# (${WASMOP_CACHE:-~/.cache/wasmop}/dev/typescript[-http]-<digest>.wasm), then copied to
# plugins/dist/dev/typescript.wasm (for plugins without an http grant) and
# plugins/dist/dev/typescript-http.wasm (with wasi:http, for plugins with one).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/testbed/js-toolchain.sh
source tests/testbed/js-toolchain.sh
js_toolchain_ensure

inputs=$( (js_sdk_hash; cat "$WASMOP_JS_SDK/package-lock.json" "$WASMOP_JS_SDK/bin/wasmop-guest.mjs") | sha256sum | cut -c1-16)
cache="${WASMOP_CACHE:-$HOME/.cache/wasmop}/dev"
mkdir -p "$cache" plugins/dist/dev
for suffix in "" -http; do
  cached="$cache/typescript$suffix-$inputs.wasm"
  if [[ ! -f "$cached" ]]; then
    start=$SECONDS
    wasmop_guest dev-runtime --out "$cached" ${suffix:+--http}
    echo "build-js-dev-runtimes: $cached ($(wc -c <"$cached") bytes, $((SECONDS - start)) s)" >&2
  fi
  cp "$cached" "plugins/dist/dev/typescript$suffix.wasm.tmp"
  mv "plugins/dist/dev/typescript$suffix.wasm.tmp" "plugins/dist/dev/typescript$suffix.wasm"
done
