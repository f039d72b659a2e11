#!/usr/bin/env bash
# Build the admission webhooks archfit is compared with (bench/webhook_latency.py --peer)
# from source directories the operator supplies: a checkout of adevinta/noe, of
# arturhoo/k8smultiarcher, or of any Go module with one main package. No peer source is kept
# in this repository; the peers' dependencies come from the Go module proxy (GOPROXY) and are
# checked against the peer's own go.sum.
#
# Each binary lands in ${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/peer-<name>-<hash>/<name>,
# <name> the last element of the module path, <hash> of the source's go.mod, go.sum and .go
# files, and is reused when present, so a warm run is a no-op. The main package is the
# module's root when that is `package main`, else cmd/<name>. Prints `<name>=<binary>` per
# source on stdout, ready for `--peer`; build logs go to stderr; exits non-zero on any
# failure: 3 when Go is missing (tests/e2e/build.sh's convention).
#
#   bash bench/build-peers.sh /tmp/peer-src/noe /tmp/peer-src/k8smultiarcher
set -euo pipefail

(( $# > 0 )) || { echo "usage: build-peers.sh SRC_DIR..." >&2; exit 2; }
cache="${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}"

for given in "$@"; do
    src="$(cd "$given" && pwd)"
    [[ -f "$src/go.mod" ]] || { echo "build-peers.sh: no go.mod in $src" >&2; exit 2; }
    module="$(awk '$1 == "module" { print $2; exit }' "$src/go.mod")"
    name="${module##*/}"
    if grep -qs '^package main$' "$src"/*.go; then
        main="."
    elif [[ -d "$src/cmd/$name" ]]; then
        main="./cmd/$name"
    else
        echo "build-peers.sh: $src has no main package at its root nor in cmd/$name" >&2
        exit 2
    fi
    hash="$( (cd "$src" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort \
        | xargs cat) | sha256sum | cut -c1-12)"
    out="$cache/peer-$name-$hash"
    if [[ ! -x "$out/$name" ]]; then
        command -v go >/dev/null 2>&1 || { echo "build-peers.sh: 'go' not found on PATH" >&2; exit 3; }
        mkdir -p "$out"
        tmp="$(mktemp -d "$out/.build.XXXXXX")"
        echo "build-peers.sh: building $module ($main) into $out" >&2
        (cd "$src" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly -trimpath" \
            go build -ldflags "-s -w" -o "$tmp/$name" "$main") >&2 || { rm -rf "$tmp"; exit 1; }
        # Renamed into place last: a half-written binary is never taken for a built one.
        mv -f "$tmp/$name" "$out/"
        rm -rf "$tmp"
    fi
    echo "$name=$out/$name"
done
