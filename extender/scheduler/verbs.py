"""The extender verbs, filter and prioritize: one skeleton, and what each verb supplies.

`Verbs.serve` is decode → resolve → decide → explain → count → render for both. Decisions
are extender.core.placement's and the wire types extender.wire.scheduler_api's; `explain` only logs
and Metrics.extender_call counts. What a call builds is kept for the next while its inputs
are the very same objects: kube-scheduler offers pod after pod the same nodes, and a
Deployment's pods share images (docs/architecture.md, "Data flow of one filter call").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import msgspec
import structlog
from aiohttp import web

from extender import explain, logs
from extender.config.rules import policy_of
from extender.config.settings import Settings
from extender.core.node_facts import NodeFacts
from extender.core.node_parts import FactsOf
from extender.core.placement import (
    Candidates,
    FilterDecision,
    NodeGroups,
    Policy,
    ScoreDecision,
    Verdict,
    decide_filter,
    decide_scores,
    judge_groups,
    native_architectures,
)
from extender.core.platforms import Resolved, SharedPlatforms, SharedResolved
from extender.core.pod_rules import steered_facts
from extender.core.pods import PodFacts, facts, skip_reason
from extender.errors import NoNodeIndex
from extender.logs import bind_request
from extender.metrics import Metrics, tally_request_lookups
from extender.services import Services
from extender.serving.request_body import read_body
from extender.ttlmap import TTLMap
from extender.wire.scheduler_api import (
    ExtenderArgs,
    decode_args_pod,
    parse_args,
    render_filter,
    render_priorities,
)

log = structlog.get_logger("archfit")


class RecentPods:
    """The pods of the last calls, decoded, by their JSON: kube-scheduler asks filter and
    then prioritize about each pod, in the same bytes, so the second call decodes nothing.
    At most `entries` pods and `max_bytes` of their JSON are kept, oldest out first."""

    def __init__(self, entries: int = 16, max_bytes: int = 1024 * 1024) -> None:
        self._pods: dict[bytes, tuple[dict[str, Any], PodFacts]] = {}
        self._entries = entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._last: tuple[dict[str, Any], PodFacts] | None = None
        """What `decode` handed out last, for `facts`."""

    def decode(self, raw: msgspec.Raw) -> dict[str, Any]:
        """The pod in `raw`, as scheduler_api.decode_args_pod decodes it (and raises)."""
        key = memoryview(raw).tobytes()
        pods = self._pods
        kept = pods.get(key)
        if kept is None:
            pod = decode_args_pod(key)
            kept = (pod, facts(pod))
            if len(key) <= self._max_bytes:
                pods[key] = kept
                self._bytes += len(key)
                while len(pods) > self._entries or self._bytes > self._max_bytes:
                    self._bytes -= len(oldest := next(iter(pods)))
                    del pods[oldest]
        self._last = kept
        return kept[0]

    def facts(self, pod: Mapping[str, Any]) -> PodFacts:
        """The facts of `pod`: those worked out with it when `decode` handed it out last."""
        last = self._last
        return last[1] if last is not None and last[0] is pod else facts(pod)


def json_answer(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


@dataclass(slots=True)
class _Call:
    """One verb call, decoded: the wire args, the pod's facts and each candidate's facts."""

    args: ExtenderArgs
    pod: PodFacts
    skip: str | None
    """Why the pod is not examined (annotation, excluded_namespace, no_images), or None."""
    candidates: Candidates
    """The offered nodes and what archfit knows of each; no facts when the pod is skipped."""
    groups: NodeGroups | None
    """The node index groups the candidates are numbered by; None for full Nodes and
    skipped pods."""
    started: float
    """`time.perf_counter()` when the request arrived."""
    deadline: float
    """`time.monotonic()` by which registry lookups must be done."""
    dry_run: bool
    debug: bool
    """Whether per-node debug lines are wanted (explain)."""
    answered: float = 0.0
    """`time.perf_counter()` when the answer was ready; 0 until then."""
    registry_waits: int = 0
    """Lookups the call waited on that had to ask a registry (no cache tier knew the image)."""

    @property
    def count(self) -> int:
        """How many nodes the scheduler offered."""
        return len(self.args.names)

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def elapsed(self) -> float:
        """Seconds from arrival to the answer (or to now, before there is one)."""
        return (self.answered or time.perf_counter()) - self.started

    def elapsed_ms(self) -> float:
        return round(self.elapsed() * 1000, 3)


class _Verb(Protocol):
    """What differs between filter and prioritize; `Verbs.serve` is the skeleton they share."""

    name: str

    @property
    def judge(
        self,
    ) -> Callable[[Sequence[str], Mapping[str, Resolved], Mapping[int, NodeFacts], Policy], Any]:
        """What decide needs to know of each group of a mapping group → facts, for a pod's
        images: the same for every order and subset of the nodes, so judged once per
        question (placement.judge_groups, placement.native_architectures)."""
        ...

    def decide(
        self,
        call: _Call,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        judged: Mapping[int, Any] | None,
    ) -> Any: ...

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

    judge = staticmethod(judge_groups)

    def decide(
        self,
        call: _Call,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        judged: Mapping[int, Verdict] | None,
    ) -> FilterDecision:
        return decide_filter(call.pod.images, resolved, call.candidates, policy, judged)

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
            nodes=(len(decision.passed), decision.rejected, decision.failed_count),
            unknown_images=len(explain.unknown_images(resolved)),
            failure_policy=policy.failure_policy,
            dry_run=call.dry_run,
            registry_waits=call.registry_waits,
        )

    def render(self, call: _Call, decision: FilterDecision) -> bytes:
        # kube-scheduler gives every node an extender drops without naming the status
        # UnschedulableAndUnresolvable (framework NewDefaultNodeToStatus), the very status
        # it gives FailedAndUnresolvableNodes (schedule_one.go findNodesThatPassExtenders).
        # The reasons only reach the pod's FailedScheduling event when no node is left; while
        # some pass, naming the rest would only cost both sides encoding and decoding them.
        # The logs name every rejected node either way (explain.filtered).
        unresolvable = decision.unresolvable if not decision.passed else {}
        failed = decision.failed if decision.failed_count else {}
        return render_filter(call.args, decision.passed, failed, unresolvable)

    def neutral(self, call: _Call) -> bytes:
        # Archfit's own failure must never reject a node: pass everything.
        return render_filter(call.args, call.args.names, {}, {})


class _Prioritize:
    name = "prioritize"

    judge = staticmethod(native_architectures)

    def decide(
        self,
        call: _Call,
        resolved: Mapping[str, Resolved],
        policy: Policy,
        judged: Mapping[int, str] | None,
    ) -> ScoreDecision:
        pod = call.pod
        candidates = call.candidates
        return decide_scores(pod.images, resolved, candidates, policy, pod.prefer_arch, judged)

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
        metrics.extender_call(self.name, "ok", call.elapsed(), registry_waits=call.registry_waits)

    def render(self, call: _Call, decision: ScoreDecision) -> bytes:
        return render_priorities(decision.scores)

    def neutral(self, call: _Call) -> bytes:
        # No scores at all: kube-scheduler counts a host the list leaves out as 0.
        return render_priorities({})


FILTER = _Filter()
PRIORITIZE = _Prioritize()


class Judged(NamedTuple):
    """What `Verbs._decided` keeps for one question, under `question_key`."""

    groups: NodeGroups
    """The node index snapshot's groups it was judged for: held, so that their id stays theirs."""
    platforms: tuple[SharedPlatforms, ...]
    """Each image's platforms, in the pod's order: held for the same reason."""
    judged: Mapping[int, Any]
    """The verb's judgement of each group (`_Verb.judge`)."""

    def answers(self, groups: NodeGroups, platforms: tuple[SharedPlatforms, ...]) -> bool:
        """Whether this entry was judged from these very objects (not only equal ones)."""
        return self.groups is groups and all(
            a is b for a, b in zip(self.platforms, platforms, strict=True)
        )


