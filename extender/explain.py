"""Explanations: structured log lines that say why, one summary line per request.

Only logs: counting is metrics' job (extender.metrics), done once per call by the app.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import structlog

from extender import logs
from extender.core.placement import FilterDecision, Policy, ScoreDecision
from extender.core.platforms import Resolved, Unknown, summarise_platforms
from extender.core.pods import PodFacts

if TYPE_CHECKING:  # the webhook's type: the extender alone need not import the mutation code
    from extender.core.mutation import Mutation

log = structlog.get_logger("archfit")


def filtered(
    call: Call,
    decision: FilterDecision,
    resolved: Mapping[str, Resolved],
    policy: Policy,
    cache: Mapping[str, int],
) -> None:
    """Explain one filter decision in O(groups) lines: one per verdict, listing its nodes.

    Nodes of one platform share a verdict, so 250 rejected nodes of one platform make one
    `nodes_rejected` line, not 250; `node_rejected` per node is there at debug.
    """
    dry_run = call.dry_run
    per_node = call.debug
    for verdict, nodes in decision.groups:
        if verdict.outcome == "reject":
            fields = {
                "node_platform": str(verdict.platform),
                "image": verdict.image,
                "image_platforms": summarise_platforms(verdict.image_platforms),
                "reason": verdict.reason,
                "rule": str(verdict.rule),
                "dry_run": dry_run,
            }
            log.info("nodes_rejected", count=len(nodes), nodes=nodes, **fields)
            if per_node:
                for node in nodes:
                    log.debug("node_rejected", node=node, **fields)
        elif verdict.image is None:
            log.warning(
                "node_platform_unknown",
                count=len(nodes),
                nodes=nodes,
                failure_policy=policy.failure_policy,
                dry_run=dry_run,
            )
    unknown = unknown_images(resolved)
    for image, why in unknown.items():
        # Warning, not error: the failure policy handles it, and the registry's
        # trouble is not archfit's.
        log.warning(
            "image_platforms_unknown",
            image=image,
            error=why,
            failure_policy=policy.failure_policy,
            dry_run=dry_run,
        )
    failed = decision.failed_count
    log.info(
        "filter_done",
        candidates=call.count,
        passed=call.count if dry_run else len(decision.passed),
        rejected=decision.rejected,
        failed_unknown=failed,
        would_reject=decision.rejected + failed if dry_run else None,
        images=len(resolved),
        unknown_images=sorted(unknown),
        cache_hits=cache.get("hit", 0),
        cache_misses=cache.get("miss", 0),
        registry_waits=call.registry_waits,
        dry_run=dry_run,
        duration_ms=call.elapsed_ms(),
    )


def scored(call: Call, pod: PodFacts, decision: ScoreDecision) -> None:
    """The summary line of one prioritize call."""
    scores = list(decision.scores.values())
    top = max(scores, default=0)
    log.info(
        "prioritize_done",
        candidates=call.count,
        multi_arch=decision.multi_arch,
        architectures=list(decision.architectures),
        prefer_arch=list(pod.prefer_arch) or None,
        preferred_nodes=scores.count(top) if top else 0,
        registry_waits=call.registry_waits,
        dry_run=call.dry_run,
        duration_ms=call.elapsed_ms(),
    )


class Call(Protocol):
    """What every explanation of an extender call needs from the call."""

    @property
    def count(self) -> int: ...

    @property
    def dry_run(self) -> bool: ...

    @property
    def debug(self) -> bool: ...

    @property
    def registry_waits(self) -> int:
        """Lookups the call waited on that had to ask a registry."""
        ...

    def elapsed_ms(self) -> float: ...


def admitted(
    pod: PodFacts,
    resolved: Mapping[str, Resolved],
    mutation: Mutation,
    dry_run: bool,
    cache: Mapping[str, int],
    started: float,
) -> None:
    """The one line per pod CREATE the webhook examined: what it found and what it wrote."""
    policy = "gate" if mutation.outcome == "gated" else "fail-open"
    for image, why in unknown_images(resolved).items():
        log.warning("image_platforms_unknown", image=image, error=why, failure_policy=policy)
    if not logs.enabled(logging.INFO):
        return  # the line would be dropped: build none of its fields (one per admission)
    log.info(
        "pod_admitted",
        outcome=mutation.outcome,
        changes=mutation.changes,
        runs_on=list(mutation.runs_on),
        warnings=mutation.warnings or None,
        unknown_images=list(mutation.unknown) or None,
        images=len(resolved),
        cache_hits=cache.get("hit", 0),
        cache_misses=cache.get("miss", 0),
        dry_run=dry_run,
        duration_ms=_ms(started),
        **(mutation.steering.fields(mutation.arch_choice) if mutation.steering else {}),
    )


def admission_skipped(why: str, started: float) -> None:
    log.info("pod_admitted", outcome="skipped", skipped=why, duration_ms=_ms(started))


def unknown_images(resolved: Mapping[str, Resolved]) -> dict[str, str]:
    """Each image whose platforms are unknown, and why."""
    return {image: r.reason for image, r in resolved.items() if isinstance(r, Unknown)}


def skipped(name: str, call: Call, why: str) -> None:
    log.info(f"{name}_done", skipped=why, candidates=call.count, duration_ms=call.elapsed_ms())


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
