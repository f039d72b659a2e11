"""The readiness report: a verdict per workload, the blockers that matter most, and the money.

Pure: takes workloads, what each image lookup answered, where pods run and what is broken,
and returns plain data that every output format renders (`document()` is the JSON shape).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.audit.pure.breakage import Breakage
from extender.audit.pure.newer_tags import TagHint
from extender.audit.pure.options import Pricing
from extender.audit.pure.workloads import AUDITED_KINDS, Workload, WorkloadKey
from extender.core.capacity import Capacity, shortfall
from extender.core.platforms import Resolved, Unknown, any_accepts, normalize
from extender.core.pods import PullSecretsRef
from extender.core.steering import SIDES
from extender.errors import InputError
from extender.registry.errors import RegistryError
from extender.registry.pure.reference import parse as parse_reference

READY, BLOCKED, UNKNOWN = "ready", "blocked", "unknown"
HOURS_PER_MONTH = 730  # 8,760 h / 12, as cloud price lists count a month

Lookups = Mapping[tuple[str, PullSecretsRef], Resolved]
"""What each (image, credentials) lookup answered: platforms, or Unknown with the reason."""


@dataclass(frozen=True, slots=True)
class Blocker:
    """An image that has no entry for an architecture, and the platforms it does have."""

    image: str
    platforms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UnknownImage:
    """An image whose platforms could not be learned (registry down, 401, bad name)."""

    image: str
    reason: str


@dataclass(frozen=True, slots=True)
class WorkloadReport:
    """The verdict on one workload."""

    workload: Workload
    verdict: str
    """READY, BLOCKED or UNKNOWN, for arm64."""
    runs_on: tuple[str, ...]
    """The SIDES every image supports (of the images known, when some are unknown)."""
    blockers: Mapping[str, tuple[Blocker, ...]]
    """Per target architecture, the images without an entry for it."""
    unknown: tuple[UnknownImage, ...]
    running: Mapping[str, int]
    """Pods bound to nodes now, per node architecture."""
    broken: tuple[Breakage, ...]
    split: Mapping[str, int] = field(default_factory=dict)
    """Live pods an arm64 share placed, per side (`archfit.io/arch-choice`); empty if none."""

    @property
    def arm64_share(self) -> float | None:
        """The share of arm64 among the pods the share placed, or None when it placed none."""
        total = sum(self.split.values())
        return self.split.get("arm64", 0) / total if total else None

    @property
    def cpu_millis(self) -> int:
        return self.workload.cpu_millis * self.workload.replicas

    @property
    def memory_bytes(self) -> int:
        return self.workload.memory_bytes * self.workload.replicas


@dataclass(frozen=True, slots=True)
class RankedBlocker:
    """An image that keeps workloads off arm64, with how many and how much CPU."""

    image: str
    platforms: tuple[str, ...]
    workloads: int
    cpu_millis: int


@dataclass(frozen=True, slots=True)
class RankedUnknown:
    """An image nobody could read, with the reason and how many workloads use it."""

    image: str
    reason: str
    workloads: int


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A kind of object the audit had no right to list: the figures it feeds are bounds."""

    kind: str
    """"Node" or "Event"."""
    reason: str
    """The API server's answer (`403 nodes is forbidden: ...`)."""

    @property
    def figures(self) -> tuple[str, ...]:
        """The summary figures (as `document()` names them) that are bounds, not counts."""
        return _BOUNDED.get(self.kind, ((), ""))[0]

    @property
    def effect(self) -> str:
        """What leaving it out does to the report, in a sentence."""
        return _BOUNDED.get(self.kind, ((), "the report may be incomplete"))[1]


_BOUNDED = {
    "NodePool": (
        (),
        "what Karpenter may launch is unknown, so no workload is said not to fit the capacity",
    ),
    "Node": (
        ("movableVcpu", "monthlySaving"),
        "where pods run is unknown, so no replica counts as on arm64 already: "
        "movable vCPU and the saving are upper bounds",
    ),
    "Event": (
        ("brokenNow",),
        "broken pods are found from their statuses alone: broken now is a lower bound",
    ),
}


