#!/usr/bin/env bash
# Build clientgo-observe, the differential kubeconfig test's reference: a small program on
# client-go's clientcmd, rest and transport (tests/clientgo/main.go), from Go modules only
# (nothing but the module proxy; go.sum pins their hashes).
#
# The binary lands in ${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/clientgo-<hash>/, where
# <hash> is of go.mod, go.sum and the sources, with a .complete stamp written last, and is
# reused when present, so a warm run is a no-op. Prints that directory on stdout (build logs
# go to stderr); exits non-zero on any failure: 3 when the cache is cold and Go is missing
# (tests/e2e/build.sh's convention).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hash="$(cat "$here/go.mod" "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-12)"
out="${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/clientgo-$hash"
stamp="$out/.complete"

if [[ -f "$stamp" && -x "$out/clientgo-observe" ]]; then
    echo "$out"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build.sh: 'go' not found on PATH (need Go >= 1.26)" >&2; exit 3; }

mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "tests/clientgo/build.sh: building clientgo-observe into $out" >&2
(cd "$here" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly -trimpath" \
    go build -ldflags "-s -w" -o "$tmp/clientgo-observe" .) >&2
# Moved into place, then stamped: a half-written binary is never taken for a built one.
mv -f "$tmp/clientgo-observe" "$out/"
echo "$hash" > "$stamp"
echo "$out"