QuestionKey = tuple[Any, ...]


def question_key(
    verb: str,
    groups: NodeGroups,
    images: tuple[str, ...],
    platforms: tuple[SharedPlatforms, ...],
) -> QuestionKey:
    """A question by the identities of its answers: only SharedPlatforms (one object per
    value, extender.core.interning), so equal answers are one key. A copy would never be found
    again."""
    return (verb, id(groups), images, *map(id, platforms))


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
        self.pods = RecentPods()
        self._groups: tuple[object, NodeGroups] = ({}, NodeGroups({}))
        """The last node index snapshot and its NodeGroups."""
        self._judged: TTLMap[QuestionKey, Judged] = TTLMap(_QUESTIONS)
        self.decisions_reused = 0
        """Calls decided with a judgement kept from an earlier call (tests read it)."""

    async def serve(self, request: web.Request, verb: _Verb, services: Services) -> web.Response:
        """decode → resolve → decide → explain → count → render, the same for every verb."""
        metrics = self.metrics
        call = await self._decode(request, verb.name, services)
        if call.skip is not None:
            explain.skipped(verb.name, call, call.skip)
            metrics.extender_call(verb.name, "skipped", skipped=call.skip)
            return json_answer(verb.neutral(call))
        lookups = tally_request_lookups()
        try:
            # Not patient: kube-scheduler waits for this answer before its next pod, so a
            # registry that already ran a call out of time is not waited on again, and none
            # is for a pod archfit decided already (its constraint is written).
            resolved = await services.resolution.resolve(
                call.pod.images,
                call.pod.pull,
                call.remaining(),
                workload=call.pod.workload,
                patient=False,
                registries=not call.pod.decided,
            )
            decision, answer = self._decided(verb, call, resolved)
        except Exception:
            log.exception(f"{verb.name}_internal_error", candidates=call.count)
            metrics.extender_call(verb.name, "internal_error")
            return json_answer(verb.neutral(call))
        call.answered = time.perf_counter()
        call.registry_waits = lookups.get("registry_waits", 0)
        # kube-scheduler waits for the answer, not for the log line and the metrics: they
        # follow as soon as the answer is written (before the next request is read).
        asyncio.get_running_loop().call_soon(
            self._explain_and_count, verb, call, decision, resolved, lookups
        )
        return json_answer(verb.neutral(call) if answer is None else answer)

    def _explain_and_count(
        self,
        verb: _Verb,
        call: _Call,
        decision: Any,
        resolved: Mapping[str, Resolved],
        lookups: Mapping[str, int],
    ) -> None:
        """Log and count one answered call (in the request's log context: call_soon
        runs it in a copy of the context it was called in)."""
        try:
            verb.explain(call, decision, resolved, self.policy, lookups)
            verb.count(self.metrics, call, decision, resolved, self.policy)
        except Exception:
            log.exception(f"{verb.name}_explain_error")

    async def _decode(self, request: web.Request, verb: str, services: Services) -> _Call:
        """Parse the body, bind the log context and find each candidate's facts."""
        started = time.perf_counter()
        settings = self.settings
        # One budget per request: waiting for the node index spends it too.
        deadline = time.monotonic() + settings.policy.resolve_deadline_seconds
        bind_request(request.headers.get("X-Request-Id"), verb)
        body = await read_body(request, settings.server.body_timeout_seconds)
        args = parse_args(body, self.facts_of, self.pods.decode)
        pod = steered_facts(self.pods.facts(args.pod), args.pod, services.steering)
        logs.bind(pod=pod.name, namespace=pod.namespace)
        skip = skip_reason(pod, settings.policy.excluded_namespaces)
        candidates, groups = _UNEXAMINED, None
        if args.facts is not None:
            candidates = Candidates.of(args.names, args.facts)
        elif skip is None:  # a skipped pod's names are echoed unexamined: no facts needed
            nodes = services.nodes
            if nodes is None:
                raise NoNodeIndex
            if not nodes.synced:
                await nodes.wait_synced(max(0.0, deadline - time.monotonic()))
            groups = self._groups_of(nodes.snapshot())
            candidates = Candidates.among(args.names, groups)
        return _Call(
            args, pod, skip, candidates, groups, started, deadline, self.dry_run, self.debug
        )

    def _groups_of(self, known: Mapping[str, NodeFacts]) -> NodeGroups:
        """The NodeGroups of the node index snapshot `known`, numbered once per snapshot: a
        new one (a node came, went or changed) is a new object. kube-scheduler lists the
        nodes in a new order on most calls, so names are grouped anew each call, by one
        pass in C (Candidates.among)."""
        last, groups = self._groups
        if last is not known:
            groups = NodeGroups(known)
            self._groups = (known, groups)
        return groups

    def _decided(
        self, verb: _Verb, call: _Call, resolved: Mapping[str, SharedResolved]
    ) -> tuple[Any, bytes | None]:
        """The verb's decision and rendered answer (None in dry-run).

        The verb's judgement of each node group depends on the pod's images and the
        snapshot, not on which nodes are offered or in what order: it is kept for the
        next call with the same question (a Deployment's next pod, prioritize after
        filter). Resolved platforms are shared objects (the resolution's recent answers
        and the cache hand out one per answer), so identity is the key. Unknown images
        and full Node lists are judged anew.
        """
        pod, groups = call.pod, call.groups
        judged = None
        if groups is not None:
            platforms = tuple(
                p for image in pod.images if isinstance(p := resolved[image], frozenset)
            )
            if len(platforms) == len(pod.images):
                key = question_key(verb.name, groups, pod.images, platforms)
                hit = self._judged.get(key)
                if hit is not None and hit.answers(groups, platforms):
                    self.decisions_reused += 1
                    judged = hit.judged
                else:
                    judged = verb.judge(pod.images, resolved, groups.every, self.policy)
                    self._judged.put(key, Judged(groups, platforms, judged), _QUESTION_SECONDS)
        decision = verb.decide(call, resolved, self.policy, judged)
        return decision, None if call.dry_run else verb.render(call, decision)


_QUESTIONS = 1024
"""Questions (a pod's images and a node index snapshot) whose judgement is kept: each holds a
verdict per node group, a handful, whatever the node count."""
_QUESTION_SECONDS = 60.0