@dataclass(frozen=True, slots=True)
class Summary:
    """The figures for a planning meeting."""

    workloads: int
    ready: int
    blocked: int
    unknown: int
    cpu_millis: int
    ready_cpu_millis: int
    movable_cpu_millis: int
    """vCPU of ready workloads that is not on arm64 yet (replicas not running there)."""
    monthly_saving: float | None
    """movable vCPU * price * HOURS_PER_MONTH * discount; None without a price."""
    pricing: Pricing
    broken: int
    left_out: tuple[LeftOut, ...] = ()
    """What could not be read; LeftOut.figures names the figures that are bounds."""

    def bounded(self, figure: str) -> bool:
        """Whether `figure` (a `document()` summary key) is a bound because of what is left out."""
        return any(figure in item.figures for item in self.left_out)

    @property
    def ready_share(self) -> float | None:
        return self.ready / self.workloads if self.workloads else None

    @property
    def ready_cpu_share(self) -> float | None:
        return self.ready_cpu_millis / self.cpu_millis if self.cpu_millis else None


@dataclass(frozen=True, slots=True)
class CapacityBlocker:
    """A workload whose pods can run on none of the cluster's capacity (nodes, NodePools,
    capacity.declared): they would wait Pending (extender.core.capacity)."""

    workload: WorkloadKey
    needs: tuple[str, ...]
    """The platforms its pods could run on."""
    images: tuple[str, ...]
    """The images that run on none of the capacity (empty: its own constraints exclude it)."""
    message: str


CANNOT_RUN = "cannot run on this cluster's capacity"


@dataclass(frozen=True, slots=True)
class Disagreement:
    """An index entry that claims a platform its image config does not name."""

    image: str
    digest: str
    """The entry's (child manifest's) digest."""
    problem: str
    """What the index says and what the config says, in plain words."""


@dataclass(frozen=True, slots=True)
class Report:
    """Everything `archfit audit` prints."""

    summary: Summary
    workloads: tuple[WorkloadReport, ...]
    blockers: tuple[RankedBlocker, ...]
    """arm64 blockers, the one blocking most workloads first."""
    unknown_images: tuple[RankedUnknown, ...]
    broken: tuple[Breakage, ...]
    skipped: tuple[str, ...] = field(default=())
    """Workloads that could not be read, each with the reason."""
    hints: Mapping[str, TagHint] = field(default_factory=dict)
    """Newer tags of blocking images that run on arm64, by `same_image` (audit.hints)."""
    disagreements: tuple[Disagreement, ...] | None = None
    """With `--verify`: index entries whose image config names another platform (the
    config was believed); None when indexes were not checked."""
    capacity: tuple[CapacityBlocker, ...] | None = None
    """Workloads that cannot run on this cluster's capacity; None when the capacity could not
    be read (Nodes or NodePools left out)."""
    image_platforms: Mapping[str, Resolved] = field(default_factory=dict)
    """Every image the workloads name, as written, and what its lookup answered (`archfit
    lint --platforms` reads them back from the JSON)."""

    def hint(self, image: str) -> TagHint | None:
        """The newer-tag hint for a blocker, if one was looked up."""
        return self.hints.get(same_image(image))


