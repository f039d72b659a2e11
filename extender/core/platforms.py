"""Platforms: normalising `os/arch/variant` and matching them the way container runtimes do,
and what a lookup learned of an image's platforms (`Resolved`).

Pure functions over plain data; no I/O. The rules are ports of
github.com/containerd/platforms v1.0.0-rc.5 (database.go, compare.go,
platform_windows_compat.go) and of containers/image's internal/pkg/platform/platform_matcher.go.
"""

from __future__ import annotations

import enum
import functools
import heapq
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, NewType

from extender.core.interning import Interner
from extender.core.text import cut

ARCH_LABEL = "kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"
WINDOWS_BUILD_LABEL = "node.kubernetes.io/windows-build"
"""The node labels that say a node's platform (kubelet writes them)."""

MAX_SCORE = 10
"""kube-scheduler's MaxExtenderPriority: an extender's scores, and so an architecture
preference's, run 0..MAX_SCORE."""


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


@dataclass(frozen=True, slots=True)
class Unknown:
    """An image whose platforms could not be learned in time, and why."""

    reason: str


SharedPlatforms = NewType("SharedPlatforms", frozenset[Platform])
"""A platform set that is the one object of its value: made only by `PlatformSets`. The verbs'
judgements are kept by `id()`, so they take only these (extender.core.interning)."""


class PlatformSets(Interner[frozenset[Platform]]):
    """Hands out one SharedPlatforms per distinct set of platforms."""

    __slots__ = ()

    def __call__(self, value: frozenset[Platform]) -> SharedPlatforms:
        return SharedPlatforms(super().__call__(value))


Resolved = frozenset[Platform] | Unknown
"""What a request knows of one image: its platforms, or that it does not know."""

SharedResolved = SharedPlatforms | Unknown
"""Resolved as `extender.resolution.within_deadline.Resolution` answers it: its platform sets
shared."""


MAX_FAILURE_REASON = 200
"""Characters of a failed lookup's reason kept for logs, events and report cells."""


def describe_failure(error: BaseException) -> str:
    """Why a lookup failed (an Unknown's reason), short enough for a log line, an event or a
    report cell."""
    # Registry error bodies can be long; the reason ends up in logs and events.
    return cut(str(error) or type(error).__name__, MAX_FAILURE_REASON)


class Rule(enum.StrEnum):
    """How a node's runtime picks an image's entry (docs/how-it-decides.md, "The rules")."""

    STRICT = "strict"
    """containerd ≥ 2.1 (transfer service): compare.go OnlyStrict ≡ Ordered(Normalize(node))."""
    LOOSE = "loose"
    """containerd 2.0 and 1.x on Linux: compare.go Only(node), the platformVector fallbacks."""
    CONTAINERS_IMAGE = "containers-image"
    """CRI-O: containers/image platform_matcher.go WantedPlatforms and MatchesPlatform."""


def normalize(os: str, architecture: str, variant: str = "", os_version: str = "") -> Platform:
    """containerd's Normalize (platforms.go): normalizeOS and normalizeArch of database.go.

    Nothing is trimmed: containerd compares what the manifest says.
    """
    os_ = os.lower()
    if os_ == "macos":
        os_ = "darwin"
    arch, var = _normalize_arch(architecture, variant)
    return Platform(os_, arch, var, os_version)


def _normalize_arch(arch: str, variant: str) -> tuple[str, str]:
    """database.go normalizeArch, case by case."""
    arch, variant = arch.lower(), variant.lower()
    if arch == "i386":
        return "386", ""
    if arch in ("x86_64", "x86-64", "amd64"):
        return "amd64", "" if variant == "v1" else variant
    if arch in ("aarch64", "arm64"):
        if variant in ("8", "v8", "v8.0"):
            variant = ""
        elif variant in ("9", "9.0", "v9.0"):
            variant = "v9"
        return "arm64", variant
    if arch == "armhf":
        return "arm", "v7"
    if arch == "armel":
        return "arm", "v6"
    if arch == "arm":
        if variant in ("", "7"):
            variant = "v7"
        elif variant in ("5", "6", "8"):
            variant = "v" + variant
    return arch, variant


LINUX_ARM64 = normalize("linux", "arm64")
"""The platform arm64 readiness is judged by (`archfit audit`, `archfit lint`)."""


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
    os_ = labels.get(OS_LABEL) or node_info.get("operatingSystem") or ""
    arch = labels.get(ARCH_LABEL) or node_info.get("architecture") or ""
    if not arch:
        return None
    return normalize(os_ or "linux", arch, "", labels.get(WINDOWS_BUILD_LABEL, ""))


