#!/usr/bin/env bash
# Build the shipped Dockerfile with Debian's buildah, as CI does, on a base image
# made here: no registry can be pulled from, so a Debian bookworm rootfs with
# Python 3.11 is made by mmdebstrap from Debian's packages and passed in through
# the Dockerfile's PYTHON_IMAGE build argument.
#
#   bash tests/image/build.sh [amd64|arm64]
#
# Base rootfs and buildah's storage (vfs driver, chroot isolation: no daemon, no
# overlayfs) live in ${ARCHFIT_IMAGE_CACHE:-$HOME/.cache/archfit-image}; the base is
# rebuilt only when its recipe (this file's BASE_* lines) changes, and the image only
# when something that goes into it does.
# Prints the image name on stdout (logs go to stderr); exits 3 when buildah or
# mmdebstrap is missing, 4 when a foreign architecture's qemu handler cannot be
# registered (tests/image/binfmt.sh).
set -euo pipefail

arch="${1:-$(dpkg --print-architecture)}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${ARCHFIT_IMAGE_CACHE:-$HOME/.cache/archfit-image}"

# Bump to remake every cached base after changing how it is made (below).
BASE_RECIPE_VERSION=2
BASE_SUITE=bookworm
BASE_MIRROR=http://deb.debian.org/debian
# What python:3.11-slim offers the Dockerfile: python, pip, venv, useradd, CA roots.
BASE_PACKAGES=python3,python3-pip,python-is-python3,ca-certificates,netbase,tzdata
# Documentation, manuals and translations are dead weight in an image.
# (Licences stay: /usr/share/doc/*/copyright is put back.)
BASE_EXCLUDES=('/usr/share/doc/*' '/usr/share/man/*' '/usr/share/info/*' '/usr/share/locale/*'
               '/usr/share/lintian/*')

for tool in buildah mmdebstrap; do
    command -v "$tool" >/dev/null 2>&1 \
        || { echo "build.sh: '$tool' not found: apt-get install -y $tool" >&2; exit 3; }
done
if [[ "$arch" != "$(dpkg --print-architecture)" ]]; then
    # mmdebstrap checks a foreign architecture runs with arch-test before using it.
    command -v arch-test >/dev/null 2>&1 \
        || { echo "build.sh: 'arch-test' not found: apt-get install -y arch-test" >&2; exit 3; }
    bash "$here/binfmt.sh" "$arch" || exit 4  # it says why
fi

mkdir -p "$cache"
exec 9>"$cache/.lock-$arch"
flock 9  # one build per architecture at a time (containers/storage locks the rest)

bah() { buildah --root "$cache/storage" --runroot "$cache/run" --storage-driver vfs "$@"; }

base="localhost/archfit-base:$BASE_SUITE-$arch"
recipe="$(printf '%s\n' "$BASE_SUITE" "base-v$BASE_RECIPE_VERSION" "$BASE_MIRROR" "$BASE_PACKAGES" \
    "${BASE_EXCLUDES[@]}" "$arch")"
stamp="$cache/base-$arch.stamp"
want="$(sha256sum <<<"$recipe" | cut -d' ' -f1)"
start=$SECONDS
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]] || ! bah inspect --type image "$base" >/dev/null 2>&1; then
    echo "build.sh: making the $BASE_SUITE $arch base rootfs with mmdebstrap" >&2
    tarball="$cache/base-$arch.tar"
    excludes=()
    for path in "${BASE_EXCLUDES[@]}"; do excludes+=(--dpkgopt="path-exclude=$path"); done
    excludes+=(--dpkgopt='path-include=/usr/share/doc/*/copyright')
    mmdebstrap --variant=minbase --architectures="$arch" --include="$BASE_PACKAGES" \
        --aptopt='APT::Install-Recommends "false"' "${excludes[@]}" \
        "$BASE_SUITE" "$tarball" "$BASE_MIRROR" >&2
    container="$(bah from --arch "$arch" scratch)"
    bah add "$container" "$tarball" / >&2
    bah config --arch "$arch" --os linux --cmd python3 \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$container" >&2
    bah commit --rm --identity-label=false "$container" "$base" >&2
    rm -f "$tarball"
    echo "$want" >"$stamp"
    echo "build.sh: base image $base in $((SECONDS - start))s" >&2
fi

# The version is written once, in extender/__init__.py (pyproject.toml reads it from there).
version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/extender/__init__.py")"
[[ -n "$version" ]] || { echo "build.sh: no __version__ in extender/__init__.py" >&2; exit 1; }
revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
image="localhost/archfit:$version-$arch"
# Skip buildah altogether when nothing that goes into the image changed.
inputs="$(cd "$repo" && { printf '%s\n' "$want" "$version" "$revision" "$arch";
    find Dockerfile .dockerignore pyproject.toml README.md LICENSE requirements.lock extender \
        -type f -not -path '*/__pycache__/*' -not -name '*.py[cod]' -print0 | sort -z \
        | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1)"
image_stamp="$cache/image-$arch.stamp"
if [[ -f "$image_stamp" && "$(cat "$image_stamp")" == "$inputs" ]] \
        && bah inspect --type image "$image" >/dev/null 2>&1; then
    echo "build.sh: $image is up to date" >&2
    echo "$image"
    exit 0
fi
start=$SECONDS
echo "build.sh: building $image from $repo/Dockerfile on $base" >&2
# No --layers: vfs copies the whole root filesystem for every cached step, which costs
# more than the one pip download it would save. The host's CA bundle is lent to RUN
# steps (Debian's pip reads it), so pip trusts what the host trusts (a TLS-intercepting
# proxy, say); it is not copied into the image.
bah bud --isolation chroot --layers=false --pull=never --identity-label=false \
    --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
    --platform "linux/$arch" --build-arg PYTHON_IMAGE="$base" \
    --build-arg VERSION="$version" --build-arg REVISION="$revision" \
    --tag "$image" --file "$repo/Dockerfile" "$repo" >&2
# The image this one replaced is now untagged; vfs keeps every layer whole, so drop it.
bah rmi --prune >/dev/null 2>&1 || true
echo "$inputs" >"$image_stamp"
echo "build.sh: $image in $((SECONDS - start))s" >&2
echo "$image"
