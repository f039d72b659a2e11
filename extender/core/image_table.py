"""What archfit's admission policy reads: the leader's answers for the images the cluster's pods
name, and the `ImagePlatforms` spec they render to under a byte bound, fairly across
namespaces.

Pure. kube-apiserver evaluates the MutatingAdmissionPolicy
(deploy/kustomize/components/admission-policy) over this spec, so it must say what
`extender.core.mutation` would decide; every replica reads it back as a cache tier
(extender.core.parameter). See docs/webhook.md, "When archfit is down".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from extender.core.mutation import MutationRules, TaintRule, fits_of, preferred_weight
from extender.core.parameter import (
    MAX_PLATFORMS,
    TIME_BITS,
    TIME_EPOCH,
    PublishedTable,
    ValueLayout,
    set_text,
)
from extender.core.platforms import Platform

MAX_LEFT_OUT_NAMESPACES = 100
"""Namespaces named in the object's `status.leftOut` (those with the most images left out)."""


@dataclass(slots=True)
class Answer:
    """One key as the leader last resolved it."""

    platforms: frozenset[Platform] | None
    """What the registry said (learned evidence is believed when it is rendered); None for an
    entry carried over without its set, until it is resolved again."""
    digest: str
    """What workload evidence is keyed by ("" until resolved here)."""
    resolved_at: float
    """Unix seconds when it was resolved, here or by a former leader; 0 when not known."""
    carried: tuple[frozenset[Platform], frozenset[Platform]] | None = None
    """For an entry carried without its set: the cluster platforms it ran on, and ran on
    natively, as its former leader published them."""


class ImageTable:
    """key → the leader's answer. Keys come and go with the pods that name them
    (extender.core.image_uses); an answer is kept while its key is followed."""

    def __init__(self) -> None:
        self._answers: dict[str, Answer] = {}
        self.version = 0
        """Moves whenever an answer's platforms or digest, or the keys answered, change."""
        self.times = 0
        """Moves whenever an answer is resolved again (its time alone may have changed)."""

    def __len__(self) -> int:
        return len(self._answers)

    def __contains__(self, key: str) -> bool:
        return key in self._answers

    def get(self, key: str) -> Answer | None:
        return self._answers.get(key)

    def answer(
        self, key: str, platforms: frozenset[Platform], digest: str, resolved_at: float
    ) -> bool:
        """Keep a fresh answer; whether what the key renders to may have changed."""
        known = self._answers.get(key)
        self._answers[key] = Answer(platforms, digest, resolved_at)
        self.times += 1
        changed = known is None or (known.platforms, known.digest) != (platforms, digest)
        self.version += changed
        return changed

    def drop(self, keys: Iterable[str]) -> int:
        gone = 0
        for key in keys:
            gone += self._answers.pop(key, None) is not None
        self.version += gone
        return gone

    def carry(self, published: PublishedTable) -> int:
        """Take over what a former leader published, each entry with its own resolved-at
        time (0 when it did not say); keys this table knows keep their own answer. How many
        were taken."""
        carried = 0
        for key in published.images:
            if key in self._answers:
                continue
            packed = published.unpacked(key)
            if packed is None:
                continue
            exact = published.platforms_of(key)
            if exact is not None:
                self._answers[key] = Answer(exact, "", packed.resolved_at)
            else:
                bits = _platforms_of_bits(published.platforms, packed.supported)
                native = _platforms_of_bits(published.platforms, packed.native)
                self._answers[key] = Answer(None, "", packed.resolved_at, (bits, native))
            carried += 1
        self.version += carried
        return carried

    def due(self, now: float, refresh_seconds: float) -> list[str]:
        """Keys resolved more than `refresh_seconds` ago (or never here), oldest first."""
        horizon = now - refresh_seconds
        found = [
            (answer.resolved_at, key)
            for key, answer in self._answers.items()
            if answer.resolved_at < horizon or answer.platforms is None
        ]
        found.sort()
        return [key for _, key in found]

    def keys(self) -> Iterable[str]:
        return self._answers.keys()


def _platforms_of_bits(platforms: tuple[Platform, ...], bits: int) -> frozenset[Platform]:
    return frozenset(p for i, p in enumerate(platforms) if bits >> i & 1)


