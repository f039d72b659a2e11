#!/usr/bin/env bash
# Build the kustomize and helm binaries that tests/deploy renders the manifests
# with, from Go modules only (nothing but the module proxy), using the Go on PATH.
#
# Usage: build-tools.sh [kustomize] [helm]   (no argument: both)
# Each tool lands in ${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/tools/<name>-<version>/
# and is reused when present, so a warm run is a no-op. Prints one binary path
# per requested tool on stdout (build logs go to stderr); exits non-zero on any
# failure.
set -euo pipefail

# kustomize v5.8.3 needs Go >= 1.27; v5.8.2 is the newest that builds with Go 1.26.
KUSTOMIZE_VERSION=v5.8.2
HELM_VERSION=v3.22.0
# helm's Makefile derives its default Kubernetes version from the client-go it
# requires (v0.37 -> 1.37); without it `helm template` would assume 1.20.
HELM_K8S_MAJOR=1
HELM_K8S_MINOR=37

cache_root="${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}"

build() {
    local name="$1" package="$2" version="$3" ldflags="$4"
    local out="$cache_root/tools/$name-$version"
    if [[ -x "$out/$name" && -f "$out/.complete" ]]; then
        echo "$out/$name"
        return 0
    fi
    command -v go >/dev/null 2>&1 || {
        echo "build-tools.sh: 'go' not found on PATH (need Go >= 1.26)" >&2
        return 2
    }
    mkdir -p "$out"
    local tmp
    tmp="$(mktemp -d "$out/.build.XXXXXX")"
    local start=$SECONDS
    echo "build-tools.sh: building $package@$version into $out" >&2
    # go install pkg@version resolves the module's own go.mod and checks every
    # module against the checksum database, so the build is pinned by version alone.
    if ! CGO_ENABLED=0 GOTOOLCHAIN=local GOBIN="$tmp" \
            go install -trimpath -ldflags "$ldflags" "$package@$version" >&2; then
        rm -rf "$tmp"
        return 1
    fi
    mv -f "$tmp/$name" "$out/$name"
    rm -rf "$tmp"
    echo "$package@$version" > "$out/.complete"
    echo "build-tools.sh: $name done in $((SECONDS - start))s" >&2
    echo "$out/$name"
}

(($#)) || set -- kustomize helm
for tool in "$@"; do
    case "$tool" in
        kustomize)
            build kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION" "-s -w"
            ;;
        helm)
            build helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" "-s -w \
-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$HELM_K8S_MAJOR \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_K8S_MINOR \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$HELM_K8S_MAJOR \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_K8S_MINOR"
            ;;
        *)
            echo "build-tools.sh: unknown tool $tool (known: kustomize, helm)" >&2
            exit 64
            ;;
    esac
done
