"""The extender verbs, filter and prioritize: one skeleton, and what each verb supplies.

`Verbs.serve` is decode → resolve → decide → explain → count → render for both. Decisions
are extender.placement's and the wire types extender.scheduler_api's; `explain` only logs
and Metrics.extender_call counts. What a call builds is kept for the next while its inputs
are the very same objects: kube-scheduler offers pod after pod the same nodes, and a
Deployment's pods share images (docs/architecture.md, "Data flow of one filter call").
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import structlog
from aiohttp import web

from extender import explain
from extender.config import Settings
from extender.errors import SetupError
from extender.listener import read_body
from extender.logs import bind_request
from extender.metrics import Metrics, tally_request_lookups
from extender.node_parts import FactsOf
from extender.placement import (
    Candidates,
    FilterDecision,
    NodeGroups,
    Policy,
    ScoreDecision,
    decide_filter,
    decide_scores,
)
from extender.platforms import Resolved, SharedPlatforms, SharedResolved
from extender.pods import PodFacts, facts, skip_reason
from extender.rules import policy_of
from extender.runtimes import NodeFacts
from extender.scheduler_api import (
    ExtenderArgs,
    NameLists,
    names_size,
    parse_args,
    render_filter,
    render_priorities,
)
from extender.services import Services, steered_facts
from extender.ttlmap import TTLMap

log = structlog.get_logger("archfit")

NO_NODE_INDEX = (
    "archfit got NodeNames (nodeCacheCapable: true) but has no node index: "
    "enable kubernetes.nodeIndex with API access, or set nodeCacheCapable: false"
)
_CANDIDATES_SECONDS = 60.0
"""How long an unused Candidates is kept; a new node index snapshot makes it unreachable."""
_DECISIONS_SECONDS = 60.0
_MIB = 1024 * 1024
_NAME_LISTS_BYTES = 2 * _MIB
_CANDIDATES_BYTES = 2 * _MIB
_DECISIONS_BYTES = 4 * _MIB
"""What the reuse caches may hold (scheduler_api.names_size for the names each keeps alive):
kube-scheduler sends a new order on most calls, so a count of entries would let 5,000-node
lists take a hundred times the memory of 50-node ones (docs/benchmarks.md, goal 4)."""


class NoNodeIndex(SetupError):
    """NodeNames arrived but archfit list-watches no Nodes."""


def json_answer(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


@dataclass(frozen=True, slots=True)
class _Call:
    """One verb call, decoded: the wire args, the pod's facts and each candidate's facts."""

    args: ExtenderArgs
    pod: PodFacts
    skip: str | None
    """Why the pod is not examined (annotation, excluded_namespace, no_images), or None."""
    candidates: Candidates
    """The offered nodes and what archfit knows of each; no facts when the pod is skipped."""
    started: float
    """`time.perf_counter()` when the request arrived."""
    deadline: float
    """`time.monotonic()` by which registry lookups must be done."""
    dry_run: bool
    debug: bool
    """Whether per-node debug lines are wanted (explain)."""

    @property
    def count(self) -> int:
        """How many nodes the scheduler offered."""
        return len(self.args.names)

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def elapsed_ms(self) -> float:
        return round(self.elapsed() * 1000, 3)


class _Verb(Protocol):
    """What differs between filter and prioritize; `Verbs.serve` is the skeleton they share."""

    name: str

    def decide(self, call: _Call, resolved: Mapping[str, Resolved], policy: Policy) -> Any: ...

    def explain(
        self,
        call: _Call,
        decision: Any,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        lookups: Mapping[str, int],
    ) -> None: ...

    def count(
        self,
        metrics: Metrics,
        call: _Call,
        decision: Any,
        resolved: Mapping[str, Resolved],
        policy: Policy,
    ) -> None: ...

    def render(self, call: _Call, decision: Any) -> bytes: ...

    def neutral(self, call: _Call) -> bytes:
        """The answer that changes nothing: on skip, dry-run and archfit's own errors."""
        ...


