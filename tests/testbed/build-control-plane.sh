#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module proxy into a cache
# directory, once. Idempotent: a complete cache is reused as is. Prints the bin directory.
set -euo pipefail

K8S_VERSION="${WASMOP_K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${WASMOP_ETCD_VERSION:-v3.6.16}"
CACHE="${WASMOP_CACHE:-$HOME/.cache/wasmop}"
BIN="$CACHE/control-plane-$K8S_VERSION-etcd-$ETCD_VERSION/bin"

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" && -x "$BIN/etcd" ]]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "go is required to build the control plane" >&2; exit 1; }
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
# Go 1.27+ serves malformed OpenAPI from kube-apiserver unless json v2 is off.
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
if [[ "$go_minor" -ge 27 ]]; then export GOEXPERIMENT=nojsonv2; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build_kube() {
  local dir="$work/kube" minor staging_ver
  mkdir -p "$dir" && cd "$dir"
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  staging_ver="v0.${K8S_VERSION#v1.}"
  go mod init wasmop.dev/testbed/kube >/dev/null 2>&1
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  # k8s.io/kubernetes requires every staging module at v0.0.0 and replaces them with local paths;
  # those replaces do not apply to us, so pin each to the matching published version.
  grep -oE '^\s*k8s\.io/[a-z0-9./-]+ v0\.0\.0$' "$gomod" | awk '{print $1}' | sort -u | while read -r m; do
    go mod edit -replace "$m=$m@$staging_ver"
  done
  go get "k8s.io/kubernetes@$K8S_VERSION" >/dev/null
  local ld="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  go get k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager >/dev/null
  go build -trimpath -ldflags "$ld" -o "$BIN/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
  go build -trimpath -ldflags "$ld" -o "$BIN/kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager
  mv "$BIN/kube-controller-manager.tmp" "$BIN/kube-controller-manager"
}

build_etcd() {
  local dir="$work/etcd"
  mkdir -p "$dir" && cd "$dir"
  go mod init wasmop.dev/testbed/etcd >/dev/null 2>&1
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null
  go mod tidy >/dev/null
  go build -trimpath -o "$BIN/etcd.tmp" .
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

[[ -x "$BIN/etcd" ]] || build_etcd >&2
[[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" ]] || build_kube >&2
echo "$BIN"
