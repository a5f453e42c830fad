//go:build tools

// Package testbed pins the Kubernetes control-plane commands the test bed builds.
package testbed

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
