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

command -v go >/dev/null || { echo "go is required to build helm" >&2; exit 1; }
VERSION=$(cd "$MODULE" && go list -mod=readonly -m -f '{{.Version}}' helm.sh/helm/v4)
pins=$(cat "$MODULE"/{go.mod,go.sum,tools.go} | sha256sum | cut -c1-12)
DIR="$CACHE/helm-$VERSION-$pins"

if [[ -x "$DIR/helm" ]]; then
  echo "$DIR/helm"
  exit 0
fi
mkdir -p "$DIR"
echo "build-helm: building helm $VERSION" >&2
# The version helm reports (`helm version`), as its release builds set it.
ld="-s -w -X helm.sh/helm/v4/internal/version.version=$VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
(cd "$MODULE" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ld" \
  -o "$DIR/helm.tmp.$$" helm.sh/helm/v4/cmd/helm >&2)
mv "$DIR/helm.tmp.$$" "$DIR/helm"
echo "$DIR/helm"
