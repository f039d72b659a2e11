"""The capacity view: which platforms this cluster can offer a pod (its nodes, the Karpenter
NodePools it may launch from, what the operator declares for autoscalers archfit cannot read),
and whether a decided pod's platforms meet any of them.

Pure. It explains and never decides: a pod whose platforms meet no capacity is told so (an
Event, a metric, an audit line), and keeps every constraint it has (docs/operations.md,
"Capacity").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from extender.core.mutation import allowed_by_pod
from extender.core.platforms import (
    ARCH_LABEL,
    OS_LABEL,
    Platform,
    Resolved,
    Rule,
    any_accepts,
    node_platform,
    normalize,
)
from extender.core.pods import read_mapping_at, read_placement
from extender.core.text import short_image

KARPENTER_ARCHITECTURES = ("amd64", "arm64")
"""What a NodePool that leaves `kubernetes.io/arch` open may launch: Karpenter's well-known
architectures (sigs.k8s.io/karpenter pkg/apis/v1/labels.go, ArchitectureAmd64/Arm64), which
its cloud providers' instance types carry."""
KARPENTER_OSES = ("linux", "windows")
"""What a NodePool that leaves `kubernetes.io/os` open may launch: the operating systems its
providers' instance types name (corev1.Linux, corev1.Windows; the kwok provider offers both)."""
_KARPENTER_ALIASES = {"beta.kubernetes.io/arch": ARCH_LABEL, "beta.kubernetes.io/os": OS_LABEL}
"""Keys Karpenter reads as the stable ones (its NormalizedLabels)."""
_MAX_NAMED_IMAGES = 3
_MAX_MESSAGE = 1024
"""kube-apiserver keeps an Event's message whole up to this; archfit's stay under it."""


@dataclass(frozen=True, slots=True)
class NodePoolOffer:
    """A Karpenter NodePool and the platforms its requirements let it launch."""

    name: str
    platforms: frozenset[Platform]

    def __str__(self) -> str:
        """`graviton (arm64)`: its name and what it launches, as the Event names it."""
        return f"{self.name} ({_labels(self.platforms) or 'nothing'})"


class _Values(NamedTuple):
    """The values a requirement leaves a key: `values`, or every value but them."""

    complement: bool
    values: frozenset[str]

    def narrowed(self, other: _Values) -> _Values:
        """Both at once, as Karpenter intersects requirements on one key (requirement.go)."""
        if self.complement and other.complement:
            return _Values(True, self.values | other.values)
        if self.complement:
            return _Values(False, other.values - self.values)
        if other.complement:
            return _Values(False, self.values - other.values)
        return _Values(False, self.values & other.values)

    def within(self, known: Iterable[str]) -> frozenset[str]:
        return frozenset(known) - self.values if self.complement else self.values


_ANY = _Values(True, frozenset())


def node_pool_offer(
    name: str, requirements: Sequence[Mapping[str, Any]], labels: Mapping[str, Any]
) -> NodePoolOffer:
    """What a NodePool's `spec.template` lets Karpenter launch: its requirements on
    `kubernetes.io/arch` and `kubernetes.io/os` (and their beta aliases) ANDed, as Karpenter
    does, with the template's labels counting as `In [value]`. A key left open takes
    Karpenter's well-known values; `Gt`, `Lt` and `DoesNotExist` leave it no value (every
    node carries both labels, and neither is a number)."""
    wanted = {ARCH_LABEL: _ANY, OS_LABEL: _ANY}
    for requirement in requirements:
        key = _KARPENTER_ALIASES.get(str(requirement.get("key")), str(requirement.get("key")))
        if key in wanted:
            wanted[key] = wanted[key].narrowed(_requirement_values(requirement))
    for key, value in labels.items():
        key = _KARPENTER_ALIASES.get(str(key), str(key))
        if key in wanted:
            wanted[key] = wanted[key].narrowed(_Values(False, frozenset({str(value)})))
    arches = wanted[ARCH_LABEL].within(KARPENTER_ARCHITECTURES)
    oses = wanted[OS_LABEL].within(KARPENTER_OSES)
    return NodePoolOffer(name, frozenset(normalize(o, a) for o in oses for a in arches))


def node_pool_offer_of(obj: Mapping[str, Any]) -> NodePoolOffer:
    """node_pool_offer of a NodePool object as the API serves it (camelCase JSON)."""
    template = read_mapping_at(obj, "spec.template")
    requirements = read_mapping_at(template, "spec").get("requirements")
    return node_pool_offer(
        str(read_mapping_at(obj, "metadata").get("name") or ""),
        [r for r in requirements if isinstance(r, Mapping)]
        if isinstance(requirements, list)
        else [],
        read_mapping_at(template, "metadata.labels"),
    )


def _requirement_values(requirement: Mapping[str, Any]) -> _Values:
    operator = requirement.get("operator")
    raw = requirement.get("values")
    values = frozenset(str(v) for v in raw) if isinstance(raw, list) else frozenset()
    if operator == "In":
        return _Values(False, values)
    if operator == "NotIn":
        return _Values(True, values)
    if operator == "Exists":
        return _ANY
    return _Values(False, frozenset())  # DoesNotExist, Gt, Lt, Gte, Lte: no arch or os value


