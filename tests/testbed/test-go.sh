#!/usr/bin/env bash
# Runs `go vet` and `go test` for the Go SDK (guest-sdk/go) and every Go plugin (each directory
# under plugins/ holding a go.mod), natively: no cluster, no wasm. The SDK is vetted for the
# wasip1 port too, where its exports and imports live.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
command -v go >/dev/null || { echo "test-go: go (1.24 or later) is required" >&2; exit 1; }
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly

echo "test-go: guest-sdk/go" >&2
unformatted=$(gofmt -l guest-sdk/go plugins/*-go)
[[ -z "$unformatted" ]] || { echo "test-go: not gofmt'd: $unformatted" >&2; exit 1; }
# -unsafeptr=false: linear memory addresses are integers the SDK turns into pointers (abi.at).
(cd guest-sdk/go && go vet -unsafeptr=false ./... && GOOS=wasip1 GOARCH=wasm go vet -unsafeptr=false ./... && go test ./...)
while read -r mod; do
  dir=$(dirname "$mod")
  echo "test-go: $dir" >&2
  (cd "$dir" && go vet -unsafeptr=false ./... && go test ./...)
done < <(find plugins -name go.mod -not -path '*/dist/*' | sort)
