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
source "$HERE/go-tool.sh"

VERSION=$(cd "$MODULE" && go list -mod=readonly -m -f '{{.Version}}' github.com/distribution/distribution/v3)
build_cached "$CACHE/registry-$VERSION-$(pins "$MODULE" go.mod go.sum main.go)" "$MODULE" .
