#!/usr/bin/env bash
# Build the real kube-apiserver, kube-scheduler, kube-controller-manager and etcd used by archfit's
# end-to-end tests, from Go modules only (nothing but the module proxy).
#
# Binaries land in ${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/<k8s-version>/
# and are reused when present, so a warm run is a no-op.
# Prints the cache directory on stdout (build logs go to stderr); exits
# non-zero on any failure: 3 when the cache is cold and Go is missing.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.16

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}"
out="$cache_root/$K8S_VERSION"
stamp="$out/.complete"
want="k8s=$K8S_VERSION etcd=$ETCD_VERSION"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" \
      && -x "$out/kube-apiserver" && -x "$out/kube-scheduler" && -x "$out/etcd" \
      && -x "$out/kube-controller-manager" ]]; then
    echo "$out"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build.sh: 'go' not found on PATH (need Go >= 1.26)" >&2; exit 3; }

mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly -trimpath"
# The go.mod files pin the module versions; go.sum pins their hashes.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"

start=$SECONDS
echo "build.sh: building kube-apiserver, kube-scheduler and kube-controller-manager $K8S_VERSION, etcd $ETCD_VERSION into $out" >&2
(cd "$here/kube" && go build -ldflags "$ldflags" -o "$tmp/" \
    ./cmd/kube-apiserver ./cmd/kube-scheduler ./cmd/kube-controller-manager) >&2
(cd "$here/etcd" && go build -ldflags "-s -w" -o "$tmp/etcd" .) >&2

mv -f "$tmp/kube-apiserver" "$tmp/kube-scheduler" "$tmp/kube-controller-manager" "$tmp/etcd" "$out/"
echo "$want" > "$stamp"
echo "build.sh: done in $((SECONDS - start))s" >&2
echo "$out"
