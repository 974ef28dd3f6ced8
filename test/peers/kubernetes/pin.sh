#!/usr/bin/env bash
# Regenerates go.mod for a Kubernetes release: requires k8s.io/kubernetes at that tag and replaces every
# staging module the tag's own go.mod lists at v0.0.0 with its published v0.<minor>.<patch>, read from
# that go.mod (never typed), then lets `go mod tidy` add etcd at the version Kubernetes itself pins.
# Usage: test/peers/kubernetes/pin.sh 1.36.3
set -euo pipefail
cd "$(dirname "$0")"
version="${1:?usage: pin.sh <kubernetes version, e.g. 1.36.3>}"
export GOFLAGS=-trimpath
rm -f go.mod go.sum
go mod init serverless-eni-ipam.invalid/test/peers/kubernetes
go mod edit -require="k8s.io/kubernetes@v${version}"
tag_go_mod=$(go mod download -json "k8s.io/kubernetes@v${version}" | sed -n 's/.*"GoMod": "\([^"]*\)".*/\1/p')
go mod edit -go="$(sed -n 's/^go //p' "$tag_go_mod")"
go mod edit -json "$tag_go_mod" | grep -B1 '"Version": "v0.0.0"' | sed -n 's/.*"Path": "\([^"]*\)".*/\1/p' |
  while read -r staging; do go mod edit -replace="${staging}=${staging}@v0.${version#1.}"; done
go mod tidy
