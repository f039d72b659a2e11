#!/usr/bin/env bash
# Build bench/noop-extender, the do-nothing kube-scheduler extender that
# bench/scheduler_throughput.py measures archfit against. Standard library only:
# no module downloads.
#
# The binary lands in ${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}/noop-extender-<hash>/,
# where <hash> is of its sources, and is reused when present, so a warm run is a no-op.
# Prints that directory on stdout (build logs go to stderr); exits non-zero on any
# failure: 3 when the cache is cold and Go is missing (tests/e2e/build.sh's convention).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/noop-extender"
hash="$(cat "$src/go.mod" "$src/main.go" | sha256sum | cut -c1-12)"
cache_root="${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}"
out="$cache_root/noop-extender-$hash"

if [[ -x "$out/noop-extender" ]]; then
    echo "$out"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build-noop-extender.sh: 'go' not found on PATH (need Go >= 1.26)" >&2; exit 3; }

mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly -trimpath"

echo "build-noop-extender.sh: building noop-extender into $out" >&2
(cd "$src" && go build -ldflags "-s -w" -o "$tmp/noop-extender" .) >&2
# Renamed into place last: a half-written binary is never taken for a built one.
mv -f "$tmp/noop-extender" "$out/"
echo "$out"