def fair_order(
    lanes: Iterable[tuple[str, str, bool, float]], unattributed: Iterable[str] = ()
) -> list[str]:
    """Keys in the order the parameter keeps them.

    Round-robin across namespaces: each namespace's keys by recency of use (in use first,
    then the most recently used), the k-th of every namespace before the (k+1)-th of any
    (keys of one rank by name); a key several namespaces use takes its best rank. `lanes`
    gives (key, namespace, in use, since) as extender.core.image_uses does; `unattributed`
    keys (carried over, named by no pod) come last.
    """
    by_namespace: dict[str, list[tuple[bool, float, str]]] = {}
    for key, namespace, in_use, since in lanes:
        entries = by_namespace.get(namespace)
        if entries is None:
            entries = by_namespace[namespace] = []
        entries.append((not in_use, -since, key))
    rank: dict[str, int] = {}
    for entries in by_namespace.values():
        entries.sort()
        for position, (_, _, key) in enumerate(entries):
            known = rank.get(key)
            if known is None or position < known:
                rank[key] = position
    ordered = [key for _, key in sorted((position, key) for key, position in rank.items())]
    ordered += [key for key in unattributed if key not in rank]
    return ordered


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


class Rendered(NamedTuple):
    """What one key renders to: its platforms as the policy reads them."""

    platforms: frozenset[Platform] | None
    """The exact set, evidence believed; None for a carried entry known by its bits alone."""
    resolved_at: float
    carried: tuple[frozenset[Platform], frozenset[Platform]] | None = None


@dataclass(frozen=True, slots=True)
class Published:
    """A rendered parameter spec and what it left out."""

    spec: dict[str, Any]
    images: int
    left_out: list[str]
    """Keys left out to stay under the byte bound, in the order they would have come."""
    left_out_by_namespace: dict[str, int] = field(default_factory=dict)
    """How many keys each namespace that uses them had left out."""
    bytes: int = 0
    """Size of the spec as JSON."""

    @property
    def evicted(self) -> int:
        return len(self.left_out)


