"""The admission policy's parameter as a format: the key an image reference is listed under,
one image's answer packed into one CEL int, and a published spec read back.

Pure. The publisher writes it (extender.core.image_table), every replica reads it as a cache
tier (extender.resolution.shared_tier), and the MutatingAdmissionPolicy's CEL reads the same
layout (deploy/kustomize/components/admission-policy/policy.yaml). See docs/webhook.md, "When
archfit is down".

A value is, from its lowest bit up: the cluster platforms the image runs on (one bit each,
`platforms[].bit`), those it runs on natively (`platforms[].nativeBit`), the index + 1 of its
exact platform set in `platformSets` (0: not given), and when it was resolved (seconds since
`layout.timeEpoch`; 0: not known). CEL reads a platform's bit as `(value / bit) % 2`, which the
higher parts do not disturb.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from extender.core.platforms import Platform

DIGEST_MARK = "@"
MAX_PLATFORMS = 31
"""Each platform takes two bits of a value (supported, native), a CEL int (64-bit, signed)."""
SET_BITS = 14
TIME_BITS = 31
TIME_EPOCH = 1_735_689_600
"""2025-01-01T00:00:00Z: resolved-at times are seconds after it (31 bits: until 2093)."""
_VALUE_BITS = 63


def table_key(image: str) -> str:
    """What `image` is listed under: a digest-pinned reference by its digest, from the `@`
    (`repo:tag@sha256:…` and `other/repo@sha256:…` are one entry: a digest names fixed
    content), any other by the reference as written. The policy's CEL computes the same."""
    at = image.find(DIGEST_MARK)
    return image if at < 0 else image[at:]


class ValueLayout(NamedTuple):
    """Where each part of a value sits, for a parameter of `platforms` platforms."""

    platforms: int

    @property
    def native_shift(self) -> int:
        return self.platforms

    @property
    def set_shift(self) -> int:
        return 2 * self.platforms

    @property
    def time_shift(self) -> int:
        return 2 * self.platforms + SET_BITS

    @property
    def packs(self) -> bool:
        """Whether a value has room for the set index and the resolved-at time (up to 9
        platforms): past that, values carry the bits alone."""
        return self.time_shift + TIME_BITS <= _VALUE_BITS

    def pack(self, supported: int, native: int, set_index: int, resolved_at: float) -> int:
        """One value. `set_index` is 1-based (0: not given); `resolved_at` is Unix seconds
        (0: not known)."""
        value = supported | native << self.native_shift
        if not self.packs:
            return value
        index = set_index if 0 <= set_index < 1 << SET_BITS else 0
        return value | index << self.set_shift | self.time_part(resolved_at)

    def time_part(self, resolved_at: float) -> int:
        """A value's resolved-at part (0 when it is not known, or the layout has no room)."""
        if resolved_at <= 0 or not self.packs:
            return 0
        seconds = min(max(int(resolved_at) - TIME_EPOCH, 0), (1 << TIME_BITS) - 1)
        return seconds << self.time_shift

    def unpack(self, value: int) -> Packed:
        mask = (1 << self.platforms) - 1
        supported = value & mask
        native = value >> self.native_shift & mask
        if not self.packs:
            return Packed(supported, native, 0, 0.0)
        index = value >> self.set_shift & ((1 << SET_BITS) - 1)
        seconds = value >> self.time_shift & ((1 << TIME_BITS) - 1)
        return Packed(supported, native, index, float(TIME_EPOCH + seconds) if seconds else 0.0)


class Packed(NamedTuple):
    """One value's parts."""

    supported: int
    native: int
    set_index: int
    """1-based index into `platformSets`; 0 when not given."""
    resolved_at: float
    """Unix seconds; 0 when not known."""


def platform_text(platform: Platform) -> str:
    """`os/arch[/variant[/os.version]]`, every part kept (an exact set is rebuilt from it)."""
    parts = [platform.os, platform.architecture, platform.variant, platform.os_version]
    while len(parts) > 2 and not parts[-1]:
        parts.pop()
    return "/".join(parts)


def platform_of_text(text: str) -> Platform:
    """`platform_text` read back (the values were normalised before they were written)."""
    parts = text.split("/")
    parts += [""] * (4 - len(parts))
    return Platform(parts[0], parts[1], parts[2], parts[3])


