"""Placement decisions: which candidate nodes a pod's images can run on, and how to score them.

Pure: takes resolved image platforms and node platforms, returns decisions and
the facts to explain them. No I/O, no logging; the caller logs and answers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import itemgetter
from types import MappingProxyType
from typing import Literal

from extender.core.node_facts import UNKNOWN_NODE, NodeFacts
from extender.core.platforms import MAX_SCORE, Platform, Resolved, Rule, Unknown, any_accepts
from extender.core.pods import annotation_preference
from extender.core.text import short_image

DEFAULT_ARCH_PREFERENCE: Mapping[str, int] = MappingProxyType({"arm64": MAX_SCORE, "amd64": 0})
"""policy.archPreference unless set: arm64 first, as it is about 20% cheaper."""

MISMATCH_PREFIX = "node(s) didn't match image platform"
UNKNOWN_PREFIX = "node(s) couldn't verify image platform"


@dataclass(frozen=True, slots=True)
class Policy:
    """The decision knobs, taken from settings (built once per app: rules.policy_of)."""

    failure_policy: Literal["fail-open", "fail-closed"] = "fail-open"
    matching: Literal["auto", "strict", "loose"] = "auto"
    """`auto` judges each node by its runtime's rule; the others force one rule on all."""
    arch_preference: Mapping[str, int] = field(default_factory=lambda: DEFAULT_ARCH_PREFERENCE)
    arm32_on_arm64: Literal["labelled", "pull-rule"] = "labelled"
    """Which arm64 nodes run a 32-bit Arm build their runtime pulls: those labelled
    node_facts.AARCH32_LABEL, or all (platforms.accepts)."""

    def rule_for(self, runtime_rule: Rule) -> Rule:
        """The rule a node whose runtime follows `runtime_rule` is judged by."""
        if self.matching == "auto":
            return runtime_rule
        return Rule.LOOSE if self.matching == "loose" else Rule.STRICT

    def aarch32_for(self, labelled: bool) -> bool:
        """Whether a node (`labelled` with node_facts.AARCH32_LABEL or not) runs 32-bit Arm code."""
        return labelled or self.arm32_on_arm64 == "pull-rule"


Outcome = Literal["pass", "reject", "doubt"]


@dataclass(frozen=True, slots=True, eq=False)
class Verdict:
    """The judgement of every node that shares one NodeFacts (platform and runtime rule).

    Nodes of one platform get the same verdict object, so a request costs one judgement per
    distinct platform and rule, and explanations come in one line per verdict. Compared and
    hashed by identity (eq=False): grouping 5,000 nodes must not hash 5,000 dataclasses.
    """

    outcome: Outcome
    """pass; reject (an image surely lacks the platform); doubt (archfit cannot tell)."""
    kept: bool
    """Whether the node stays a candidate: passes, or is doubted under fail-open."""
    platform: Platform | None = None
    rule: Rule = Rule.STRICT
    """The matching rule the node was judged by."""
    reason: str = ""
    """The clause for the scheduler's event: the same for every node of the verdict."""
    image: str | None = None
    """The first image that cannot run (reject) or is unknown (doubt); None otherwise."""
    image_platforms: frozenset[Platform] = frozenset()
    """The platforms the rejecting image has."""


@dataclass(frozen=True, slots=True)
class FilterDecision:
    passed: list[str]
    """Candidates that stay, in the scheduler's order."""
    groups: list[tuple[Verdict, list[str]]]
    """Every verdict but a plain pass, with its nodes: what explain logs, one line each."""

    @property
    def unresolvable(self) -> dict[str, str]:
        """Architecture mismatches: FailedAndUnresolvableNodes (preemption cannot help).
        Built when asked: the answer names them only when no node is left."""
        return self._reasons(lambda verdict: verdict.outcome == "reject")

    @property
    def failed(self) -> dict[str, str]:
        """Doubted nodes under fail-closed: FailedNodes (they may pass later)."""
        return self._reasons(lambda verdict: verdict.outcome == "doubt" and not verdict.kept)

    @property
    def rejected(self) -> int:
        return sum(len(nodes) for verdict, nodes in self.groups if verdict.outcome == "reject")

    @property
    def doubted(self) -> int:
        return sum(len(nodes) for verdict, nodes in self.groups if verdict.outcome == "doubt")

    @property
    def failed_count(self) -> int:
        """How many nodes `failed` holds, without building it."""
        return sum(len(nodes) for verdict, nodes in self.groups if not verdict.kept) - (
            self.rejected
        )

    def _reasons(self, chosen: Callable[[Verdict], bool]) -> dict[str, str]:
        # Every node of a verdict has its reason: dict.fromkeys builds the map in C.
        reasons: dict[str, str] = {}
        for verdict, nodes in self.groups:
            if chosen(verdict):
                reasons.update(dict.fromkeys(nodes, verdict.reason))
        return reasons


