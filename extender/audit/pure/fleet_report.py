"""Several clusters' reports as one: a report per cluster and the fleet's total (pure).

Each cluster is judged on its own (its pods, nodes and events); the images were looked up
once for all of them. The total adds the clusters' figures up, and ranks blockers and
unreadable images across the fleet with how many workloads each blocks in each cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.audit.pure.newer_tags import TagHint
from extender.audit.pure.report import (
    LeftOut,
    RankedUnknown,
    Report,
    Summary,
    document,
    hint_document,
    image_platforms_document,
    same_image,
)


@dataclass(frozen=True, slots=True)
class ClusterReport:
    """One cluster's report, named by its kubeconfig context."""

    name: str
    report: Report


@dataclass(frozen=True, slots=True)
class FleetBlocker:
    """An image that keeps workloads off arm64 somewhere in the fleet."""

    image: str
    platforms: tuple[str, ...]
    workloads: int
    cpu_millis: int
    clusters: Mapping[str, int]
    """Workloads it blocks, per cluster (only the clusters where it blocks any)."""


@dataclass(frozen=True, slots=True)
class FleetReport:
    """Everything a multi-cluster `archfit audit` prints."""

    clusters: tuple[ClusterReport, ...]
    summary: Summary
    """The fleet's total."""
    blockers: tuple[FleetBlocker, ...]
    """arm64 blockers across the fleet, the one blocking most workloads first."""
    unknown_images: tuple[RankedUnknown, ...]
    hints: Mapping[str, TagHint] = field(default_factory=dict)

    def hint(self, image: str) -> TagHint | None:
        """The newer-tag hint for a blocker, if one was looked up."""
        return self.hints.get(same_image(image))

    @property
    def single(self) -> bool:
        """One cluster: the report of `archfit audit` without --context."""
        return len(self.clusters) == 1


def single(report: Report, name: str = "") -> FleetReport:
    """One cluster's report in the fleet's shape (for formats that render only that)."""
    return combine([ClusterReport(name, report)])


def combine(clusters: Sequence[ClusterReport]) -> FleetReport:
    """The fleet: clusters in the order given, and their total."""
    reports = [cluster.report for cluster in clusters]
    hints: dict[str, TagHint] = {}
    for report in reports:
        hints.update(report.hints)
    return FleetReport(
        clusters=tuple(clusters),
        summary=_total([(c.name, c.report.summary) for c in clusters]),
        blockers=_blockers(clusters),
        unknown_images=_unknown(reports),
        hints=hints,
    )


def _total(summaries: Sequence[tuple[str, Summary]]) -> Summary:
    first = summaries[0][1]
    savings = [s.monthly_saving for _, s in summaries if s.monthly_saving is not None]
    several = len(summaries) > 1
    left_out = tuple(
        LeftOut(item.kind, f"{name}: {item.reason}" if several else item.reason)
        for name, s in summaries
        for item in s.left_out
    )
    return Summary(
        workloads=sum(s.workloads for _, s in summaries),
        ready=sum(s.ready for _, s in summaries),
        blocked=sum(s.blocked for _, s in summaries),
        unknown=sum(s.unknown for _, s in summaries),
        cpu_millis=sum(s.cpu_millis for _, s in summaries),
        ready_cpu_millis=sum(s.ready_cpu_millis for _, s in summaries),
        movable_cpu_millis=sum(s.movable_cpu_millis for _, s in summaries),
        monthly_saving=round(sum(savings), 2) if savings else None,
        pricing=first.pricing,
        broken=sum(s.broken for _, s in summaries),
        left_out=left_out,
    )


def _blockers(clusters: Sequence[ClusterReport]) -> tuple[FleetBlocker, ...]:
    counts: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    shown: dict[str, str] = {}
    platforms: dict[str, tuple[str, ...]] = {}
    per_cluster: dict[str, dict[str, int]] = {}
    for cluster in clusters:
        for blocker in cluster.report.blockers:
            key = same_image(blocker.image)
            counts[key] += blocker.workloads
            cpu[key] += blocker.cpu_millis
            shown.setdefault(key, blocker.image)
            platforms.setdefault(key, blocker.platforms)
            where = per_cluster.setdefault(key, {})
            where[cluster.name] = where.get(cluster.name, 0) + blocker.workloads
    ranked = sorted(counts, key=lambda key: (-counts[key], -cpu[key], key))
    return tuple(
        FleetBlocker(shown[k], platforms[k], counts[k], cpu[k], per_cluster[k]) for k in ranked
    )


def _unknown(reports: Sequence[Report]) -> tuple[RankedUnknown, ...]:
    counts: Counter[str] = Counter()
    shown: dict[str, RankedUnknown] = {}
    for report in reports:
        for item in report.unknown_images:
            key = same_image(item.image)
            counts[key] += item.workloads
            shown.setdefault(key, item)
    ranked = sorted(counts, key=lambda key: (-counts[key], key))
    return tuple(RankedUnknown(shown[k].image, shown[k].reason, counts[k]) for k in ranked)


def fleet_document(fleet: FleetReport) -> dict[str, Any]:
    """The multi-cluster JSON: the single-cluster keys for the fleet's total (workloads and
    broken pods each name their `cluster`), plus `clusters`, each with its own summary."""
    per_cluster = [(c.name, document(c.report)) for c in fleet.clusters]
    total = document(Report(fleet.summary, (), (), (), (), skipped=(), hints=fleet.hints))[
        "summary"
    ]
    return {
        "summary": total,
        "clusters": [{"name": name, "summary": doc["summary"]} for name, doc in per_cluster],
        "blockers": [
            {
                "image": b.image,
                "platforms": list(b.platforms),
                "workloads": b.workloads,
                "vcpu": b.cpu_millis / 1000,
                "clusters": dict(b.clusters),
                **hint_document(fleet.hint(b.image)),
            }
            for b in fleet.blockers
        ],
        "unknownImages": [
            {"image": u.image, "reason": u.reason, "workloads": u.workloads}
            for u in fleet.unknown_images
        ],
        "workloads": [
            {"cluster": name, **item} for name, doc in per_cluster for item in doc["workloads"]
        ],
        "brokenNow": [
            {"cluster": name, **item} for name, doc in per_cluster for item in doc["brokenNow"]
        ],
        "skipped": [f"{name}: {reason}" for name, doc in per_cluster for reason in doc["skipped"]],
        "capacityBlockers": _capacity_blockers(per_cluster),
        "imagePlatforms": image_platforms_document(
            {i: r for c in fleet.clusters for i, r in c.report.image_platforms.items()}
        ),
    }


def _capacity_blockers(per_cluster: Sequence[tuple[str, dict[str, Any]]]) -> Any:
    """Every cluster's workloads that its capacity cannot run, each naming its `cluster`;
    null when some cluster's capacity could not be read."""
    found = [doc["capacityBlockers"] for _, doc in per_cluster]
    if any(item is None for item in found):
        return None
    return [
        {"cluster": name, **item} for name, doc in per_cluster for item in doc["capacityBlockers"]
    ]