class Capacity(NamedTuple):
    """What this cluster can offer a pod now."""

    nodes: frozenset[Platform]
    """The platforms of the nodes the node index knows."""
    pools: tuple[NodePoolOffer, ...] = ()
    """Karpenter's NodePools, by name."""
    declared: frozenset[Platform] = frozenset()
    """What the operator declares (`capacity.declared`): node groups archfit cannot read, such
    as Cluster Autoscaler's scaled to zero."""

    @property
    def platforms(self) -> frozenset[Platform]:
        return self.nodes.union(self.declared, *(pool.platforms for pool in self.pools))

    def described(self) -> str:
        """What there is, in the Event's words: `nodes: arm64; NodePools: graviton (arm64)`."""
        parts = []
        if self.nodes:
            parts.append(f"nodes: {_labels(self.nodes)}")
        if self.pools:
            parts.append(f"NodePools: {', '.join(map(str, self.pools))}")
        if self.declared:
            parts.append(f"declared (capacity.declared): {_labels(self.declared)}")
        return "; ".join(parts) or "the cluster has no node, no NodePool and nothing declared"


def cluster_capacity(
    nodes: Iterable[Mapping[str, Any]],
    node_pools: Iterable[Mapping[str, Any]],
    declared: frozenset[Platform] = frozenset(),
) -> Capacity:
    """The Capacity of Node and NodePool objects as the API serves them."""
    platforms = set()
    for node in nodes:
        labels = read_mapping_at(node, "metadata.labels")
        platform = node_platform(labels, read_mapping_at(node, "status.nodeInfo"))
        if platform is not None:
            platforms.add(platform)
    offers = sorted((node_pool_offer_of(pool) for pool in node_pools), key=lambda o: o.name)
    return Capacity(frozenset(platforms), tuple(offers), declared)


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A pod (or a workload's pod template) whose platforms meet none of the capacity."""

    needs: tuple[Platform, ...]
    """The platforms it could run on: every image runs there and its constraints admit them."""
    images: tuple[str, ...]
    """The images that run on none of the capacity ((): it is the pod's own constraints)."""
    message: str
    """What the Event and the audit say."""


def shortfall(
    spec: Mapping[str, Any],
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    capacity: Capacity,
    *,
    rule: Rule = Rule.LOOSE,
    aarch32: bool = False,
) -> Shortfall | None:
    """Whether a pod with this spec (its nodeSelector and required node affinity, as the
    webhook, the releaser or the admission policy left them) and these images can run on
    some of the capacity; None when it can, or when that cannot be told: an image whose
    platforms are unknown, or a pod that runs nowhere at all whatever the capacity (its own
    constraints and images share no platform: the webhook's warning says so).

    `rule` and `aarch32` match image entries as the webhook's constraint does (the most
    permissive rule under `policy.matching: auto`), so a platform any node could run is never
    called missing. Raises ShapeError (an InputError) for a spec the API would refuse.
    """
    known: list[tuple[str, frozenset[Platform]]] = []
    for image in images:
        found = resolved.get(image)
        if not isinstance(found, frozenset):
            return None
        known.append((image, found))
    if not known:
        return None

    def runs(platform: Platform) -> bool:
        return all(any_accepts(platform, ps, rule=rule, aarch32=aarch32) for _, ps in known)

    offered = capacity.platforms
    placement = read_placement(spec)
    if any(runs(p) for p in allowed_by_pod(placement, offered)):
        return None
    # Where it could run, were there capacity: the images' own platforms, as nodes name them.
    candidates = {normalize(p.os, p.architecture) for _, ps in known for p in ps}
    needs = tuple(sorted(p for p in allowed_by_pod(placement, candidates) if runs(p)))
    if not needs:
        return None
    lacking = tuple(
        image
        for image, ps in known
        if not any(any_accepts(p, ps, rule=rule, aarch32=aarch32) for p in offered)
    )
    return Shortfall(needs, lacking, _message(needs, lacking, capacity))


def _message(needs: Sequence[Platform], lacking: Sequence[str], capacity: Capacity) -> str:
    named = [short_image(image) for image in lacking[:_MAX_NAMED_IMAGES]]
    if len(lacking) > len(named):
        named.append(f"{len(lacking) - len(named)} more")
    whom = ", ".join(named) if named else "this pod's nodeSelector and node affinity"
    wanted = " or ".join(str(p) for p in needs)
    text = f"no node or NodePool offers {wanted} for {whom}; {capacity.described()}"
    return short_image(text, _MAX_MESSAGE)


def _labels(platforms: Iterable[Platform]) -> str:
    """Platforms as the Event names them: `arm64` on Linux, `windows/amd64` elsewhere."""
    return ", ".join(
        sorted(p.architecture if p.os == "linux" else f"{p.os}/{p.architecture}" for p in platforms)
    )
