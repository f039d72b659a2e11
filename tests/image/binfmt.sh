#!/usr/bin/env bash
# Register qemu-user-static's handler for a foreign architecture with the kernel
# (binfmt_misc), so buildah can RUN that architecture's steps and runc can start its
# binaries. Needs root; a no-op when the handler is there. Exits non-zero, saying
# why, when it cannot be registered (no qemu-user-static, no root, no binfmt_misc).
#   bash tests/image/binfmt.sh arm64
set -euo pipefail

arch="${1:?usage: binfmt.sh amd64|arm64}"
case "$arch" in
    arm64) handler=qemu-aarch64 ;;
    amd64) handler=qemu-x86_64 ;;
    *) echo "binfmt.sh: no qemu handler known for $arch" >&2; exit 2 ;;
esac
binfmt=/proc/sys/fs/binfmt_misc
[[ -e "$binfmt/$handler" ]] && exit 0

conf="/usr/lib/binfmt.d/$handler.conf"
[[ -f "$conf" ]] || { echo "binfmt.sh: $conf missing: apt-get install -y qemu-user-static" >&2; exit 3; }
[[ "$(id -u)" == 0 ]] || { echo "binfmt.sh: registering $handler needs root" >&2; exit 4; }
if [[ ! -e "$binfmt/register" ]]; then
    mount -t binfmt_misc binfmt_misc "$binfmt" \
        || { echo "binfmt.sh: cannot mount binfmt_misc at $binfmt" >&2; exit 4; }
fi
# The F flag (in the shipped .conf) opens the interpreter now, so it works in chroots.
grep -v '^#' "$conf" >"$binfmt/register" \
    || { echo "binfmt.sh: the kernel refused to register $handler" >&2; exit 4; }
