#!/usr/bin/env bash
# Builds helm (which lints and renders the chart in deploy/helm/wasmop) from the Go module proxy
# into a cache directory, once. Idempotent: a cached binary is reused as is. Prints its path.
#
# The version lives in the committed module tests/testbed/helm/ (go.mod pins helm.sh/helm/v4,
# go.sum every module it needs; tools.go names the command). The build runs with -mod=readonly:
# it resolves nothing, and every module is checked against go.sum. To move to another release:
#   cd tests/testbed/helm && GOFLAGS=-mod=mod go get helm.sh/helm/v4@vX.Y.Z && go mod tidy
# The cache directory is keyed by the version and a digest of those files, so a change rebuilds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODULE="$HERE/helm"
CACHE="${WASMOP_CACHE:-$HOME/.cache/wasmop}"
source "$HERE/go-tool.sh"

VERSION=$(cd "$MODULE" && go list -mod=readonly -m -f '{{.Version}}' helm.sh/helm/v4)
# The version `helm version` reports, as helm's release builds set it.
ld="-s -w -X helm.sh/helm/v4/internal/version.version=$VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
build_cached "$CACHE/helm-$VERSION-$(pins "$MODULE" go.mod go.sum tools.go)/helm" "$MODULE" helm.sh/helm/v4/cmd/helm "$ld"
