#!/usr/bin/env bash
# Builds the control-plane binaries the e2e suite runs (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, KEDA operator and adapter)
# from the wrapper modules next to this script, into a cache directory keyed
# by a sha256 of the wrappers' go.mod and go.sum files and the Go version:
#
#   ${INFERSCALE_E2E_CACHE:-$HOME/.cache/inferscale-e2e}/<hash>/
#
# A complete cache directory is reused as is (seconds); a cold build takes
# about 14 minutes on 2 cores. The script prints the directory on its last
# line of stdout. Binaries are never written into the repository.
#
# Builds are reproducible: -mod=readonly (go.sum is committed), -trimpath,
# CGO disabled as in the upstream release builds, -ldflags '-s -w'.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache_root="${INFERSCALE_E2E_CACHE:-$HOME/.cache/inferscale-e2e}"
go_bin="${GO:-go}"

hash="$(
  cd "$here"
  {
    "$go_bin" env GOVERSION
    for m in etcd k8s keda; do
      sha256sum "$m/go.mod" "$m/go.sum"
    done
  } | sha256sum | cut -c1-16
)"
out="$cache_root/$hash"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl keda-operator keda-adapter)

complete() {
  for b in "${bins[@]}"; do
    [[ -x "$out/$b" ]] || return 1
  done
}

if complete; then
  echo "e2e binaries cached in $out" >&2
  echo "$out"
  exit 0
fi

mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.build-$hash.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0 GOFLAGS=-mod=readonly
build() { # build <module dir> <output> <package>
  local start=$SECONDS
  (cd "$here/$1" && "$go_bin" build -trimpath -ldflags='-s -w' -o "$tmp/$2" "$3")
  echo "built $2 in $((SECONDS - start))s" >&2
}

echo "building e2e binaries into $out (cold build: about 14 minutes on 2 cores)" >&2
build etcd etcd go.etcd.io/etcd/server/v3
build k8s kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build k8s kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build k8s kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build k8s kubectl k8s.io/kubernetes/cmd/kubectl
build keda keda-operator github.com/kedacore/keda/v2/cmd/operator
build keda keda-adapter github.com/kedacore/keda/v2/cmd/adapter

# Publish atomically: a concurrent build of the same hash loses the rename
# race harmlessly and keeps the winner's binaries.
if ! mv -T "$tmp" "$out" 2>/dev/null; then
  complete || { echo "cannot publish $out" >&2; exit 1; }
fi
trap - EXIT
echo "$out"
