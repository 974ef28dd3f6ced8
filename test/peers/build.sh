#!/usr/bin/env bash
# Builds the real peers the tests run against, from Go modules only, into test/peers/.bin (ignored).
# A binary is rebuilt only when the go.sum of its module changed: each build leaves a stamp holding
# that go.sum's sha256, and a matching stamp means there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")"
bin="$PWD/.bin"
mkdir -p "$bin"
export GOFLAGS="-trimpath -buildvcs=false"
export GOMAXPROCS="${GOMAXPROCS:-2}"

# build MODULE_DIR NAME PACKAGE [go build flags...]: an upstream program, stamped by go.sum.
build() {
  local sum
  sum=$(sha256sum "$1/go.sum" | cut -d' ' -f1)
  build_stamped "$sum" "$@"
}

# build_own MODULE_DIR NAME ./PACKAGE [go build flags...]: a program of ours, stamped by go.sum and
# the package's own sources, so an edit of it rebuilds it too.
build_own() {
  local sum
  sum=$(cat "$1/go.sum" "$1/$3"/*.go | sha256sum | cut -d' ' -f1)
  build_stamped "$sum" "$@"
}

build_stamped() {
  local sum="$1" module="$2" name="$3" package="$4"
  shift 4
  local stamp="$bin/$name.go-sum-sha256"
  if [ -x "$bin/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
    echo "peers: $name is built for this go.sum"
    return
  fi
  local started=$SECONDS
  (cd "$module" && go build "$@" -o "$bin/$name" "$package")
  echo "$sum" >"$stamp"
  echo "peers: built $name in $((SECONDS - started)) s"
}

# kube-apiserver reports the release this module pins, as a released binary would.
kubernetes_version=$(cd kubernetes && go list -m -f '{{.Version}}' k8s.io/kubernetes)
kubernetes_minor=$(echo "$kubernetes_version" | cut -d. -f2)
build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver -ldflags "-s -w \
  -X k8s.io/component-base/version.gitVersion=${kubernetes_version} \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kubernetes_minor} \
  -X k8s.io/component-base/version.gitTreeState=clean"
build kubernetes etcd ./cmd/etcd -ldflags "-s -w"

# kubectl from the published k8s.io/kubectl module of the same release (v0.36.3 is v1.36.3).
kubectl_version=$(cd kubectl && go list -m -f '{{.Version}}' k8s.io/kubectl | sed 's/^v0\./v1./')
build kubectl kubectl . -ldflags "-s -w \
  -X k8s.io/component-base/version.gitVersion=${kubectl_version} \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$kubectl_version" | cut -d. -f2) \
  -X k8s.io/component-base/version.gitTreeState=clean"

# cilium-operator's ENI allocator (cilium v1.20.2) as a side-by-side peer of the bench.
build_own cilium-1.20 operator-peer-1.20 ./cmd/operator-peer -ldflags "-s -w"

# cilium-agent's IPAM (test/support/agent-peer.ts), one program per release over the shared
# reporting of agent-report: the newest release, and the last 1.11 release before the fix of the
# pool copy (v1.11.5).
agent_peer_sum() { cat "$@" agent-report/go.mod agent-report/*.go | sha256sum | cut -d' ' -f1; }
build_stamped "$(agent_peer_sum cilium-1.20/go.sum cilium-1.20/cmd/agent-peer/*.go)" \
  cilium-1.20 cilium-agent-peer-1.20.2 ./cmd/agent-peer -ldflags "-s -w"
build_stamped "$(agent_peer_sum cilium-1.11.5/go.sum cilium-1.11.5/cmd/agent-peer/*.go)" \
  cilium-1.11.5 cilium-agent-peer-1.11.5 ./cmd/agent-peer -ldflags "-s -w"