def set_text(platforms: Iterable[Platform]) -> list[str]:
    return sorted(platform_text(p) for p in platforms)


class PlatformEntry(msgspec.Struct, rename="camel", frozen=True):
    """One of the cluster's platforms, as `spec.platforms` lists it."""

    os: str = ""
    architecture: str = ""
    variant: str = ""
    bit: int = 0
    native_bit: int = 0


class SpecLayout(msgspec.Struct, rename="camel", frozen=True):
    set_shift: int = 0
    time_shift: int = 0
    time_epoch: int = 0


class ParameterSpec(msgspec.Struct, rename="camel", frozen=True):
    """What a replica and the CLI read of the published spec (the rest is the policy's)."""

    platforms: list[PlatformEntry] = []
    platform_sets: list[list[str]] = []
    images: dict[str, int] = {}
    workloads: dict[str, dict[str, int]] = {}
    layout: SpecLayout | None = None


decode_spec = msgspec.json.Decoder(ParameterSpec).decode


def read_spec(spec: Mapping[str, object]) -> ParameterSpec:
    """A spec already decoded from JSON (the API client's answer), read as ParameterSpec.
    Raises msgspec.ValidationError when a field has the wrong type."""
    return msgspec.convert(spec, ParameterSpec)


@dataclass(frozen=True, slots=True)
class PublishedTable:
    """A published spec read back: each listed key's exact platform set, where the spec gives
    it (never the projection onto the cluster's platforms that its bits are)."""

    images: Mapping[str, int]
    workloads: Mapping[str, Mapping[str, int]]
    sets: tuple[frozenset[Platform], ...]
    layout: ValueLayout | None
    """None for a spec of an archfit before the layout (values are the supported bits
    alone)."""
    platforms: tuple[Platform, ...]
    """The cluster platforms, in bit order."""

    @classmethod
    def of(cls, spec: ParameterSpec) -> PublishedTable:
        layout: ValueLayout | None = ValueLayout(len(spec.platforms))
        given = spec.layout
        if given is None:
            layout = None
        elif (
            layout is not None
            and layout.packs
            and (
                (given.set_shift, given.time_shift, given.time_epoch)
                != (layout.set_shift, layout.time_shift, TIME_EPOCH)
            )
        ):
            layout = None  # a layout this archfit does not know: read no set and no time
        sets = tuple(frozenset(platform_of_text(t) for t in texts) for texts in spec.platform_sets)
        platforms = tuple(
            Platform(p.os, p.architecture, p.variant)
            for p in sorted(spec.platforms, key=lambda p: p.bit)
        )
        return cls(spec.images, spec.workloads, sets, layout, platforms)

    def __len__(self) -> int:
        return len(self.images)

    def platforms_of(self, key: str) -> frozenset[Platform] | None:
        """The exact platform set of a listed key, or None (not listed, or no set given)."""
        value = self.images.get(key)
        return None if value is None else self._set_of(value)

    def workload_platforms(self, workload: str, key: str) -> frozenset[Platform] | None:
        """The exact set a workload's evidence narrowed `key` to (`<namespace>/<Kind>/<name>`),
        or None."""
        entries = self.workloads.get(workload)
        value = None if entries is None else entries.get(key)
        return None if value is None else self._set_of(value)

    def unpacked(self, key: str) -> Packed | None:
        """A listed key's value in parts, or None."""
        value = self.images.get(key)
        if value is None:
            return None
        if self.layout is None:
            return Packed(value, value, 0, 0.0)
        return self.layout.unpack(value)

    def _set_of(self, value: int) -> frozenset[Platform] | None:
        if self.layout is None:
            return None
        index = self.layout.unpack(value).set_index
        return self.sets[index - 1] if 0 < index <= len(self.sets) else None


EMPTY_TABLE = PublishedTable({}, {}, (), None, ())


def workload_key(namespace: str, workload: str) -> str:
    """How `spec.workloads` names a workload: `<namespace>/<Kind>/<name>`, as the policy's
    CEL builds it from the request's namespace and the pod's controller."""
    return f"{namespace}/{workload}"