UNKNOWN_GROUP = 0
"""NodeGroups' group of names it does not know: their facts are node_facts.UNKNOWN_NODE."""


class NodeGroups:
    """A node index snapshot for grouping: name → a small integer group, one per facts object.

    Built once per snapshot (Verbs keeps the last), so that a NodeNames list in any order
    is grouped by one pass in C over its names (`Candidates.among`), with no Python step
    and no new object per node. Group UNKNOWN_GROUP holds the names it does not know.
    """

    __slots__ = ("every", "facts", "group_of")

    def __init__(self, nodes: Mapping[str, NodeFacts]) -> None:
        by_identity = {id(facts): facts for facts in nodes.values()}
        number = {key: group for group, key in enumerate(by_identity, start=UNKNOWN_GROUP + 1)}
        self.facts: tuple[NodeFacts, ...] = (UNKNOWN_NODE, *by_identity.values())
        """Each group's facts, by group number."""
        self.group_of: dict[str, int] = dict(
            zip(nodes, map(number.__getitem__, map(id, nodes.values())), strict=True)
        )
        """Node name → group number."""
        self.every: dict[int, NodeFacts] = dict(enumerate(self.facts))
        """Every group, unknown names' too: what a pod's groups are judged for once."""

    def groups(self, names: Sequence[str]) -> tuple[Sequence[int], bool]:
        """The group of each name, in order (itemgetter looks them all up in one C call),
        and whether the index knows every name."""
        if len(names) > 1:
            try:
                found: tuple[int, ...] = itemgetter(*names)(self.group_of)
                return found, True
            except KeyError:  # a name the index does not know (yet): the slower lookup
                pass
        keys = list(map(self.group_of.get, names, repeat(UNKNOWN_GROUP)))
        return keys, UNKNOWN_GROUP not in keys


class Candidates:
    """The nodes the scheduler offers: names[i] in group keys[i], and each group's facts.

    Nodes of one platform and runtime share one NodeFacts object (the node index and
    node_parts.FactsOf hand out the same one), so grouping is by identity: it spares hashing
    a Platform per node. NodeNames lists are grouped by the node index's NodeGroups, full
    Nodes by the id of their shared facts.
    """

    __slots__ = ("_distinct", "_table", "keys", "known", "names")

    def __init__(
        self,
        names: Sequence[str],
        keys: Sequence[int],
        table: Sequence[NodeFacts] | Mapping[int, NodeFacts],
        *,
        known: bool = True,
        distinct: dict[int, NodeFacts] | None = None,
    ) -> None:
        self.names = names
        self.keys = keys
        """The group of names[i]."""
        self.known = known
        """Whether every name has facts (no name in UNKNOWN_GROUP)."""
        self._table = table
        self._distinct = distinct

    @property
    def distinct(self) -> dict[int, NodeFacts]:
        """One facts object per group the names are in: worked out when first asked, as a
        call whose every group passes never needs it."""
        if self._distinct is None:
            table = self._table
            self._distinct = {key: table[key] for key in set(self.keys)}
        return self._distinct

    @classmethod
    def of(cls, names: Sequence[str], facts: Sequence[NodeFacts]) -> Candidates:
        if len(names) != len(facts):
            raise ValueError(f"{len(names)} names but {len(facts)} facts")
        keys = list(map(id, facts))
        distinct = dict(zip(keys, facts, strict=True))  # in the names' order
        return cls(names, keys, distinct, distinct=distinct)

    @classmethod
    def among(cls, names: Sequence[str], groups: NodeGroups) -> Candidates:
        """The candidates `names`, grouped by the node index snapshot `groups`."""
        keys, known = groups.groups(names)
        return cls(names, keys, groups.facts, known=known)

    def every_name(self) -> list[str]:
        """All the names: the candidates' own list when it is one (not a copy: nobody
        changes it), which lets the answer echo the request's bytes
        (scheduler_api.render_filter)."""
        names = self.names
        return names if isinstance(names, list) else list(names)

    def names_in(self, groups: Collection[int]) -> list[str]:
        """The names of the nodes in `groups`, in the scheduler's order, picked in C
        (compress over a map of the keys), with no Python step per node; all of them as
        `every_name`."""
        if len(groups) == len(self.distinct):
            return self.every_name()
        return list(compress(self.names, map(set(groups).__contains__, self.keys)))