def accepts(
    node: Platform,
    image: Platform,
    *,
    rule: Rule = Rule.STRICT,
    loose: bool = False,
    aarch32: bool = False,
) -> bool:
    """Whether a node of platform `node`, pulling by `rule`, takes an image entry `image`
    and can run it.

    `aarch32` says the node's CPUs execute 32-bit Arm code. containerd's pull rule assumes
    every arm64 CPU does, but many do not (Arm Neoverse N2 and V2 designs such as AWS
    Graviton4, AmpereOne): pulling is not running, so an arm64 node takes a 32-bit Arm
    entry only when `aarch32` is set. `loose=True` is the older spelling of `rule=Rule.LOOSE`.
    """
    if loose:
        rule = Rule.LOOSE
    if (image.os, image.architecture, image.variant) not in _accepted(node, rule, aarch32):
        return False
    # containers/image ignores os.version; containerd's NewMatcher checks it on Windows.
    if rule is Rule.CONTAINERS_IMAGE or node.os != "windows":
        return True
    return windows_compatible(node.os_version, image.os_version)


def any_accepts(
    node: Platform,
    images: Iterable[Platform],
    *,
    rule: Rule = Rule.STRICT,
    loose: bool = False,
    aarch32: bool = False,
) -> bool:
    """Whether any of an image's entries runs on the node under `rule` (see `accepts`).

    For a frozenset the cost is O(entries the node takes), not O(entries the image has):
    an index can list tens of thousands of platforms and is judged on every call.
    """
    if loose:
        rule = Rule.LOOSE
    if not isinstance(images, frozenset) or len(images) <= _SMALL:
        return any(accepts(node, image, rule=rule, aarch32=aarch32) for image in images)
    index = _by_key(images)
    check_version = rule is not Rule.CONTAINERS_IMAGE and node.os == "windows"
    for key in _accepted(node, rule, aarch32):
        versions = index.get(key)
        if versions is not None and (
            not check_version or any(windows_compatible(node.os_version, v) for v in versions)
        ):
            return True
    return False


_SMALL = 16
"""Sets this small are cheaper to scan than to index (and keep out of the index cache)."""


@functools.lru_cache(maxsize=256)
def _by_key(platforms: frozenset[Platform]) -> dict[_Key, tuple[str, ...]]:
    """An image's entries by (os, arch, variant), with their os.versions; built once per set.

    The cache finds a set again by identity before equality, so a warm lookup is O(1).
    """
    index: dict[_Key, list[str]] = {}
    for p in platforms:
        index.setdefault((p.os, p.architecture, p.variant), []).append(p.os_version)
    return {key: tuple(versions) for key, versions in index.items()}


def summarise_platforms(platforms: frozenset[Platform], limit: int = 8) -> list[str]:
    """At most `limit` platforms (sorted), then `+N more`: what a log line shows of a set.

    Computed once per set, so logging a huge index on every node costs a lookup.
    """
    return list(_summary(platforms, limit))


@functools.lru_cache(maxsize=256)
def _summary(platforms: frozenset[Platform], limit: int) -> tuple[str, ...]:
    shown = sorted(str(p) for p in heapq.nsmallest(limit, platforms))
    rest = len(platforms) - len(shown)
    return (*shown, f"+{rest} more") if rest > 0 else tuple(shown)


_Key = tuple[str, str, str]


@functools.lru_cache(maxsize=512)
def _accepted(node: Platform, rule: Rule, aarch32: bool) -> frozenset[_Key]:
    """The normalised (os, arch, variant) entries the node's runtime takes and its CPUs run
    (`accepts`), computed once."""
    if rule is Rule.STRICT:
        wanted = [node]
    elif rule is Rule.LOOSE:
        wanted = _platform_vector(node)
    else:
        wanted = _containers_image_wanted(node)
    if node.architecture == "arm64" and not aarch32:
        wanted = [p for p in wanted if p.architecture != "arm"]
    # containerd's NewMatcher normalises each platform it matches against.
    normal = (normalize(p.os, p.architecture, p.variant) for p in wanted)
    return frozenset((p.os, p.architecture, p.variant) for p in normal)


# compare.go arm64variantToVersion: (major, highest minor) pairs, newest first.
_ARM64_VERSIONS: dict[str, tuple[tuple[int, int], ...]] = {
    **{f"v8.{minor}": ((8, minor),) for minor in range(10)},
    "v8": ((8, 0),),
    **{f"v9.{minor}": ((9, minor), (8, min(minor + 5, 9))) for minor in range(8)},
    "v9": ((9, 0), (8, 5)),
}
_MAX_LEVEL = 64
"""Highest amd64/arm level expanded; real ones stop at v4 and v8, and nodes name none."""


