#!/usr/bin/env bash
# Builds the CNCF distribution registry (the OCI registry the tests push plugins to and pull them
# from) from the Go module proxy into a cache directory, once. Idempotent: a cached binary is
# reused as is. Prints the binary's path.
#
# The version lives in the committed module tests/testbed/registry/ (go.mod pins
# github.com/distribution/distribution/v3, go.sum every module it needs; main.go is the upstream
# command without the cloud storage drivers). The build runs with -mod=readonly: it resolves
# nothing, and every module is checked against go.sum. To move to another release:
#   cd tests/testbed/registry && GOFLAGS=-mod=mod go get github.com/distribution/distribution/v3@vX.Y.Z && go mod tidy
# The binary's name carries the version and a digest of those files, so a change rebuilds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODULE="$HERE/registry"
CACHE="${WASMOP_CACHE:-$HOME/.cache/wasmop}"

command -v go >/dev/null || { echo "go is required to build the registry" >&2; exit 1; }
VERSION=$(cd "$MODULE" && go list -mod=readonly -m -f '{{.Version}}' github.com/distribution/distribution/v3)
pins=$(cat "$MODULE"/{go.mod,go.sum,main.go} | sha256sum | cut -c1-12)
BIN="$CACHE/registry-$VERSION-$pins"

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$CACHE"
echo "build-registry: building the distribution registry $VERSION" >&2
(cd "$MODULE" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -o "$BIN.tmp.$$" . >&2)
mv "$BIN.tmp.$$" "$BIN"
echo "$BIN"
