"""Explanations: one structured line per rejected node and one summary line per request."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import structlog

from extender.metrics import Metrics
from extender.mutation import Mutation
from extender.placement import Candidate, FilterDecision, Policy, Resolved, ScoreDecision, Unknown
from extender.platforms import Platform, summarise_platforms
from extender.pods import PodFacts

log = structlog.get_logger("archfit")


def filtered(
    pod: PodFacts,
    candidates: Sequence[Candidate],
    resolved: Mapping[str, Resolved],
    decision: FilterDecision,
    policy: Policy,
    dry_run: bool,
    metrics: Metrics,
    cache: Mapping[str, int],
    started: float,
) -> None:
    """Log and count one filter decision; `cache` tallies this request's cache lookups."""
    mode = "dry-run" if dry_run else "enforce"
    # Rejections repeat a few (image, platform) pairs across many nodes: render each once.
    shown: dict[tuple[str, Platform], tuple[str, list[str]]] = {}
    for rejection in decision.rejected:
        key = (rejection.image, rejection.node_platform)
        if key not in shown:
            shown[key] = (
                str(rejection.node_platform),
                summarise_platforms(rejection.image_platforms),
            )
        node_platform, image_platforms = shown[key]
        log.info(
            "node_rejected",
            node=rejection.node,
            node_platform=node_platform,
            image=rejection.image,
            image_platforms=image_platforms,
            reason=rejection.reason,
            rule=str(rejection.rule),
            dry_run=dry_run,
        )
    unknown = _unknown(resolved)
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
    if unknown:
        metrics.unknown_images.labels(policy.failure_policy).inc(len(unknown))
    doubted_nodes = [d.node for d in decision.doubted if d.image is None]
    if doubted_nodes:
        log.warning("node_platform_unknown", nodes=doubted_nodes[:20], count=len(doubted_nodes))
    failed = decision.failed(policy)
    metrics.node_decisions.labels("passed", mode).inc(len(decision.passed))
    metrics.node_decisions.labels("rejected", mode).inc(len(decision.rejected))
    metrics.node_decisions.labels("failed_unknown", mode).inc(len(failed))
    log.info(
        "filter_done",
        candidates=len(candidates),
        passed=len(candidates) if dry_run else len(decision.passed),
        rejected=len(decision.rejected),
        failed_unknown=len(failed),
        would_reject=len(decision.rejected) + len(failed) if dry_run else None,
        images=len(resolved),
        unknown_images=sorted(unknown),
        cache_hits=cache.get("hit", 0),
        cache_misses=cache.get("miss", 0),
        dry_run=dry_run,
        duration_ms=_ms(started),
    )


def scored(pod: PodFacts, decision: ScoreDecision, dry_run: bool, started: float) -> None:
    """The summary line of one prioritize call."""
    top = max(decision.scores.values(), default=0)
    log.info(
        "prioritize_done",
        candidates=len(decision.scores),
        multi_arch=decision.multi_arch,
        architectures=list(decision.architectures),
        prefer_arch=list(pod.prefer_arch) or None,
        preferred_nodes=sum(1 for s in decision.scores.values() if s == top and top > 0),
        dry_run=dry_run,
        duration_ms=_ms(started),
    )


def admitted(
    pod: PodFacts,
    resolved: Mapping[str, Resolved],
    mutation: Mutation,
    dry_run: bool,
    cache: Mapping[str, int],
    started: float,
) -> None:
    """The one line per pod CREATE the webhook examined: what it found and what it wrote."""
    for image, why in _unknown(resolved).items():
        log.warning("image_platforms_unknown", image=image, error=why, failure_policy="fail-open")
    log.info(
        "pod_admitted",
        outcome=mutation.outcome,
        changes=mutation.changes,
        runs_on=[str(p) for p in mutation.runs_on],
        warnings=mutation.warnings or None,
        unknown_images=list(mutation.unknown) or None,
        images=len(resolved),
        cache_hits=cache.get("hit", 0),
        cache_misses=cache.get("miss", 0),
        dry_run=dry_run,
        duration_ms=_ms(started),
    )


def admission_skipped(why: str, started: float) -> None:
    log.info("pod_admitted", outcome="skipped", skipped=why, duration_ms=_ms(started))


def _unknown(resolved: Mapping[str, Resolved]) -> dict[str, str]:
    return {image: r.reason for image, r in resolved.items() if isinstance(r, Unknown)}


def skipped(verb: str, why: str, candidates: int, started: float) -> None:
    log.info(f"{verb}_done", skipped=why, candidates=candidates, duration_ms=_ms(started))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
