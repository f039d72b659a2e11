"""Prometheus metrics, one registry per app instance (no module globals).

The class body of `Metrics` is the catalogue, one entry per metric: its name, type, help,
labels and buckets. It builds each instance's registry, and docs/operations.md's metrics table
(`metrics_table`, printed by `archfit config --metrics`).
"""

from __future__ import annotations

import platform
from collections import defaultdict
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from extender import __version__

# Sub-millisecond answers from a warm cache up to the scheduler's 5 s default timeout.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5)


# Cache lookups of the request being handled, for its summary log line. Lookup
# tasks copy the context when created, so they all add to the request's tally.
_request_tally: ContextVar[defaultdict[str, int] | None] = ContextVar(
    "archfit_request_tally", default=None
)


def tally_request_lookups() -> defaultdict[str, int]:
    """Start counting cache lookups (hit/miss/failure) for the current request (a
    defaultdict: collections.Counter's Python __init__ costs more than the rest of the
    tally, once per request)."""
    tally: defaultdict[str, int] = defaultdict(int)
    _request_tally.set(tally)
    return tally


def tally_request(key: str, count: int = 1) -> None:
    """Add `count` to the current request's tally under `key` (its summary line reads it)."""
    tally = _request_tally.get()
    if tally is not None:
        tally[key] += count


_NODE_DECISIONS = ("passed", "rejected", "failed_unknown")
"""The `decision` label of archfit_node_decisions_total, in extender_call's `nodes` order."""


M = TypeVar("M", Counter, Gauge, Histogram, Info)


@dataclass(frozen=True, slots=True)
class Metric(Generic[M]):
    """One entry of the catalogue: what `Metrics` builds per instance, and the docs list."""

    kind: type[M]
    name: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    more: str = ""
    """What docs/operations.md says besides the help text (Markdown): label values, links."""

    def __get__(self, instance: object, owner: type[Any]) -> M:
        """What the type checker reads `metrics.requests` as: the metric the entry builds.

        At run time the entries have left the class (CATALOGUE) and each instance holds its
        own metric under the entry's name, a plain attribute: the interpreter specialises
        reading one, which a descriptor of the same name on the class would stop, on every
        read on the hot path."""
        raise AttributeError(f"{self.name} is built by Metrics.__init__")

    def build(self, registry: CollectorRegistry) -> M:
        """The metric, registered in `registry`."""
        buckets: dict[str, Any] = {"buckets": self.buckets} if self.buckets else {}
        built: M = self.kind(self.name, self.help, self.labels, registry=registry, **buckets)
        return built

    @property
    def exposed(self) -> str:
        """The name a scrape shows: a counter's ends in `_total`, an info's in `_info`."""
        if self.kind is Counter:
            return self.name.removesuffix("_total") + "_total"
        if self.kind is Info:
            return self.name + "_info"
        return self.name


def counter(name: str, help: str, labels: tuple[str, ...] = (), more: str = "") -> Metric[Counter]:
    """A counter's entry (a scrape shows its name ending in `_total`)."""
    return Metric(Counter, name, help, labels, more=more)


def gauge(name: str, help: str, labels: tuple[str, ...] = (), more: str = "") -> Metric[Gauge]:
    """A gauge's entry."""
    return Metric(Gauge, name, help, labels, more=more)


def histogram(
    name: str,
    help: str,
    labels: tuple[str, ...] = (),
    *,
    buckets: tuple[float, ...],
    more: str = "",
) -> Metric[Histogram]:
    """A histogram's entry, with its buckets."""
    return Metric(Histogram, name, help, labels, buckets, more)


