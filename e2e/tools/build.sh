#!/usr/bin/env bash
# Builds the control-plane binaries the e2e suite runs (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, KEDA operator and adapter)
# from the wrapper modules next to this script, into a cache directory keyed
# by a sha256 of the wrappers' go.mod and go.sum files, this script and the
# Go version:
#
#   ${INFERSCALE_E2E_CACHE:-$HOME/.cache/inferscale-e2e}/<hash>/
#
# A complete cache directory is reused as is (seconds); a cold build takes
# about 14 minutes on 2 cores. The script prints the directory on its last
# line of stdout. Binaries are never written into the repository.
#
# Builds are reproducible: -mod=readonly (go.sum is committed), -trimpath,
# CGO disabled as in the upstream release builds, -ldflags '-s -w', and the
# version variables stamped as the upstream release builds do (the
# apiserver reports v1.37.2 to KEDA and kubectl, not v0.0.0-master).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache_root="${INFERSCALE_E2E_CACHE:-$HOME/.cache/inferscale-e2e}"
go_bin="${GO:-go}"

hash="$(
  cd "$here"
  {
    "$go_bin" env GOVERSION
    sha256sum build.sh
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
# version <module dir> <module path>: the version the wrapper pins.
version() { awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) {print $NF; exit}' "$here/$1/go.mod"; }
k8s_version="$(version k8s k8s.io/kubernetes)"         # v1.37.2
keda_version="$(version keda github.com/kedacore/keda/v2)" # v2.21.0
k8s_minor="$(echo "$k8s_version" | cut -d. -f2)"
k8s_stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_stamp+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
done
keda_stamp="-X github.com/kedacore/keda/v2/version.Version=${keda_version#v}"

build() { # build <module dir> <output> <package> [extra ldflags]
  local start=$SECONDS
  (cd "$here/$1" && "$go_bin" build -trimpath -ldflags="-s -w ${4:-}" -o "$tmp/$2" "$3")
  echo "built $2 in $((SECONDS - start))s" >&2
}

echo "building e2e binaries into $out (cold build: about 14 minutes on 2 cores)" >&2
build etcd etcd go.etcd.io/etcd/server/v3
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  build k8s "$c" "k8s.io/kubernetes/cmd/$c" "$k8s_stamp"
done
build keda keda-operator github.com/kedacore/keda/v2/cmd/operator "$keda_stamp"
build keda keda-adapter github.com/kedacore/keda/v2/cmd/adapter "$keda_stamp"

# Publish atomically: a concurrent build of the same hash loses the rename
# race harmlessly and keeps the winner's binaries.
if ! mv -T "$tmp" "$out" 2>/dev/null; then
  complete || { echo "cannot publish $out" >&2; exit 1; }
fi
trap - EXIT
echo "$out"
