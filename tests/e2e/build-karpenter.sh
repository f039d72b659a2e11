#!/usr/bin/env bash
# Build Karpenter with its kwok cloud provider for archfit's autoscaler end-to-end
# test, from Go modules only (nothing but the module proxy), the way build.sh builds
# the control plane. Also copies the CRDs it needs out of the module.
#
# Output lands in ${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/karpenter-<version>/:
#   karpenter-kwok        the kwok provider's main (sigs.k8s.io/karpenter/kwok)
#   crds/*.yaml           NodePool, NodeClaim, NodeOverlay and KWOKNodeClass
# A warm cache is a no-op that needs no Go.
# Prints the cache directory on stdout (build logs go to stderr); exits non-zero on
# any failure: 3 when the cache is cold and Go is missing.
set -euo pipefail

# v1.14.1 is the newest release whose go.mod accepts Go 1.26.8: v1.14.3 asks for
# go 1.26.10 and v1.15.0 for go 1.26.9 (and GOTOOLCHAIN=local must not fetch a toolchain).
KARPENTER_VERSION=v1.14.1
# Where the module keeps its CRDs, relative to its root.
CRDS=(
    pkg/apis/crds/karpenter.sh_nodepools.yaml
    pkg/apis/crds/karpenter.sh_nodeclaims.yaml
    pkg/apis/crds/karpenter.sh_nodeoverlays.yaml
    kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml
)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}"
out="$cache_root/karpenter-$KARPENTER_VERSION"
stamp="$out/.complete"
want="karpenter=$KARPENTER_VERSION crds=${#CRDS[@]}"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$out/karpenter-kwok" ]]; then
    echo "$out"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build-karpenter.sh: 'go' not found on PATH (need Go >= 1.26.6)" >&2; exit 3; }

mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly -trimpath"
ldflags="-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$KARPENTER_VERSION"

start=$SECONDS
echo "build-karpenter.sh: building Karpenter $KARPENTER_VERSION (kwok provider) into $out" >&2
cd "$here/karpenter-kwok"
go build -ldflags "$ldflags" -o "$tmp/karpenter-kwok" sigs.k8s.io/karpenter/kwok >&2
module_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
mkdir -p "$tmp/crds"
for crd in "${CRDS[@]}"; do
    cp "$module_dir/$crd" "$tmp/crds/"
done
chmod -R u+w "$tmp/crds"

rm -rf "$out/crds"
mv -f "$tmp/karpenter-kwok" "$tmp/crds" "$out/"
echo "$want" > "$stamp"
echo "build-karpenter.sh: done in $((SECONDS - start))s" >&2
echo "$out"
