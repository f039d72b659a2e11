"""What archfit's admission policy reads: the images archfit has resolved, and the cluster
facts the webhook's decision uses, as the spec of the `ImagePlatforms` parameter object.

Pure: a bounded table of image reference → platforms (least recently used first out) and
the function that renders it. kube-apiserver evaluates the MutatingAdmissionPolicy
(deploy/kustomize/components/admission-policy) over this spec, so it must say what
`extender.core.mutation` would decide. See docs/webhook.md, "When archfit is down".
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import orjson

from extender.core.mutation import MutationRules, TaintRule, fits_of, preferred_weight
from extender.core.platforms import Platform
from extender.core.pods import PullSecretsRef

REFRESHING: ContextVar[bool] = ContextVar("archfit_policy_refreshing", default=False)
"""Set while the publisher resolves images again: those lookups are not uses."""
CARRIED = PullSecretsRef(namespace="")
"""The credentials of an image taken over from the published object: none known."""

MAX_PLATFORMS = 62
"""Each platform is a bit of an image's value, a CEL int (64-bit, signed)."""


@dataclass(slots=True)
class ImageEntry:
    """One image as archfit last resolved it."""

    platforms: frozenset[Platform]
    pull: PullSecretsRef
    """The credentials it was resolved with, to resolve it again (a tag may move)."""
    used: float
    """When a pod last named it (the table's clock)."""
    resolved: float
    """When it was last resolved."""


class ImageTable:
    """Image reference → platforms, most recently used last; at most `max_entries`.

    Every replica records what it resolves (a dict write per image); the leader publishes.
    """

    def __init__(self, max_entries: int, clock: Callable[[], float]) -> None:
        self._entries: OrderedDict[str, ImageEntry] = OrderedDict()
        self._max = max_entries
        self._clock = clock

    def __len__(self) -> int:
        return len(self._entries)

    def record(
        self,
        image: str,
        platforms: frozenset[Platform],
        pull: PullSecretsRef,
        *,
        used: bool = True,
    ) -> None:
        """A lookup answered `platforms` for `image`; `used=False` (or REFRESHING set) for a
        refresh, which keeps the image's place (a refresh is not a pod)."""
        used = used and not REFRESHING.get()
        now = self._clock()
        entry = self._entries.get(image)
        if entry is None:
            if not used:
                return  # dropped meanwhile: a refresh does not bring it back
            self._entries[image] = ImageEntry(platforms, pull, now, now)
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
            return
        entry.platforms, entry.pull, entry.resolved = platforms, pull, now
        if used:
            entry.used = now
            self._entries.move_to_end(image)

    def carry(self, image: str, platforms: frozenset[Platform]) -> bool:
        """Take over an image a former publisher listed, unless this table knows it; it
        counts as used now, behind every image this table has seen."""
        if image in self._entries:
            return False
        now = self._clock()
        # Least recently used of all, so the order by use holds (drop_unused relies on it).
        oldest = next(iter(self._entries.values())).used if self._entries else now
        self._entries[image] = ImageEntry(platforms, CARRIED, oldest, now)
        self._entries.move_to_end(image, last=False)
        if len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return True

    def drop_unused(self, seconds: float) -> int:
        """Forget images no pod has named for `seconds`; how many went."""
        horizon = self._clock() - seconds
        dropped = 0
        while self._entries:
            image, entry = next(iter(self._entries.items()))
            if entry.used >= horizon:
                break
            del self._entries[image]
            dropped += 1
        return dropped

    def due(self, seconds: float) -> list[tuple[str, PullSecretsRef]]:
        """Images last resolved more than `seconds` ago, to resolve again."""
        horizon = self._clock() - seconds
        return [(i, e.pull) for i, e in self._entries.items() if e.resolved < horizon]

    def recent_first(self) -> Iterable[tuple[str, frozenset[Platform]]]:
        """Every image and its platforms, the most recently used first."""
        return ((i, e.platforms) for i, e in reversed(self._entries.items()))