def judge(
    workload: Workload,
    lookups: Lookups,
    running: Mapping[str, int],
    broken: Sequence[Breakage] = (),
    *,
    loose: bool = False,
    split: Mapping[str, int] | None = None,
) -> WorkloadReport:
    """The verdict on one workload: every image must have an entry for an architecture."""
    blockers: dict[str, list[Blocker]] = {arch: [] for arch in SIDES}
    unknown: list[UnknownImage] = []
    for image in workload.images:
        outcome = lookups.get((image, workload.pull), Unknown("not looked up"))
        if isinstance(outcome, Unknown):
            unknown.append(UnknownImage(image, outcome.reason))
            continue
        for arch in SIDES:
            if not any_accepts(normalize("linux", arch), outcome, loose=loose):
                platforms = tuple(sorted(str(platform) for platform in outcome))
                blockers[arch].append(Blocker(image, platforms))
    if blockers["arm64"]:
        verdict = BLOCKED
    elif unknown:
        verdict = UNKNOWN
    else:
        verdict = READY
    return WorkloadReport(
        workload=workload,
        verdict=verdict,
        runs_on=tuple(arch for arch in SIDES if not blockers[arch]),
        blockers={arch: tuple(found) for arch, found in blockers.items()},
        unknown=tuple(unknown),
        running=dict(sorted(running.items())),
        broken=tuple(broken),
        split={side: count for side, count in sorted((split or {}).items()) if count},
    )


def build(
    workloads: Sequence[Workload],
    lookups: Lookups,
    running: Mapping[WorkloadKey, Mapping[str, int]],
    broken: Sequence[Breakage],
    pricing: Pricing,
    *,
    skipped: Sequence[str] = (),
    loose: bool = False,
    left_out: Sequence[LeftOut] = (),
    splits: Mapping[WorkloadKey, Mapping[str, int]] | None = None,
    capacity: Capacity | None = None,
) -> Report:
    """Judge every workload and sum up; with `capacity`, name the workloads it cannot run."""
    broken_by: dict[WorkloadKey | None, list[Breakage]] = {}
    for item in broken:
        broken_by.setdefault(item.workload, []).append(item)
    ordered = sorted(workloads, key=_order)
    reports = tuple(
        judge(
            w,
            lookups,
            running.get(w.key, {}),
            broken_by.get(w.key, ()),
            loose=loose,
            split=(splits or {}).get(w.key),
        )
        for w in ordered
    )
    return Report(
        summary=_summary(reports, pricing, len(broken), tuple(left_out)),
        workloads=reports,
        blockers=_rank_blockers(reports),
        unknown_images=_rank_unknown(reports),
        broken=tuple(broken),
        skipped=tuple(skipped),
        capacity=None if capacity is None else _capacity_blockers(ordered, lookups, capacity),
        image_platforms=_image_platforms(ordered, lookups),
    )


def _image_platforms(workloads: Sequence[Workload], lookups: Lookups) -> dict[str, Resolved]:
    found: dict[str, Resolved] = {}
    for workload in workloads:
        for image in workload.images:
            if image not in found:
                found[image] = lookups.get((image, workload.pull), _NOT_LOOKED_UP)
    return found


def _capacity_blockers(
    workloads: Sequence[Workload], lookups: Lookups, capacity: Capacity
) -> tuple[CapacityBlocker, ...]:
    """The workloads whose pods would wait for capacity that is not there, judged by the most
    permissive matching (as the webhook's constraint is), so a platform some runtime runs is
    never called missing. A DaemonSet's pods follow the nodes there are, and a workload that
    asks for no pod waits for nothing."""
    found = []
    for workload in workloads:
        if workload.key.kind == "DaemonSet" or not workload.replicas:
            continue
        pull = workload.pull
        resolved = {image: lookups.get((image, pull), _NOT_LOOKED_UP) for image in workload.images}
        try:
            short = shortfall(workload.constraints, workload.images, resolved, capacity)
        except InputError:  # a template the API would refuse: its pods are never made
            continue
        if short is not None:
            needs = tuple(str(p) for p in short.needs)
            found.append(CapacityBlocker(workload.key, needs, short.images, short.message))
    return tuple(found)


_NOT_LOOKED_UP = Unknown("not looked up")