def parameter_spec(
    entries: Iterable[tuple[str, Rendered]],
    rules: MutationRules,
    switches: Switches,
    max_bytes: int,
    *,
    workloads: Mapping[str, Mapping[str, frozenset[Platform]]] | None = None,
    namespaces_of: Callable[[str], Iterable[str]] | None = None,
    max_entries: int | None = None,
) -> Published:
    """The `ImagePlatforms` spec for `entries` (in the order they are kept: `fair_order`)
    under `rules`, at most `max_bytes` of JSON: past it the last keys are left out, and their
    pods are held (or left alone) as unknown ones are; each left out counts for every
    namespace `namespaces_of` names for it. `workloads` names, per workload
    (`<namespace>/<Kind>/<name>`), the image list its learned evidence was judged with and
    the set each image has for its pods (the policy applies it to a pod naming exactly those
    images); past `max_entries` listed keys the rest are left out too."""
    platforms = sorted(rules.platforms)[:MAX_PLATFORMS]
    layout = ValueLayout(len(platforms))
    bits = {p: 1 << i for i, p in enumerate(platforms)}
    entries = list(entries)
    workloads = workloads or {}
    sets: dict[frozenset[Platform], int] = {}
    for _, rendered in entries:
        if rendered.platforms is not None and rendered.platforms not in sets:
            sets[rendered.platforms] = 0
    for by_key in workloads.values():
        for found in by_key.values():
            sets.setdefault(found, 0)
    ordered_sets = sorted(sets, key=set_text) if layout.packs else []
    for index, found in enumerate(ordered_sets, start=1):
        sets[found] = index
    spec: dict[str, Any] = {
        "enforce": switches.enforce,
        "hold": switches.hold,
        "steering": switches.steering,
        "excludedNamespaces": sorted(switches.excluded_namespaces),
        "neverHold": sorted(switches.never_hold),
        "platforms": [_platform(p, bits[p], layout) for p in platforms],
        "architectures": sorted({p.architecture for p in platforms}),
        "oses": sorted({p.os for p in platforms}),
        "preferred": preferred_terms(rules.arch_preference),
        "taints": _taints(rules.taints),
        "layout": _layout(layout),
        "platformSets": [set_text(found) for found in ordered_sets],
        "images": {},
        "workloads": {},
    }
    frozen = frozenset(platforms)
    bases: dict[frozenset[Platform], int] = {}
    """A set's value without its time: most images share a handful of sets."""

    def value(rendered: Rendered, found: frozenset[Platform] | None) -> int:
        if found is None:
            runs_on, natively = rendered.carried or (frozenset(), frozenset())
            base = layout.pack(_bits(bits, runs_on), _bits(bits, natively), 0, 0.0)
        else:
            known = bases.get(found)
            if known is None:
                fits = fits_of(frozenset({found}), frozen, rules.rule, rules.aarch32)
                supported, native = _bits(bits, fits.supported), _bits(bits, fits.native)
                known = bases[found] = layout.pack(supported, native, sets.get(found, 0), 0.0)
            base = known
        resolved_at = rendered.resolved_at
        if resolved_at <= 0 or not time_shift:
            return base
        return base | min(max(int(resolved_at) - TIME_EPOCH, 0), latest) << time_shift

    time_shift = layout.time_shift if layout.packs else 0
    latest = (1 << TIME_BITS) - 1
    room = max_bytes - len(orjson.dumps(spec))
    room_for = max_entries if max_entries is not None else len(entries)
    table: dict[str, int] = spec["images"]
    left_out: list[str] = []
    for key, rendered in entries:
        if len(key) + 5 > room or len(table) >= room_for:
            left_out.append(key)  # no value is that short: left out without packing one
            continue
        packed = value(rendered, rendered.platforms)
        # `"key":value,` in JSON; a key with characters JSON escapes costs more.
        cost = len(key) + len(str(packed)) + 4
        if not (key.isascii() and key.isprintable()) or '"' in key or "\\" in key:
            cost = len(orjson.dumps(key)) + len(str(packed)) + 2
        if cost > room or len(table) >= room_for:
            left_out.append(key)
            continue
        room -= cost
        table[key] = packed
    at = dict(entries)
    written: dict[str, dict[str, int]] = spec["workloads"]
    for name in sorted(workloads):
        if not all(key in table for key in workloads[name]):
            continue  # a pod naming an image left out is held anyway
        values = {key: value(at[key], found) for key, found in sorted(workloads[name].items())}
        if not values:
            continue
        cost = len(orjson.dumps({name: values})) + 1
        if cost > room:
            continue  # the workload's pods get the cluster-wide answer: as a replica without it
        room -= cost
        written[name] = values
    by_namespace: dict[str, int] = {}
    if namespaces_of is not None:
        for key in left_out:
            for namespace in namespaces_of(key):
                by_namespace[namespace] = by_namespace.get(namespace, 0) + 1
    size = len(orjson.dumps(spec))
    return Published(spec, len(table), left_out, by_namespace, size)


def most_left_out(by_namespace: Mapping[str, int]) -> dict[str, int]:
    """The namespaces with the most keys left out, at most MAX_LEFT_OUT_NAMESPACES (the
    object's `status.leftOut`)."""
    ordered = sorted(by_namespace.items(), key=lambda item: (-item[1], item[0]))
    return dict(ordered[:MAX_LEFT_OUT_NAMESPACES])


def _bits(bits: Mapping[Platform, int], platforms: Iterable[Platform]) -> int:
    return sum(bits.get(p, 0) for p in platforms)


def preferred_terms(preference: dict[str, int] | Any) -> list[dict[str, Any]]:
    """The webhook's preferred terms (extender.core.mutation._prefer), best first."""
    return [
        {"architecture": arch, "weight": preferred_weight(score)}
        for arch, score in sorted(preference.items(), key=lambda item: (-item[1], item[0]))
        if score > 0
    ]


def _layout(layout: ValueLayout) -> dict[str, int]:
    if not layout.packs:
        return {"setShift": 0, "timeShift": 0, "timeEpoch": 0}
    return {"setShift": layout.set_shift, "timeShift": layout.time_shift, "timeEpoch": TIME_EPOCH}


def _platform(platform: Platform, bit: int, layout: ValueLayout) -> dict[str, Any]:
    out: dict[str, Any] = {
        "os": platform.os,
        "architecture": platform.architecture,
        "bit": bit,
        "nativeBit": bit << layout.native_shift,
    }
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