class _Filter:
    name = "filter"

    def decide(
        self, call: _Call, resolved: Mapping[str, Resolved], policy: Policy
    ) -> FilterDecision:
        return decide_filter(call.pod.images, resolved, call.candidates, policy)

    def explain(
        self,
        call: _Call,
        decision: FilterDecision,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        lookups: Mapping[str, int],
    ) -> None:
        explain.filtered(call, decision, resolved, policy, lookups)

    def count(
        self,
        metrics: Metrics,
        call: _Call,
        decision: FilterDecision,
        resolved: Mapping[str, Resolved],
        policy: Policy,
    ) -> None:
        metrics.extender_call(
            self.name,
            "ok",
            call.elapsed(),
            nodes=(len(decision.passed), decision.rejected, len(decision.failed)),
            unknown_images=len(explain.unknown_images(resolved)),
            failure_policy=policy.failure_policy,
            dry_run=call.dry_run,
        )

    def render(self, call: _Call, decision: FilterDecision) -> bytes:
        # kube-scheduler gives every node an extender drops without naming the status
        # UnschedulableAndUnresolvable (framework NewDefaultNodeToStatus), the very status
        # it gives FailedAndUnresolvableNodes (schedule_one.go findNodesThatPassExtenders).
        # The reasons only reach the pod's FailedScheduling event when no node is left; while
        # some pass, naming the rest would only cost both sides encoding and decoding them.
        # The logs name every rejected node either way (explain.filtered).
        unresolvable = decision.unresolvable if not decision.passed else {}
        return render_filter(call.args, decision.passed, decision.failed, unresolvable)

    def neutral(self, call: _Call) -> bytes:
        # Archfit's own failure must never reject a node: pass everything.
        return render_filter(call.args, call.args.names, {}, {})


class _Prioritize:
    name = "prioritize"

    def decide(
        self, call: _Call, resolved: Mapping[str, Resolved], policy: Policy
    ) -> ScoreDecision:
        pod = call.pod
        return decide_scores(pod.images, resolved, call.candidates, policy, pod.prefer_arch)

    def explain(
        self,
        call: _Call,
        decision: ScoreDecision,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        lookups: Mapping[str, int],
    ) -> None:
        explain.scored(call, call.pod, decision)

    def count(
        self,
        metrics: Metrics,
        call: _Call,
        decision: ScoreDecision,
        resolved: Mapping[str, Resolved],
        policy: Policy,
    ) -> None:
        metrics.extender_call(self.name, "ok", call.elapsed())

    def render(self, call: _Call, decision: ScoreDecision) -> bytes:
        return render_priorities(decision.scores)

    def neutral(self, call: _Call) -> bytes:
        # No scores at all: kube-scheduler counts a host the list leaves out as 0.
        return render_priorities({})


FILTER = _Filter()
PRIORITIZE = _Prioritize()


class Decided(NamedTuple):
    """What `Verbs._decided` keeps for one question, under `decision_key`."""

    candidates: Candidates
    """The nodes it was decided for: held, so that their id stays theirs."""
    platforms: tuple[SharedPlatforms, ...]
    """Each image's platforms, in the pod's order: held for the same reason."""
    decision: Any
    answer: bytes | None
    """The rendered answer; None in dry-run, which answers neutrally."""

    def answers(self, candidates: Candidates, platforms: tuple[SharedPlatforms, ...]) -> bool:
        """Whether this entry was decided from these very objects (not only equal ones)."""
        return self.candidates is candidates and all(
            a is b for a, b in zip(self.platforms, platforms, strict=True)
        )


DecisionKey = tuple[Any, ...]


def decision_key(
    verb: str,
    candidates: Candidates,
    images: tuple[str, ...],
    platforms: tuple[SharedPlatforms, ...],
    prefer_arch: tuple[str, ...],
) -> DecisionKey:
    """A question by the identities of its answers: only SharedPlatforms (one object per
    value, extender.shared), so equal answers are one key. A copy would never be found again."""
    return (verb, id(candidates), images, *map(id, platforms), *prefer_arch)


_UNEXAMINED = Candidates.of((), ())


