//go:build tools

// Package tools pins the programs this module builds: go build reads their
// versions from this module's go.mod.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
