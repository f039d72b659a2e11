#!/usr/bin/env bash
# Build one of the benchmarks' Go programs, bench/<name>/ (standard library only, so no
# module downloads): noop-extender, the do-nothing kube-scheduler extender that
# bench/scheduler_throughput.py measures archfit against, or loadgen, the load generator
# of bench/request_cost.py.
#
# The binary lands in ${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/<name>-<hash>/<name>,
# where <hash> is of its sources, and is reused when present, so a warm run is a no-op.
# Prints that directory on stdout (build logs go to stderr); exits non-zero on any failure:
# 3 when the cache is cold and Go is missing (tests/e2e/build.sh's convention).
#
#   bash bench/build-go.sh noop-extender|loadgen
set -euo pipefail

name="${1:?usage: build-go.sh <name of a folder under bench/>}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$name"
[[ -f "$src/go.mod" ]] || { echo "build-go.sh: no Go module in $src" >&2; exit 2; }
hash="$(cat "$src/go.mod" "$src"/*.go | sha256sum | cut -c1-12)"
out="${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/$name-$hash"

if [[ -x "$out/$name" ]]; then
    echo "$out"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build-go.sh: 'go' not found on PATH (need Go >= 1.26)" >&2; exit 3; }

mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "build-go.sh: building $name into $out" >&2
(cd "$src" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly -trimpath" \
    go build -ldflags "-s -w" -o "$tmp/$name" .) >&2
# Renamed into place last: a half-written binary is never taken for a built one.
mv -f "$tmp/$name" "$out/"
echo "$out"
