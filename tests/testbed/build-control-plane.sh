#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module proxy into a cache
# directory, once. Idempotent: a complete cache is reused as is. Prints the bin directory.
#
# Every version lives in the committed modules under tests/testbed/control-plane/ (kube/go.mod pins
# k8s.io/kubernetes and each staging module, etcd/go.mod pins etcd), with their go.sum. The build
# runs with -mod=readonly: it resolves nothing, and every module is checked against go.sum, so a new
# upstream release can never change what a fresh machine builds. To move to another release, edit
# the versions in go.mod and run `go mod tidy` in that directory (see control-plane/README.md).
# The cache directory is keyed by a digest of those files, so a version change rebuilds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODULES="$HERE/control-plane"
CACHE="${WASMOP_CACHE:-$HOME/.cache/wasmop}"

command -v go >/dev/null || { echo "go is required to build the control plane" >&2; exit 1; }
K8S_VERSION=$(cd "$MODULES/kube" && go list -mod=readonly -m -f '{{.Version}}' k8s.io/kubernetes)
ETCD_VERSION=$(cd "$MODULES/etcd" && go list -mod=readonly -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
pins=$(cat "$MODULES"/kube/go.{mod,sum} "$MODULES"/etcd/{go.mod,go.sum,main.go} | sha256sum | cut -c1-12)
BIN="$CACHE/control-plane-$K8S_VERSION-etcd-$ETCD_VERSION-$pins/bin"

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" && -x "$BIN/etcd" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
# Go 1.27+ serves malformed OpenAPI from kube-apiserver unless json v2 is off.
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
if [[ "$go_minor" -ge 27 ]]; then export GOEXPERIMENT=nojsonv2; fi

# build DIR NAME PACKAGE [LDFLAGS]: builds PACKAGE in the pinned module DIR to $BIN/NAME, atomically.
build() {
  local dir=$1 name=$2 pkg=$3 ld=${4:-}
  echo "build-control-plane: building $name ($pkg)" >&2
  (cd "$dir" && go build -trimpath -ldflags "$ld" -o "$BIN/$name.tmp" "$pkg")
  mv "$BIN/$name.tmp" "$BIN/$name"
}

minor=$(echo "$K8S_VERSION" | cut -d. -f2)
ld="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
[[ -x "$BIN/etcd" ]] || build "$MODULES/etcd" etcd . >&2
[[ -x "$BIN/kube-apiserver" ]] ||
  build "$MODULES/kube" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ld" >&2
[[ -x "$BIN/kube-controller-manager" ]] ||
  build "$MODULES/kube" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ld" >&2
echo "$BIN"
