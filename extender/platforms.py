"""Platforms: normalising `os/arch/variant` the way containerd does, and strict matching.

Pure functions over plain data; no I/O. See DESIGN §2 for the rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

_ARCH_ALIASES = {
    "aarch64": "arm64",
    "x86_64": "amd64",
    "x86-64": "amd64",
    "i386": "386",
    "armhf": "arm",
    "armel": "arm",
}
# armhf/armel are Debian names that imply a variant of their own.
_ARCH_IMPLIED_VARIANT = {"armhf": "v7", "armel": "v6"}


class Platform(NamedTuple):
    """One normalised platform. Build it with `normalize`, not directly.

    A tuple, not a dataclass: it is hashed and compared per node in the hot path.
    """

    os: str
    architecture: str
    variant: str = ""
    os_version: str = ""

    def __str__(self) -> str:
        text = f"{self.os}/{self.architecture}"
        if self.variant:
            text += f"/{self.variant}"
        return text


def normalize(os: str, architecture: str, variant: str = "", os_version: str = "") -> Platform:
    """Return the canonical platform for raw manifest or node values."""
    os_ = os.strip().lower()
    raw_arch = architecture.strip().lower()
    arch = _ARCH_ALIASES.get(raw_arch, raw_arch)
    var = variant.strip().lower() or _ARCH_IMPLIED_VARIANT.get(raw_arch, "")
    if arch == "arm64" and var in ("8", "v8", "v8.0"):
        var = ""
    elif arch == "arm":
        # containerd treats plain "arm" as v7, and accepts bare digits.
        if not var:
            var = "v7"
        elif var.isdigit():
            var = f"v{var}"
    elif arch == "amd64" and var == "v1":
        var = ""
    return Platform(os_, arch, var, os_version.strip())


def parse(text: str) -> Platform:
    """Parse `os/arch[/variant]` (as written in config and logs) into a Platform.

    Raises ValueError naming the bad text.
    """
    parts = text.strip().split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"platform {text!r} is not os/arch[/variant]")
    return normalize(*parts)


def node_platform(labels: Mapping[str, str], node_info: Mapping[str, str]) -> Platform | None:
    """The platform of a node, from its labels, falling back to status.nodeInfo.

    Returns None when the node says nothing about its architecture.
    """
    os_ = labels.get("kubernetes.io/os") or node_info.get("operatingSystem") or ""
    arch = labels.get("kubernetes.io/arch") or node_info.get("architecture") or ""
    if not arch:
        return None
    return normalize(os_ or "linux", arch, "", labels.get("node.kubernetes.io/windows-build", ""))


# Looser matching of containerd 1.x, off by default: a 64-bit arm host that can
# still run 32-bit code, and amd64 hosts that run 386.
_LOOSE_FALLBACKS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("arm64", ""): (("arm", "v8"), ("arm", "v7"), ("arm", "v6"), ("arm", "v5")),
    ("amd64", ""): (("386", ""),),
}


def accepts(node: Platform, image: Platform, *, loose: bool = False) -> bool:
    """Whether a node of platform `node` can run an image entry of platform `image`.

    Strict by default, as containerd 2.x CRI: the same OS, the same architecture,
    and a variant the node runs (nodes carry no variant label, so a node accepts
    the base variant only: arm64 accepts arm64 and arm64/v8, never arm/v7;
    amd64 rejects amd64/v3-only images).
    """
    if node.os != image.os:
        return False
    # Windows process isolation needs the same build (major.minor.build).
    if (
        node.os == "windows"
        and node.os_version
        and image.os_version
        and _windows_build(node.os_version) != _windows_build(image.os_version)
    ):
        return False
    if node.architecture == image.architecture and node.variant == image.variant:
        return True
    if node.architecture == "arm" and image.architecture == "arm":
        # An arm/v7 node runs v6 and v5 code too.
        return _arm_level(image.variant) <= _arm_level(node.variant)
    if loose:
        fallbacks = _LOOSE_FALLBACKS.get((node.architecture, node.variant), ())
        return (image.architecture, image.variant) in fallbacks
    return False


def _arm_level(variant: str) -> int:
    digits = variant.removeprefix("v")
    return int(digits) if digits.isdigit() else 0


def _windows_build(os_version: str) -> str:
    # A node's windows-build label is "10.0.17763"; an image's os.version adds
    # a revision, "10.0.17763.5820", which does not matter for compatibility.
    return ".".join(os_version.split(".")[:3])


def any_accepts(node: Platform, images: Iterable[Platform], *, loose: bool = False) -> bool:
    """Whether any of an image's entries runs on the node."""
    return any(accepts(node, image, loose=loose) for image in images)