def _platform_vector(platform: Platform) -> list[Platform]:
    """compare.go platformVector: the node's own platform, then what it also runs."""
    arch = platform.architecture
    if arch == "amd64":
        i386 = platform._replace(architecture="386", variant="")
        return [platform, *_lower_levels(platform, 1), i386]
    if arch == "arm":
        return [platform, *_lower_levels(platform, 5)]
    if arch == "arm64":
        variant = platform.variant or "v8"
        versions = _ARM64_VERSIONS.get(variant)
        if versions is None:
            return []  # an arm64 variant compare.go does not know matches nothing at all
        vector = [
            platform._replace(variant=f"v{major}" if minor == 0 else f"v{major}.{minor}")
            for major, top in versions
            for minor in range(top, -1, -1)
        ]
        # Every arm64 v8.x and v9.x runs 32-bit arm/v8 and below.
        arm = "v8" if variant.startswith(("v8", "v9")) else variant
        return vector + _platform_vector(platform._replace(architecture="arm", variant=arm))
    return [platform]


def _lower_levels(platform: Platform, lowest: int) -> list[Platform]:
    """platformVector's countdown: the same architecture at each lower level down to `lowest`."""
    level = _go_atoi(platform.variant.removeprefix("v"))
    if level is None or level <= lowest:
        return []
    top = min(level, _MAX_LEVEL)
    return [platform._replace(variant=f"v{n}") for n in range(top - 1, lowest - 1, -1)]


_GO_ATOI = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _go_atoi(text: str) -> int | None:
    """Go's strconv.Atoi: an optional sign and ASCII digits, within int64; None otherwise."""
    if _GO_ATOI.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


# containers/image platform_matcher.go `compatibility`: variants a CPU variant also runs.
_CONTAINERS_IMAGE_COMPATIBILITY = {"arm": ("v8", "v7", "v6", "v5"), "arm64": ("v8",)}


def _containers_image_wanted(node: Platform) -> list[Platform]:
    """platform_matcher.go WantedPlatforms for a node whose CPU variant is what its arch says.

    getCPUVariant reads "v8" on arm64 and the arm level (v7 unless the node says otherwise)
    on arm; other architectures have none.
    """
    arch = node.architecture
    cpu_variant = "v8" if arch == "arm64" else node.variant if arch == "arm" else ""
    if cpu_variant:
        order = _CONTAINERS_IMAGE_COMPATIBILITY.get(arch, ())
        variants = list(order[order.index(cpu_variant) :]) if cpu_variant in order else []
        variants = (variants or [cpu_variant]) + [""]
    else:
        variants = ["", *_CONTAINERS_IMAGE_COMPATIBILITY.get(arch, ())]
    return [node._replace(variant=variant) for variant in variants]


class _WindowsVersion(NamedTuple):
    major: int
    minor: int
    build: int


_ZERO = _WindowsVersion(0, 0, 0)
_LTSC2022 = 20348
# platform_windows_compat.go compatLTSCReleases: stable-ABI LTSC builds, ascending.
_COMPAT_LTSC_RELEASES = (_LTSC2022, 26100)
_UINT = re.compile(r"[0-9]+", re.ASCII)


def windows_compatible(host_version: str, image_version: str) -> bool:
    """platform_windows_compat.go windowsVersionMatcher.Match for a host and an image os.version.

    A host that names no version, or an image without os.version, matches.
    """
    host = _windows_version(host_version)
    if host == _ZERO or not image_version:
        return True
    return _host_runs_container(host, _windows_version(image_version))


def _windows_version(text: str) -> _WindowsVersion:
    """getWindowsOSVersion: `major.minor.build[...]`, or the zero version if it is not one."""
    if text.count(".") < 2:
        return _ZERO
    major, minor, build = text.split(".")[:3]
    fields = []
    for value, bits in ((major, 8), (minor, 8), (build, 16)):
        if _UINT.fullmatch(value) is None or int(value) >= 1 << bits:
            return _ZERO  # strconv.ParseUint fails: the zero version
        fields.append(int(value))
    return _WindowsVersion(*fields)


def _host_runs_container(host: _WindowsVersion, ctr: _WindowsVersion) -> bool:
    """checkWindowsHostAndContainerCompat as containerd/platforms v1.0.0-rc.5 has it."""
    if (host.major, host.minor) != (ctr.major, ctr.minor):
        return False
    if host.build < _LTSC2022:
        return host.build == ctr.build
    # The newest LTSC at or below the host; the floor is the LTSC before it (or itself,
    # for the first one): every host from LTSC N runs images from LTSC N-1 up to itself.
    floor = _LTSC2022
    for index in range(len(_COMPAT_LTSC_RELEASES) - 1, -1, -1):
        if host.build >= _COMPAT_LTSC_RELEASES[index]:
            floor = _COMPAT_LTSC_RELEASES[max(index - 1, 0)]
            break
    return floor <= ctr.build <= host.build
