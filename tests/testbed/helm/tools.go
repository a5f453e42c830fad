//go:build tools

// Package testbed pins the helm command the test bed builds to render and lint the chart in
// deploy/helm/wasmop.
package testbed

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