def mismatch_reason(
    image: str, node_platform: Platform, platforms: frozenset[Platform] | None = None
) -> str:
    """The same text for every node of a platform, so the scheduler groups them. An image
    with no runnable platform at all (an OCI artifact such as a Helm chart, or an index of
    attestations only) is said to be that, not to lack this node's platform."""
    if platforms is not None and not platforms:
        return f"{MISMATCH_PREFIX}: {short_image(image)} is not a runnable image"
    return f"{MISMATCH_PREFIX}: {short_image(image)} has no {node_platform}"


def unknown_reason(image: str, found: Resolved | None) -> str:
    """The fail-closed reason: which image, and why it is unknown (the lookup's own words)."""
    why = found.reason if isinstance(found, Unknown) else "not looked up"
    return f"{UNKNOWN_PREFIX}: platforms of {short_image(image)} are unknown: {short_image(why)}"


UNKNOWN_NODE_REASON = f"{UNKNOWN_PREFIX}: node has no kubernetes.io/arch label"


def decide_filter(
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    candidates: Candidates,
    policy: Policy,
    verdicts: Mapping[int, Verdict] | None = None,
) -> FilterDecision:
    """Split the candidates by verdict: `verdicts` by group when judged already (`judge`,
    for every group the candidates have, or more), else judged here.

    A node passes only if every image has an entry it accepts. A known mismatch
    outranks an unknown: one image that surely cannot run is enough to reject.
    Doubted nodes pass under fail-open.

    Clusters have a handful of platforms and runtimes and many nodes: each distinct
    NodeFacts is judged once, and names are split in one pass with no per-node objects.
    """
    if verdicts is None:
        verdicts = judge_groups(images, resolved, candidates.distinct, policy)
    elif candidates.known and all(
        v.outcome == "pass" for key, v in verdicts.items() if key != UNKNOWN_GROUP
    ):  # every group of the index passes (most multi-arch pods): no need to see which
        return FilterDecision(candidates.every_name(), [])
    else:
        verdicts = {key: verdicts[key] for key in candidates.distinct}
    if all(v.outcome == "pass" for v in verdicts.values()):
        return FilterDecision(candidates.names_in(verdicts), [])
    passed = candidates.names_in([key for key, v in verdicts.items() if v.kept])
    keys_of: dict[Verdict, set[int]] = {}
    for key, verdict in verdicts.items():
        if verdict.outcome != "pass":
            keys_of.setdefault(verdict, set()).add(key)
    groups = [(verdict, candidates.names_in(keys)) for verdict, keys in keys_of.items()]
    return FilterDecision(passed, groups)


def judge_groups(
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    distinct: Mapping[int, NodeFacts],
    policy: Policy,
) -> dict[int, Verdict]:
    """One verdict per group of `distinct` (group → its facts), by group."""
    known = [(image, r) for image in images if isinstance(r := resolved.get(image), frozenset)]
    # An image missing from `resolved` is as unknown as one that timed out.
    unknown = next((i for i in images if not isinstance(resolved.get(i), frozenset)), None)
    doubt = unknown_reason(unknown, resolved.get(unknown)) if unknown is not None else ""
    fail_open = policy.failure_policy == "fail-open"
    by_value: dict[NodeFacts, Verdict] = {}
    verdicts: dict[int, Verdict] = {}
    for key, node in distinct.items():
        # Equal facts that are distinct objects (an index rebuilt mid-request) share one.
        verdict = by_value.get(node)
        if verdict is None:
            verdict = by_value[node] = _judge(node, known, unknown, doubt, policy, fail_open)
        verdicts[key] = verdict
    return verdicts