def _order(workload: Workload) -> tuple[str, int, str]:
    key = workload.key
    return (
        key.namespace,
        AUDITED_KINDS.index(key.kind) if key.kind in AUDITED_KINDS else len(AUDITED_KINDS),
        key.name,
    )


def _summary(
    reports: Sequence[WorkloadReport],
    pricing: Pricing,
    broken: int,
    left_out: tuple[LeftOut, ...] = (),
) -> Summary:
    verdicts = Counter(report.verdict for report in reports)
    ready = [report for report in reports if report.verdict == READY]
    movable = sum(
        report.workload.cpu_millis
        * max(report.workload.replicas - report.running.get("arm64", 0), 0)
        for report in ready
    )
    saving = None
    if pricing.price_per_vcpu_hour is not None:
        hourly = movable / 1000 * pricing.price_per_vcpu_hour * pricing.arm64_discount
        saving = round(hourly * HOURS_PER_MONTH, 2)
    return Summary(
        workloads=len(reports),
        ready=verdicts[READY],
        blocked=verdicts[BLOCKED],
        unknown=verdicts[UNKNOWN],
        cpu_millis=sum(report.cpu_millis for report in reports),
        ready_cpu_millis=sum(report.cpu_millis for report in ready),
        movable_cpu_millis=movable,
        monthly_saving=saving,
        pricing=pricing,
        broken=broken,
        left_out=left_out,
    )


def _rank_blockers(reports: Sequence[WorkloadReport]) -> tuple[RankedBlocker, ...]:
    counts: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    platforms: dict[str, tuple[str, ...]] = {}
    spellings: dict[str, Counter[str]] = {}
    for report in reports:
        for blocker in report.blockers["arm64"]:
            key = same_image(blocker.image)
            counts[key] += 1
            cpu[key] += report.cpu_millis
            platforms[key] = blocker.platforms
            spellings.setdefault(key, Counter())[blocker.image] += 1
    ranked = sorted(counts, key=lambda key: (-counts[key], -cpu[key], key))
    return tuple(
        RankedBlocker(_shown(spellings[k]), platforms[k], counts[k], cpu[k]) for k in ranked
    )


def _rank_unknown(reports: Sequence[WorkloadReport]) -> tuple[RankedUnknown, ...]:
    counts: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    spellings: dict[str, Counter[str]] = {}
    for report in reports:
        for item in report.unknown:
            key = same_image(item.image)
            counts[key] += 1
            reasons.setdefault(key, item.reason)
            spellings.setdefault(key, Counter())[item.image] += 1
    ranked = sorted(counts, key=lambda key: (-counts[key], key))
    return tuple(RankedUnknown(_shown(spellings[k]), reasons[k], counts[k]) for k in ranked)


def same_image(image: str) -> str:
    """One key for every spelling of an image (`legacy-app:2`, `docker.io/library/legacy-app:2`,
    `index.docker.io/library/legacy-app:2`): its normalised reference, or the text itself
    when it is no reference at all."""
    try:
        return str(parse_reference(image))
    except RegistryError:
        return image


def _shown(spellings: Counter[str]) -> str:
    """The spelling most workloads use (then the shortest): what a search of manifests finds."""
    return min(spellings, key=lambda text: (-spellings[text], len(text), text))