@dataclass(frozen=True, slots=True)
class Published:
    """A rendered parameter spec and what it left out."""

    spec: dict[str, Any]
    images: int
    evicted: int
    """Images left out to stay under the byte bound (least recently used first)."""
    bytes: int
    """Size of the spec as JSON."""


@dataclass(frozen=True, slots=True)
class Switches:
    """The settings the policy follows as the webhook does."""

    enforce: bool
    """False under `policy.mode: dry-run`: the policy writes nothing."""
    hold: bool
    """`webhook.unknownImages: gate` (and a releaser can run)."""
    steering: bool
    """`webhook.steering`: namespace annotations count, so their pods wait for archfit."""
    excluded_namespaces: tuple[str, ...]
    never_hold: tuple[str, ...]


def parameter_spec(
    images: Iterable[tuple[str, frozenset[Platform]]],
    rules: MutationRules,
    switches: Switches,
    max_bytes: int,
) -> Published:
    """The `ImagePlatforms` spec for `images` (most recently used first) under `rules`,
    at most `max_bytes` of JSON: past it the least recently used images are left out,
    and their pods are held (or left alone) as unknown ones are."""
    platforms = sorted(rules.platforms)[:MAX_PLATFORMS]
    bits = {p: 1 << i for i, p in enumerate(platforms)}
    spec: dict[str, Any] = {
        "enforce": switches.enforce,
        "hold": switches.hold,
        "steering": switches.steering,
        "excludedNamespaces": sorted(switches.excluded_namespaces),
        "neverHold": sorted(switches.never_hold),
        "platforms": [_platform(p, bits[p]) for p in platforms],
        "architectures": sorted({p.architecture for p in platforms}),
        "oses": sorted({p.os for p in platforms}),
        "preferred": preferred_terms(rules.arch_preference),
        "taints": _taints(rules.taints),
        "images": {},
        "nativeImages": {},
    }
    # `{}` twice in the skeleton: each image adds `"ref":n,` to one of the two maps.
    room = max_bytes - len(orjson.dumps(spec))
    table: dict[str, int] = spec["images"]
    native_table: dict[str, int] = spec["nativeImages"]
    frozen = frozenset(platforms)
    evicted = 0
    for image, image_platforms in images:
        fits = fits_of(frozenset({image_platforms}), frozen, rules.rule, rules.aarch32)
        value = sum(bits[p] for p in fits.supported)
        native = sum(bits[p] for p in fits.native)
        cost = len(orjson.dumps(image)) + len(str(value)) + 2
        if native != value:
            cost += len(orjson.dumps(image)) + len(str(native)) + 2
        if cost > room:
            evicted += 1
            continue
        room -= cost
        table[image] = value
        if native != value:
            native_table[image] = native
    size = len(orjson.dumps(spec))
    return Published(spec, len(table), evicted, size)


def preferred_terms(preference: dict[str, int] | Any) -> list[dict[str, Any]]:
    """The webhook's preferred terms (extender.core.mutation._prefer), best first."""
    return [
        {"architecture": arch, "weight": preferred_weight(score)}
        for arch, score in sorted(preference.items(), key=lambda item: (-item[1], item[0]))
        if score > 0
    ]


def _platform(platform: Platform, bit: int) -> dict[str, Any]:
    out: dict[str, Any] = {"os": platform.os, "architecture": platform.architecture, "bit": bit}
    if platform.variant:
        out["variant"] = platform.variant
    return out


def _taints(taints: Collection[TaintRule]) -> list[dict[str, str]]:
    # One toleration per distinct taint, as the webhook adds (a second identical taint is
    # tolerated by the first toleration).
    seen: set[tuple[str, str, str]] = set()
    out = []
    for taint in taints:
        key = (taint.key, taint.value, taint.effect)
        if key in seen:
            continue
        seen.add(key)
        out.append(
            {
                "architecture": taint.architecture,
                "key": taint.key,
                "value": taint.value,
                "effect": taint.effect,
            }
        )
    return out
