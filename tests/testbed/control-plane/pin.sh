#!/usr/bin/env bash
# Regenerates the pinned Go modules of the test bed's control plane for a Kubernetes and an etcd
# release: `pin.sh v1.36.3 v3.6.16`. Run it only to move to another release, then commit go.mod and
# go.sum. Builds never resolve modules: build-control-plane.sh uses -mod=readonly.
set -euo pipefail
(($# == 2)) || { echo "usage: $0 K8S_VERSION ETCD_VERSION (e.g. v1.36.3 v3.6.16)" >&2; exit 2; }
k8s=$1 etcd=$2
cd "$(dirname "${BASH_SOURCE[0]}")"
export GOFLAGS=-mod=mod CGO_ENABLED=0
go_line=$(go mod download -json "k8s.io/kubernetes@$k8s" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')

(
  cd kube
  rm -f go.mod go.sum
  go mod init wasmop.dev/testbed/kube 2>/dev/null
  # k8s.io/kubernetes requires every staging module at v0.0.0 and replaces them with paths in its
  # own repository; those replaces do not apply to us, so pin each to its published version.
  staging="v0.${k8s#v1.}"
  grep -oE '^\s*k8s\.io/[a-z0-9./-]+ v0\.0\.0$' "$go_line" | awk '{print $1}' | sort -u | while read -r m; do
    go mod edit -replace "$m=$m@$staging"
  done
  go get "k8s.io/kubernetes@$k8s"
  go mod edit -go="$(sed -n 's/^go //p' "$go_line")"
  go mod tidy
  go mod verify
)
(
  cd etcd
  rm -f go.mod go.sum
  go mod init wasmop.dev/testbed/etcd 2>/dev/null
  go get "go.etcd.io/etcd/server/v3@$etcd"
  go mod edit -go="$(sed -n 's/^go //p' ../kube/go.mod)"
  go mod tidy
  go mod verify
)
