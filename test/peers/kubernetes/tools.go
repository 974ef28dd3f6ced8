//go:build tools

// Keeps kube-apiserver's main package in this module's graph, so `go mod tidy` keeps what it needs.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