def _judge(
    node: NodeFacts,
    known: Sequence[tuple[str, frozenset[Platform]]],
    unknown: str | None,
    doubt: str,
    policy: Policy,
    fail_open: bool,
) -> Verdict:
    platform, runtime_rule, labelled = node
    if platform is None:
        return Verdict("doubt", fail_open, None, runtime_rule, UNKNOWN_NODE_REASON)
    rule, aarch32 = policy.rule_for(runtime_rule), policy.aarch32_for(labelled)
    for image, platforms in known:
        if not any_accepts(platform, platforms, rule=rule, aarch32=aarch32):
            reason = mismatch_reason(image, platform, platforms)
            return Verdict("reject", False, platform, rule, reason, image, platforms)
    if unknown is not None:
        return Verdict("doubt", fail_open, platform, rule, doubt, unknown)
    return Verdict("pass", True, platform, rule)


@dataclass(frozen=True, slots=True)
class ScoreDecision:
    scores: dict[str, int]
    """Hosts with a score above 0. kube-scheduler (v1.36 pkg/scheduler/schedule_one.go,
    prioritizeNodes) adds an extender's scores only for the hosts it returns, so leaving out
    the zeros changes no total and spares both sides encoding and decoding them. It also
    gives only returned hosts a random tie-breaker, so a pod archfit does not score has its
    ties settled exactly as with no extender."""
    multi_arch: bool
    """Whether the pod runs on two or more candidate architectures (and so got a preference)."""
    architectures: tuple[str, ...]
    """Candidate architectures the pod runs on."""


def decide_scores(
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    candidates: Candidates,
    policy: Policy,
    prefer_arch: Sequence[str] = (),
    runnable: Mapping[int, str] | None = None,
) -> ScoreDecision:
    """Score nodes by architecture preference, only for pods that run on ≥2 candidate archs.

    `runnable` is `native_architectures` for every group the candidates have (or more)
    when worked out already; else it is worked out here.

    Every other pod gets no scores at all, so archfit adds no bias: an image with an
    unknown platform, a single-arch pod, or a pod without images.
    """
    if not images or not all(isinstance(resolved.get(image), frozenset) for image in images):
        return ScoreDecision({}, False, ())
    if runnable is None:
        runnable = native_architectures(images, resolved, candidates.distinct, policy)
    else:
        runnable = {key: runnable[key] for key in candidates.distinct if key in runnable}
    arches = tuple(sorted(set(runnable.values())))
    if len(arches) < 2:
        return ScoreDecision({}, False, arches)
    preference = annotation_preference(prefer_arch) if prefer_arch else policy.arch_preference
    score_of = {key: min(MAX_SCORE, max(0, preference.get(a, 0))) for key, a in runnable.items()}
    scores: dict[str, int] = {}
    for key, score in score_of.items():
        if score:  # hosts of a group share its score: dict.fromkeys builds them in C
            scores.update(dict.fromkeys(candidates.names_in([key]), score))
    return ScoreDecision(scores, True, arches)


def native_architectures(
    images: Sequence[str],
    resolved: Mapping[str, Resolved],
    distinct: Mapping[int, NodeFacts],
    policy: Policy,
) -> dict[int, str]:
    """Group → its architecture, for the groups of `distinct` whose nodes run every image
    natively: a 32-bit Arm build lets a pod onto an arm64 node (decide_filter), but is
    never a reason to prefer arm64. Images not resolved to platforms run nowhere here."""
    known = [r for image in images if isinstance(r := resolved.get(image), frozenset)]
    if len(known) != len(images):
        return {}
    runnable: dict[int, str] = {}
    for key, (platform, runtime_rule, _) in distinct.items():
        rule = policy.rule_for(runtime_rule)
        if platform is not None and all(any_accepts(platform, p, rule=rule) for p in known):
            runnable[key] = platform.architecture
    return runnable