class Metrics:
    """Every metric archfit exports, prefixed `archfit_`: the catalogue (module docstring)."""

    build_info = Metric(
        Info,
        "archfit_build",
        "The archfit build that is running.",
        more="Always 1, labelled `version` and `python`: which archfit and Python are running "
        "(beside the process, platform and GC collectors).",
    )

    gc_pause_seconds = histogram(
        "archfit_gc_pause_seconds",
        "How long each garbage collection stopped the process, by generation (0, 1, 2).",
        ("generation",),
        buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
        more="Every thread waits while a collection runs, the event loop's too: a pause is "
        "added to each request it meets. Full collections (generation 2) run every "
        "`server.gcIntervalSeconds`, between requests; how long they take grows with what "
        "the process holds ([Sizing](#sizing)).",
    )
    requests = counter(
        "archfit_requests",
        "Scheduler extender calls.",
        ("verb", "outcome"),
        more="`outcome`: ok, skipped, bad_request, internal_error.",
    )
    request_seconds = histogram(
        "archfit_request_duration_seconds",
        "Time to answer one extender call.",
        ("verb",),
        buckets=_LATENCY_BUCKETS,
    )
    node_decisions = counter(
        "archfit_node_decisions",
        "Filter outcomes per node; dry-run counts what would have happened.",
        ("decision", "mode"),
        more="`decision`: passed, rejected, failed_unknown; `mode`: enforce, dry-run.",
    )
    unknown_images = counter(
        "archfit_unknown_images",
        "Images whose platforms could not be learned for a request.",
        ("policy",),
    )
    skipped_pods = counter(
        "archfit_skipped_pods",
        "Pods not examined, and why.",
        ("reason",),
        more="`reason`: annotation, excluded_namespace, no_images.",
    )
    registry_waits = counter(
        "archfit_extender_registry_waits",
        "Extender calls that waited on a registry (a lookup no cache tier could answer): "
        "kube-scheduler, which decides one pod at a time, waited with them.",
        ("verb",),
        more="[How long the scheduler waits](#how-long-the-scheduler-waits).",
    )
    registry_requests = counter(
        "archfit_registry_requests",
        "HTTP requests sent to registries.",
        ("host", "method", "kind", "status"),
    )
    cache_lookups = counter(
        "archfit_cache_lookups",
        "Resolver cache lookups.",
        ("kind", "result"),
        more="`kind` `answer` counts images answered from the last 5 s of answers without "
        "asking the cache.",
    )
    cache_stale_answers = counter(
        "archfit_cache_stale_answers",
        "Tags answered from their last good digest (cache.staleIfErrorSeconds) because the "
        "registry failed, by the failure: Timeout, Unreachable, UnexpectedStatus.",
        ("error",),
    )
    registry_ratelimit_remaining = gauge(
        "archfit_registry_ratelimit_remaining",
        "Pulls left, as reported by a registry's ratelimit-remaining header.",
        ("host",),
        more="Docker Hub sends the header.",
    )
    credential_provider_runs = counter(
        "archfit_credential_provider_runs",
        "Credential provider plugin runs (cache misses), by outcome: ok or failed.",
        ("provider", "outcome"),
    )
    client_problems = counter(
        "archfit_client_problems",
        "Client mistakes and configuration problems, by cause: bad_request, unknown_path, "
        "no_node_index, disconnected, malformed_http, body_timeout, header_timeout, "
        "handshake_timeout, connection_limit, idle_connection_closed, certificate_refused, "
        "admission_unreadable_pod.",
        ("cause",),
    )
    nodes_known = gauge("archfit_node_index_nodes", "Nodes in the node index.")
    admissions = counter(
        "archfit_admission_reviews",
        "Pod admissions by outcome: mutated, unchanged, conflict (warned), unknown (failed "
        "open), gated (held until its images are known), skipped, dry_run, bad_request, error.",
        ("outcome",),
    )
    admission_changes = counter(
        "archfit_admission_changes",
        "Changes written into pods: required_affinity, preferred_affinity, toleration, "
        "scheduler_name, arch_choice (an arm64 share's side).",
        ("change",),
    )
    admission_seconds = histogram(
        "archfit_admission_duration_seconds",
        "Time to answer one AdmissionReview.",
        buckets=_LATENCY_BUCKETS,
    )
    workload_reviews = counter(
        "archfit_workload_reviews",
        "Workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob) admissions by "
        "outcome: warned, clean (nothing to warn about), unchanged (an UPDATE that kept the "
        "template's images and constraints: nothing looked up), unknown (an image not resolved "
        "in time: not warned about, looked up for next time), skipped, bad_request, error.",
        ("outcome",),
    )
    workload_warnings = counter(
        "archfit_workload_warnings",
        "Warnings sent to the client that created or updated a workload, by workload kind.",
        ("kind",),
    )
    workload_review_seconds = histogram(
        "archfit_workload_review_duration_seconds",
        "Time to answer one workload AdmissionReview.",
        buckets=_LATENCY_BUCKETS,
    )
    gated_pods = gauge(
        "archfit_gated_pods",
        "Pods held by archfit's scheduling gate now, as the releaser sees them (0 on replicas "
        "that do not hold the releaser's Lease).",
    )
    gate_oldest_seconds = gauge(
        "archfit_gate_oldest_seconds",
        "Age of the oldest pod held by archfit's gate (0 when none).",
    )
    gate_wait_seconds = histogram(
        "archfit_gate_wait_seconds",
        "From a held pod's creation to its release.",
        buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
    )
    gate_releases = counter(
        "archfit_gate_releases",
        "Held pods released, by outcome: resolved (every image known), fallback (released at "
        "the cap with webhook.gate.fallback), removed (someone else removed the gate).",
        ("outcome",),
    )
    gate_release_errors = counter(
        "archfit_gate_release_errors",
        "Release patches that failed, by cause: refused (422), conflict (409), error.",
        ("cause",),
    )
    webhook_certificate_expiry = gauge(
        "archfit_webhook_certificate_expiry_timestamp_seconds",
        "When the webhook's self-managed serving certificate expires (Unix time).",
    )
    releaser_leader = gauge(
        "archfit_releaser_leader",
        "1 while this replica holds the releaser's Lease (webhook.gate.leaseName), else 0.",
    )
    mismatch_findings = counter(
        "archfit_mismatch_findings",
        "Containers found failing on their node's platform by the mismatch watcher, each once, "
        "by reason: pull (no manifest), start (exec format error), run (in its log).",
        ("reason",),
    )
    mismatch_pods = gauge(
        "archfit_mismatch_pods",
        "Pods with a container failing on its node's platform now (0 on replicas that do not "
        "hold the watcher's Lease).",
        more="The alert [ArchfitPlatformMismatch](#archfitplatformmismatch) reads it.",
    )
    mismatch_evictions = counter(
        "archfit_mismatch_evictions",
        "Evictions asked by watcher.remediate, by outcome: evicted, refused (a "
        "PodDisruptionBudget, 429), gone, error.",
        ("outcome",),
    )
    evidence_entries = gauge(
        "archfit_evidence_entries",
        "Learned evidence entries (digest D does not run on platform P) this replica holds.",
    )
    watcher_log_queue = gauge(
        "archfit_watcher_log_queue",
        "Crash-looping containers whose previous log waits for a watcher.logsPerSecond slot "
        "(one entry per container, its latest restart).",
    )
    evidence_ignored = counter(
        "archfit_evidence_ignored_total",
        "Times learned evidence was not believed because it would leave an image no platform "
        "(no_platform) or a pod no node that runs it (no_node).",
        ("reason",),
    )
    watcher_leader = gauge(
        "archfit_watcher_leader",
        "1 while this replica holds the mismatch watcher's Lease (watcher.leaseName), else 0.",
    )
    policy_enabled = gauge(
        "archfit_policy_publisher_enabled",
        "1 when this replica contends to publish the admission policy's parameter (the setting "
        "is on and the cluster serves the policy API and archfit's CRD), else 0.",
    )
    policy_images = gauge(
        "archfit_policy_parameter_images",
        "Images in the admission policy's parameter at its last publish (admissionPolicy).",
        more="[One memory for the cluster](webhook.md#one-memory-for-the-cluster).",
    )
    policy_bytes = gauge(
        "archfit_policy_parameter_bytes",
        "Size of the admission policy's parameter spec as JSON at its last publish.",
    )
    policy_evicted = gauge(
        "archfit_policy_parameter_evicted_images",
        "Images left out of the parameter at its last publish to stay under "
        "admissionPolicy.maxBytes (their pods are held as unknown ones are).",
    )
    policy_published = gauge(
        "archfit_policy_parameter_published_timestamp_seconds",
        "When this replica last wrote the parameter, or found it current (Unix time; 0 on "
        "replicas that do not publish).",
        more="The alert [ArchfitPolicyParameterStale](#archfitpolicyparameterstale) reads its age.",
    )
    policy_publish_failures = counter(
        "archfit_policy_publish_failures",
        "Failed writes of the admission policy's parameter, by cause: conflict, refused (4xx), "
        "error.",
        ("cause",),
    )
    policy_left_out_namespaces = gauge(
        "archfit_policy_parameter_left_out_namespaces",
        "Namespaces that had images left out of the parameter at its last publish (the object's "
        "status.leftOut names the 100 with the most).",
    )
    policy_images_in_use = gauge(
        "archfit_policy_images_in_use",
        "Images (digest-pinned ones by digest) named by a pod of a namespace the policy applies "
        "to, on the publisher's leader (0 elsewhere).",
    )
    policy_unresolved = gauge(
        "archfit_policy_unresolved_images",
        "Images in use that the publisher's leader could not resolve yet: not in the parameter, "
        "so their new pods are held while archfit is down.",
    )
    policy_pods_indexed = gauge(
        "archfit_policy_pods_indexed",
        "Pods the publisher's leader follows (every namespace the policy applies to).",
    )
    policy_lookup_failures = counter(
        "archfit_policy_lookup_failures",
        "Lookups of the publisher's leader that failed (with every reference tried); the image "
        "is tried again after 5 s, 15 s, then every minute.",
    )
    policy_table_lookups = counter(
        "archfit_policy_table_lookups",
        "Lookups the shared table's tier saw, by what answered: cache (this replica's), table "
        "(the published object), table_late (the object learned the image while the registry "
        "was asked), registry.",
        ("answered_by",),
    )
    policy_publisher_leader = gauge(
        "archfit_policy_publisher_leader",
        "1 while this replica holds the publisher's Lease (admissionPolicy.leaseName), else 0.",
    )
    capacity_short_pods = gauge(
        "archfit_capacity_short_pods",
        "Pending pods whose platforms meet no node, no Karpenter NodePool and nothing declared "
        "(capacity.declared) now (0 on replicas that do not hold the capacity Lease).",
        more="The alert [ArchfitPodsWithoutCapacity](#archfitpodswithoutcapacity) reads it.",
    )
    capacity_events = counter(
        "archfit_capacity_events",
        "Events written because a pending pod's platforms meet none of the cluster's capacity, "
        "by object: pod, controller.",
        ("regarding",),
    )
    capacity_leader = gauge(
        "archfit_capacity_leader",
        "1 while this replica holds the capacity check's Lease (capacity.leaseName), else 0.",
        more="[Capacity](#capacity-pods-that-no-node-or-nodepool-can-run).",
    )

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        # What operators expect beside the custom metrics: CPU, memory, file descriptors,
        # start time, GC, and which build and Python are running.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        for attribute, metric in CATALOGUE:
            setattr(self, attribute, metric.build(self.registry))
        self.build_info.info({"version": __version__, "python": platform.python_version()})

    def extender_call(
        self,
        verb: str,
        outcome: str,
        seconds: float | None = None,
        *,
        skipped: str | None = None,
        nodes: tuple[int, int, int] | None = None,
        unknown_images: int = 0,
        failure_policy: str = "",
        dry_run: bool = False,
        registry_waits: int = 0,
    ) -> None:
        """Count one filter or prioritize call: every metric of the verbs is counted here.

        `nodes` is a filter's (passed, rejected, failed_unknown); dry-run counts what
        would have happened. `skipped` is why the pod was not examined (counted for filter
        only, so a pod is counted once per scheduling attempt).
        """
        child = self.child
        child(self.requests, verb, outcome).inc()
        if seconds is not None:
            child(self.request_seconds, verb).observe(seconds)
        if skipped is not None and verb == "filter":
            child(self.skipped_pods, skipped).inc()
        if nodes is not None:
            mode = "dry-run" if dry_run else "enforce"
            # Each series exists from the first call (child); adding 0 would only take its lock.
            for decision, count in zip(_NODE_DECISIONS, nodes, strict=True):
                series = child(self.node_decisions, decision, mode)
                if count:
                    series.inc(count)
        if unknown_images:
            child(self.unknown_images, failure_policy).inc(unknown_images)
        if registry_waits:
            child(self.registry_waits, verb).inc()

    def child(self, metric: Any, *labels: str) -> Any:
        """metric.labels(*labels), remembered: prometheus_client takes a lock and builds a
        key on every labels() call, which the hot path pays per request otherwise."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def cache_lookup(self, kind: str, result: str, count: int = 1) -> None:
        """Count `count` resolver cache lookups, globally and for the current request."""
        self.child(self.cache_lookups, kind, result).inc(count)
        tally = _request_tally.get()
        if tally is not None:
            tally[result] += count

    def admission_reviews_received(self) -> int:
        """AdmissionReviews received since start, whatever their outcome (/readyz shows it:
        zero long after pods were created means the API server cannot reach the webhook)."""
        return total_of(self.admissions)

    def stale_answer(self, error: str) -> None:
        """Count one tag answered from its last good digest."""
        self.child(self.cache_stale_answers, error).inc()

    def render(self) -> bytes:
        """The exposition text for GET /metrics."""
        return generate_latest(self.registry)


def _taken_from(cls: type[Any]) -> tuple[tuple[str, Metric[Any]], ...]:
    """The class's entries with the attributes that name them, in its order, removed from it."""
    entries = tuple((name, entry) for name, entry in vars(cls).items() if isinstance(entry, Metric))
    for name, _ in entries:
        delattr(cls, name)
    return entries


CATALOGUE = _taken_from(Metrics)
"""Each metric of the catalogue with the attribute of `Metrics` that holds it."""


def total_of(counter: Counter) -> int:
    """What a counter counted, over every label."""
    return int(
        sum(
            sample.value
            for family in counter.collect()
            for sample in family.samples
            if sample.name.endswith("_total")
        )
    )


def metrics_table() -> str:
    """docs/operations.md's metrics table, one row per metric of the catalogue."""
    lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for _, metric in CATALOGUE:
        meaning = f"{metric.help} {metric.more}".strip().replace("|", r"\|")
        labels = ", ".join(metric.labels)
        kind = metric.kind.__name__.lower()
        lines.append(f"| `{metric.exposed}` | {kind} | {labels} | {meaning} |")
    return "\n".join(lines) + "\n"
