"""Placement decisions: which candidate nodes a pod's images can run on, and how to score them.

Pure: takes resolved image platforms and node platforms, returns decisions and
the facts to explain them. No I/O, no logging; the caller logs and answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from extender.platforms import Platform, Rule, any_accepts

# kube-scheduler cuts the event message at 1024 bytes and groups identical
# reasons; an image name longer than this is cut so the clause stays short.
_MAX_IMAGE_IN_REASON = 120

MISMATCH_PREFIX = "node(s) didn't match image platform"
UNKNOWN_PREFIX = "node(s) couldn't verify image platform"


@dataclass(frozen=True, slots=True)
class Unknown:
    """An image whose platforms could not be learned in time, and why."""

    reason: str


Resolved = frozenset[Platform] | Unknown
"""What a request knows of one image: its platforms, or that it does not know."""


class Candidate(NamedTuple):
    """A node the scheduler offers, with its platform (None when nothing says)."""

    name: str
    platform: Platform | None
    runtime_rule: Rule = Rule.STRICT
    """The rule of the runtime the node reports (extender.runtimes); strict when unknown."""


@dataclass(frozen=True, slots=True)
class Policy:
    """The decision knobs, taken from settings."""

    failure_policy: Literal["fail-open", "fail-closed"] = "fail-open"
    matching: Literal["auto", "strict", "loose"] = "auto"
    """`auto` judges each node by its runtime's rule; the others force one rule on all."""
    arch_preference: Mapping[str, int] = field(default_factory=lambda: {"arm64": 10, "amd64": 0})

    def rule_for(self, node: Candidate) -> Rule:
        """The rule `node` is judged by."""
        if self.matching == "auto":
            return node.runtime_rule
        return Rule.LOOSE if self.matching == "loose" else Rule.STRICT


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one node cannot run the pod: the first image that has no entry for it."""

    node: str
    node_platform: Platform
    image: str
    image_platforms: frozenset[Platform]
    reason: str
    rule: Rule
    """The matching rule the node was judged by."""


@dataclass(frozen=True, slots=True)
class Doubt:
    """A node archfit could not judge (unknown image or node platform), and why."""

    node: str
    reason: str
    image: str | None
    """The unknown image, or None when the node's own platform is unknown."""


@dataclass(slots=True)
class FilterDecision:
    passed: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    """Architecture mismatches: FailedAndUnresolvableNodes (preemption cannot help)."""
    doubted: list[Doubt] = field(default_factory=list)
    """Unknowns: passed under fail-open, FailedNodes under fail-closed."""

    @property
    def unresolvable(self) -> dict[str, str]:
        return {r.node: r.reason for r in self.rejected}

    def failed(self, policy: Policy) -> dict[str, str]:
        if policy.failure_policy == "fail-open":
            return {}
        return {d.node: d.reason for d in self.doubted}


def mismatch_reason(image: str, node_platform: Platform) -> str:
    """The same text for every node of a platform, so the scheduler groups them."""
    return f"{MISMATCH_PREFIX}: {short_image(image)} has no {node_platform}"


def unknown_reason(image: str) -> str:
    return f"{UNKNOWN_PREFIX}: platforms of {short_image(image)} are unknown"


UNKNOWN_NODE_REASON = f"{UNKNOWN_PREFIX}: node has no kubernetes.io/arch label"


def decide_filter(
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    candidates: Sequence[Candidate],
    policy: Policy,
) -> FilterDecision:
    """Split candidates into passed, rejected (mismatch) and doubted (unknown).

    A node passes only if every image has an entry it accepts. A known mismatch
    outranks an unknown: one image that surely cannot run is enough to reject.
    Doubted nodes pass under fail-open.
    """
    decision = FilterDecision()
    known = [(image, r) for image in images if isinstance(r := resolved.get(image), frozenset)]
    # An image missing from `resolved` is as unknown as one that timed out.
    unknown = [image for image in images if not isinstance(resolved.get(image), frozenset)]
    fail_open = policy.failure_policy == "fail-open"
    # Clusters have a handful of platforms and runtimes and many nodes: judge each
    # (platform, rule) pair once.
    mismatches: dict[tuple[Platform, Rule], tuple[str, frozenset[Platform], str] | None] = {}
    for node in candidates:
        platform = node.platform
        if platform is None:
            decision.doubted.append(Doubt(node.name, UNKNOWN_NODE_REASON, None))
            if fail_open:
                decision.passed.append(node.name)
            continue
        rule = policy.rule_for(node)
        key = (platform, rule)
        if key not in mismatches:
            mismatches[key] = _first_mismatch(known, platform, rule)
        mismatch = mismatches[key]
        if mismatch is not None:
            image, platforms, reason = mismatch
            decision.rejected.append(Rejection(node.name, platform, image, platforms, reason, rule))
            continue
        if unknown:
            decision.doubted.append(Doubt(node.name, unknown_reason(unknown[0]), unknown[0]))
            if not fail_open:
                continue
        decision.passed.append(node.name)
    return decision


def _first_mismatch(
    known: Sequence[tuple[str, frozenset[Platform]]], node: Platform, rule: Rule
) -> tuple[str, frozenset[Platform], str] | None:
    """The first image with no entry for `node`, its platforms and the reason; or None."""
    for image, platforms in known:
        if not any_accepts(node, platforms, rule=rule):
            return image, platforms, mismatch_reason(image, node)
    return None


@dataclass(frozen=True, slots=True)
class ScoreDecision:
    scores: dict[str, int]
    multi_arch: bool
    """Whether the pod runs on two or more candidate architectures (and so got a preference)."""
    architectures: tuple[str, ...]
    """Candidate architectures the pod runs on."""


def decide_scores(
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    candidates: Sequence[Candidate],
    policy: Policy,
    prefer_arch: Sequence[str] = (),
) -> ScoreDecision:
    """Score nodes by architecture preference, only for pods that run on ≥2 candidate archs.

    Every other pod gets equal (zero) scores, so archfit adds no bias: an image
    with an unknown platform, a single-arch pod, or a pod without images.
    """
    flat = {c.name: 0 for c in candidates}
    known = [r for image in images if isinstance(r := resolved.get(image), frozenset)]
    if not images or len(known) != len(images):
        return ScoreDecision(flat, False, ())
    judged = {c.name: (c.platform, policy.rule_for(c)) for c in candidates}
    runnable = {
        (platform, rule)
        for platform, rule in set(judged.values())
        if platform is not None
        and all(any_accepts(platform, platforms, rule=rule) for platforms in known)
    }
    arches = tuple(sorted({platform.architecture for platform, _ in runnable}))
    if len(arches) < 2:
        return ScoreDecision(flat, False, arches)
    preference = annotation_preference(prefer_arch) if prefer_arch else policy.arch_preference
    scores = {
        name: preference.get(platform.architecture, 0)
        if platform is not None and (platform, rule) in runnable
        else 0
        for name, (platform, rule) in judged.items()
    }
    return ScoreDecision(scores, True, arches)


def annotation_preference(order: Sequence[str]) -> dict[str, int]:
    """`amd64,arm64` → {amd64: 10, arm64: 5}: first is best, unlisted get 0."""
    step = 10 // len(order)
    return {arch: 10 - i * step for i, arch in enumerate(order)}


def short_image(image: str, limit: int = _MAX_IMAGE_IN_REASON) -> str:
    """The image name made printable and cut to `limit` characters, for reasons and warnings."""
    printable = "".join(ch if ch.isprintable() else "?" for ch in image)
    if len(printable) <= limit:
        return printable
    return printable[: limit - 3] + "..."
