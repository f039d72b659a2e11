#!/usr/bin/env bash
# Build bench/loadgen (Go, standard library only) into the e2e cache, keyed by the
# hash of its sources, so a warm run is a no-op. Prints the executable's path on stdout;
# exits 3 when the cache is cold and Go is missing (as tests/e2e/build.sh does).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${ARCHFIT_E2E_CACHE:-$HOME/.cache/archfit-e2e}"
key="$(cat "$here/go.mod" "$here/main.go" | sha256sum | cut -c1-16)"
out="$cache_root/loadgen-$key"

if [[ -x "$out/loadgen" ]]; then
    echo "$out/loadgen"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build.sh: 'go' not found on PATH" >&2; exit 3; }

mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$here" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath" go build -ldflags "-s -w" -o "$tmp/loadgen" .) >&2
mv -f "$tmp/loadgen" "$out/loadgen"
echo "$out/loadgen"