def document(report: Report) -> dict[str, Any]:
    """The report as JSON-ready data (camelCase keys, as Kubernetes writes them)."""
    summary = report.summary
    return {
        "summary": {
            "workloads": summary.workloads,
            "ready": summary.ready,
            "blocked": summary.blocked,
            "unknown": summary.unknown,
            "readyShare": _share(summary.ready_share),
            "vcpu": summary.cpu_millis / 1000,
            "readyVcpu": summary.ready_cpu_millis / 1000,
            "readyVcpuShare": _share(summary.ready_cpu_share),
            "movableVcpu": summary.movable_cpu_millis / 1000,
            "pricePerVcpuHour": summary.pricing.price_per_vcpu_hour,
            "arm64Discount": summary.pricing.arm64_discount,
            "monthlySaving": summary.monthly_saving,
            "brokenNow": summary.broken,
            "leftOut": [
                {"kind": item.kind, "reason": item.reason, "bounds": list(item.figures)}
                for item in summary.left_out
            ],
        },
        "blockers": [
            {
                "image": b.image,
                "platforms": list(b.platforms),
                "workloads": b.workloads,
                "vcpu": b.cpu_millis / 1000,
                **hint_document(report.hint(b.image)),
            }
            for b in report.blockers
        ],
        "unknownImages": [
            {"image": u.image, "reason": u.reason, "workloads": u.workloads}
            for u in report.unknown_images
        ],
        "workloads": [_workload_document(w) for w in report.workloads],
        "brokenNow": [_breakage_document(b) for b in report.broken],
        "skipped": list(report.skipped),
        "capacityBlockers": _capacity_document(report.capacity),
        "imagePlatforms": image_platforms_document(report.image_platforms),
        **_disagreements_document(report.disagreements),
    }


def image_platforms_document(found: Mapping[str, Resolved]) -> list[dict[str, Any]]:
    """Each image with its platforms, or why they are unknown: what `archfit lint
    --platforms` reads."""
    return [
        {"image": image, "unknown": outcome.reason}
        if isinstance(outcome, Unknown)
        else {"image": image, "platforms": sorted(str(p) for p in outcome)}
        for image, outcome in found.items()
    ]


def _capacity_document(found: Sequence[CapacityBlocker] | None) -> list[dict[str, Any]] | None:
    """Workloads that cannot run on the cluster's capacity; null when it could not be read."""
    if found is None:
        return None
    return [
        {
            "kind": item.workload.kind,
            "namespace": item.workload.namespace,
            "name": item.workload.name,
            "blocker": CANNOT_RUN,
            "needs": list(item.needs),
            "images": list(item.images),
            "message": item.message,
        }
        for item in found
    ]


def _disagreements_document(found: Sequence[Disagreement] | None) -> dict[str, Any]:
    """`indexDisagreements` when indexes were checked (`--verify`), else nothing."""
    if found is None:
        return {}
    entries = [{"image": d.image, "digest": d.digest, "problem": d.problem} for d in found]
    return {"indexDisagreements": entries}


def hint_document(hint: TagHint | None) -> dict[str, Any]:
    """A blocker's newer-tag fields: none when no hint was looked up."""
    if hint is None:
        return {}
    return {
        "arm64FromTag": hint.arm64_tag,
        "newerTagsChecked": list(hint.checked),
        "action": hint.action,
    }


def _workload_document(report: WorkloadReport) -> dict[str, Any]:
    workload = report.workload
    return {
        "kind": workload.key.kind,
        "namespace": workload.key.namespace,
        "name": workload.key.name,
        "verdict": report.verdict,
        "runsOn": list(report.runs_on),
        "blockers": {
            arch: [{"image": b.image, "platforms": list(b.platforms)} for b in found]
            for arch, found in report.blockers.items()
        },
        "unknown": [{"image": u.image, "reason": u.reason} for u in report.unknown],
        "images": list(workload.images),
        "running": dict(report.running),
        "replicas": workload.replicas,
        "vcpu": report.cpu_millis / 1000,
        "memoryBytes": report.memory_bytes,
        "brokenNow": len(report.broken),
        "archChoice": (
            {**report.split, "arm64Share": _share(report.arm64_share)} if report.split else None
        ),
    }


def _breakage_document(item: Breakage) -> dict[str, Any]:
    return {
        "namespace": item.namespace,
        "pod": item.pod,
        "workload": str(item.workload) if item.workload else None,
        "image": item.image,
        "node": item.node,
        "nodeArch": item.node_arch,
        "problem": item.problem,
        "message": item.message,
    }


def _share(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
