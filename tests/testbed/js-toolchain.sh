#!/usr/bin/env bash
# Makes the TypeScript plugin toolchain available and builds the SDK (@wasmop/guest). Idempotent.
#
# The toolchain is the SDK package's devDependencies in guest-sdk/js (typescript, esbuild,
# componentize-js, @types/node), installed with `npm ci` from its package-lock.json, npm's cache
# under ${WASMOP_CACHE:-~/.cache/wasmop}/npm, offline first. Nothing is installed globally. Each
# TS plugin links the SDK with a `file:` dependency and its own lock (a link only, no downloads).
# @bytecodealliance/preview2-shim is pinned beside componentize-js because componentize-js 0.23.0
# imports it but declares it only as a devDependency: `npm ci` would leave it out.
#
# Run it to install and build. Source it to get, after `js_toolchain_ensure`:
#   WASMOP_JS_SDK          guest-sdk/js
#   js_npm_ci DIR          `npm ci` in DIR, skipped when DIR/node_modules matches DIR's lock
#   wasmop_guest ARGS...   the SDK's toolchain CLI: check DIR, test DIR, build DIR --out FILE

JS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WASMOP_JS_SDK="$JS_ROOT/guest-sdk/js"
JS_NODE_MAJOR=20

js_log() { echo "js-toolchain: $*" >&2; }

js_check_node() {
  command -v node >/dev/null 2>&1 || { js_log "node not found: install Node.js $JS_NODE_MAJOR or later"; return 1; }
  command -v npm >/dev/null 2>&1 || { js_log "npm not found"; return 1; }
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [[ $major -ge $JS_NODE_MAJOR ]] || { js_log "node $major is too old: need $JS_NODE_MAJOR or later"; return 1; }
}

# Hash of the files that decide a directory's node_modules: the manifest and the lock.
js_lock_hash() {
  cat "$1/package.json" "$1/package-lock.json" | sha256sum | cut -d' ' -f1
}

js_npm_ci() {
  local dir=$1 stamp="$1/node_modules/.wasmop-lock"
  [[ -f "$dir/package-lock.json" ]] || { js_log "$dir has no package-lock.json"; return 1; }
  if [[ -f "$stamp" && $(cat "$stamp") == "$(js_lock_hash "$dir")" ]]; then
    return 0
  fi
  js_log "npm ci in ${dir#"$JS_ROOT"/}"
  (cd "$dir" && npm ci --cache "${WASMOP_CACHE:-$HOME/.cache/wasmop}/npm" --prefer-offline \
    --no-audit --no-fund --loglevel=error >&2) || return 1
  js_lock_hash "$dir" >"$stamp"
}

# Hash of what the SDK's dist/ is built from.
js_sdk_hash() {
  cat "$WASMOP_JS_SDK"/src/*.ts "$WASMOP_JS_SDK"/tsconfig*.json "$JS_ROOT"/wit/plugin.wit "$JS_ROOT"/wit/deps/*/*.wit | sha256sum | cut -d' ' -f1
}

js_toolchain_ensure() {
  js_check_node || return 1
  js_npm_ci "$WASMOP_JS_SDK" || return 1
  local stamp="$WASMOP_JS_SDK/dist/.wasmop-source"
  if [[ ! -f "$stamp" || $(cat "$stamp") != "$(js_sdk_hash)" ]]; then
    js_log "building @wasmop/guest"
    wasmop_guest sdk || return 1
    js_sdk_hash >"$stamp"
  fi
  export WASMOP_JS_SDK
}

wasmop_guest() {
  node "$WASMOP_JS_SDK/bin/wasmop-guest.mjs" "$@"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  js_toolchain_ensure
  echo "$WASMOP_JS_SDK"
fi