class Verbs:
    """The verbs of one app and what they build once and keep: the Policy, shared
    NodeFacts (full-Node requests), NodeNames lists, Candidates and decisions."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.policy = policy_of(settings)
        self.dry_run = settings.policy.mode == "dry-run"
        self.debug = settings.logging.level == "debug"
        self.facts_of = FactsOf()
        """Shares NodeFacts between full-Node requests, so their nodes compare by identity."""
        self.name_lists = NameLists(_NAME_LISTS_BYTES)
        self._groups: tuple[object, NodeGroups] = ({}, NodeGroups({}))
        """The last node index snapshot and its NodeGroups."""
        self._candidates: TTLMap[tuple[int, int], tuple[object, object, Candidates]]
        self._candidates = TTLMap(1024, max_bytes=_CANDIDATES_BYTES)
        self._decisions: TTLMap[DecisionKey, Decided]
        self._decisions = TTLMap(1024, max_bytes=_DECISIONS_BYTES)
        self.decisions_reused = 0
        """Calls answered with a decision kept from an earlier call (tests read it)."""

    async def serve(self, request: web.Request, verb: _Verb, services: Services) -> web.Response:
        """decode → resolve → decide → explain → count → render, the same for every verb."""
        metrics = self.metrics
        call = await self._decode(request, verb.name, services)
        if call.skip is not None:
            explain.skipped(verb.name, call, call.skip)
            metrics.extender_call(verb.name, "skipped", skipped=call.skip)
            return json_answer(verb.neutral(call))
        policy = self.policy
        lookups = tally_request_lookups()
        try:
            resolved = await services.resolution.resolve(
                call.pod.images, call.pod.pull, call.remaining()
            )
            decision, answer = self._decided(verb, call, resolved)
        except Exception:
            log.exception(f"{verb.name}_internal_error", candidates=call.count)
            metrics.extender_call(verb.name, "internal_error")
            return json_answer(verb.neutral(call))
        verb.explain(call, decision, resolved, policy, lookups)
        verb.count(metrics, call, decision, resolved, policy)
        return json_answer(verb.neutral(call) if answer is None else answer)

    async def _decode(self, request: web.Request, verb: str, services: Services) -> _Call:
        """Parse the body, bind the log context and find each candidate's facts."""
        started = time.perf_counter()
        settings = self.settings
        # One budget per request: waiting for the node index spends it too.
        deadline = time.monotonic() + settings.policy.resolve_deadline_seconds
        bind_request(request.headers.get("X-Request-Id"), verb)
        body = await read_body(request, settings.server.body_timeout_seconds)
        args = parse_args(body, self.facts_of, self.name_lists)
        pod = steered_facts(facts(args.pod), args.pod, services.steering)
        structlog.contextvars.bind_contextvars(pod=pod.name, namespace=pod.namespace)
        skip = skip_reason(pod, settings.policy.excluded_namespaces)
        candidates = _UNEXAMINED
        if args.facts is not None:
            candidates = Candidates.of(args.names, args.facts)
        elif skip is None:  # a skipped pod's names are echoed unexamined: no facts needed
            nodes = services.nodes
            if nodes is None:
                raise NoNodeIndex
            if not nodes.synced:
                await nodes.wait_synced(max(0.0, deadline - time.monotonic()))
            candidates = self._candidates_of(args.names, nodes.snapshot())
        return _Call(args, pod, skip, candidates, started, deadline, self.dry_run, self.debug)

    def _candidates_of(self, names: list[str], known: Mapping[str, NodeFacts]) -> Candidates:
        """The Candidates of `names` under the node index snapshot `known`, built once per pair.

        NameLists hands out the same list object for the same bytes, and a new snapshot (a
        node came or changed) is a new object. So the pair's identities are the key, and the
        entry holds both objects, which keeps their ids from being reused while it lives.
        """
        last, groups = self._groups
        if last is not known:  # a node came, went or changed: number the groups again
            groups = NodeGroups(known)
            self._groups = (known, groups)
        key = (id(names), id(groups))
        hit = self._candidates.get(key)
        if hit is not None and hit[0] is names and hit[1] is groups:
            return hit[2]
        candidates = Candidates.among(names, groups)
        size = names_size(0, len(names)) + _POINTER * len(names)
        self._candidates.put(key, (names, groups, candidates), _CANDIDATES_SECONDS, size)
        return candidates

    def _decided(
        self, verb: _Verb, call: _Call, resolved: Mapping[str, SharedResolved]
    ) -> tuple[Any, bytes | None]:
        """The verb's decision and rendered answer (None in dry-run), reused for the same
        nodes and images.

        Candidates and resolved platforms (the resolution's recent answers and the cache
        share one object per answer) are the very same objects for a Deployment's next pod,
        so identity is the key, and deciding and rendering 500 nodes is done once per
        distinct question. Unknown images and full Node lists are decided anew.
        """
        pod = call.pod
        platforms = tuple(p for image in pod.images if isinstance(p := resolved[image], frozenset))
        key = None
        if call.args.full is None and len(platforms) == len(pod.images):
            key = decision_key(verb.name, call.candidates, pod.images, platforms, pod.prefer_arch)
            hit = self._decisions.get(key)
            if hit is not None and hit.answers(call.candidates, platforms):
                self.decisions_reused += 1
                return hit.decision, hit.answer
        decision = verb.decide(call, resolved, self.policy)
        answer = None if call.dry_run else verb.render(call, decision)
        if key is not None:
            entry = Decided(call.candidates, platforms, decision, answer)
            count = call.count
            size = names_size(len(answer or b""), count) + _POINTER * count
            self._decisions.put(key, entry, _DECISIONS_SECONDS, size)
        return decision, answer


_POINTER = 8
"""Bytes per entry of a list: a Candidates' group of each name."""
