#!/usr/bin/env bash
# Builds every Go plugin (each directory under plugins/ holding a go.mod) into
# plugins/dist/<dir>.wasm: standard Go compiles it to a WASI preview 1 reactor
# (`GOOS=wasip1 GOARCH=wasm -buildmode=c-shared`), then wasmop-componentize (tools/componentize:
# wit-component and the WASI reactor adapter, pinned in its own Cargo.lock) makes it a component of
# the `operator` world (a reconciler, and webhooks when it declares them). Fixtures under
# plugins/fixtures/ become fixture-<dir>.wasm. A plugin whose inputs
# (its directory, the Go SDK, the WIT, the Go version) did not change since its last build is not
# built again: plugins/dist/.<name>.inputs holds their digest.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
command -v go >/dev/null || { echo "build-go-plugins: go (1.26 or later) is required" >&2; exit 1; }

mapfile -t mods < <(find plugins -name go.mod -not -path '*/dist/*' | sort)
[[ ${#mods[@]} -gt 0 ]] || { echo "build-go-plugins: no Go plugins (go.mod) found under plugins/" >&2; exit 1; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
target=$CARGO_TARGET_DIR
cargo build --quiet --release --locked --manifest-path tools/componentize/Cargo.toml
componentize="$target/release/wasmop-componentize"

mkdir -p plugins/dist
for mod in "${mods[@]}"; do
  dir=$(dirname "$mod")
  name=$(basename "$dir")
  [[ $dir == plugins/fixtures/* ]] && name="fixture-$name"
  dst="plugins/dist/$name.wasm"
  inputs=$( (find "$dir" guest-sdk/go wit -type f -print0 | sort -z | xargs -0 sha256sum
             go version; sha256sum "$componentize") | sha256sum | cut -c1-16)
  if [[ -f "$dst" && "$(cat "plugins/dist/.$name.inputs" 2>/dev/null)" == "$inputs" ]]; then
    echo "build-go-plugins: $dst is up to date" >&2
    continue
  fi
  start=$SECONDS
  core="$target/go-plugins/$name.core.wasm"
  mkdir -p "$(dirname "$core")"
  # The machine's Go, nothing resolved or downloaded: the SDK is a local module (a replace).
  (cd "$dir" && GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
    go build -trimpath -buildmode=c-shared -o "$core" .)
  # Written beside, then renamed, so a host watching plugins/dist never reads a half-written file.
  "$componentize" wit "$core" "$dst"
  echo "$inputs" >"plugins/dist/.$name.inputs"
  echo "build-go-plugins: $dst ($(wc -c <"$dst") bytes, $((SECONDS - start)) s)" >&2
done
