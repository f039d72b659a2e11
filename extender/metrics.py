"""Prometheus metrics, one registry per app instance (no module globals)."""

from __future__ import annotations

import platform
from collections import defaultdict
from contextvars import ContextVar
from typing import Any

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


class Metrics:
    """Every metric archfit exports, prefixed `archfit_`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        # What operators expect beside the custom metrics: CPU, memory, file descriptors,
        # start time, GC, and which build and Python are running.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        Info("archfit_build", "The archfit build that is running.", registry=r).info(
            {"version": __version__, "python": platform.python_version()}
        )
        self.requests = Counter(
            "archfit_requests", "Scheduler extender calls.", ["verb", "outcome"], registry=r
        )
        self.request_seconds = Histogram(
            "archfit_request_duration_seconds",
            "Time to answer one extender call.",
            ["verb"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.node_decisions = Counter(
            "archfit_node_decisions",
            "Filter outcomes per node; dry-run counts what would have happened.",
            ["decision", "mode"],
            registry=r,
        )
        self.unknown_images = Counter(
            "archfit_unknown_images",
            "Images whose platforms could not be learned for a request.",
            ["policy"],
            registry=r,
        )
        self.skipped_pods = Counter(
            "archfit_skipped_pods", "Pods not examined, and why.", ["reason"], registry=r
        )
        self.registry_waits = Counter(
            "archfit_extender_registry_waits",
            "Extender calls that waited on a registry (a lookup no cache tier could answer): "
            "kube-scheduler, which decides one pod at a time, waited with them.",
            ["verb"],
            registry=r,
        )
        self.registry_requests = Counter(
            "archfit_registry_requests",
            "HTTP requests sent to registries.",
            ["host", "method", "kind", "status"],
            registry=r,
        )
        self.cache_lookups = Counter(
            "archfit_cache_lookups", "Resolver cache lookups.", ["kind", "result"], registry=r
        )
        self.cache_stale_answers = Counter(
            "archfit_cache_stale_answers",
            "Tags answered from their last good digest (cache.staleIfErrorSeconds) because the "
            "registry failed, by the failure: Timeout, Unreachable, UnexpectedStatus.",
            ["error"],
            registry=r,
        )
        self.registry_ratelimit_remaining = Gauge(
            "archfit_registry_ratelimit_remaining",
            "Pulls left, as reported by a registry's ratelimit-remaining header.",
            ["host"],
            registry=r,
        )
        self.credential_provider_runs = Counter(
            "archfit_credential_provider_runs",
            "Credential provider plugin runs (cache misses), by outcome: ok or failed.",
            ["provider", "outcome"],
            registry=r,
        )
        self.client_problems = Counter(
            "archfit_client_problems",
            "Client mistakes and configuration problems, by cause: bad_request, unknown_path, "
            "no_node_index, "
            "disconnected, malformed_http, body_timeout, header_timeout, handshake_timeout, "
            "connection_limit, idle_connection_closed, certificate_refused, "
            "admission_unreadable_pod.",
            ["cause"],
            registry=r,
        )
        self.nodes_known = Gauge("archfit_node_index_nodes", "Nodes in the node index.", registry=r)
        self.admissions = Counter(
            "archfit_admission_reviews",
            "Pod admissions by outcome: mutated, unchanged, conflict (warned), unknown "
            "(failed open), gated (held until its images are known), skipped, dry_run, "
            "bad_request, error.",
            ["outcome"],
            registry=r,
        )
        self.admission_changes = Counter(
            "archfit_admission_changes",
            "Changes written into pods: required_affinity, preferred_affinity, toleration, "
            "scheduler_name, arch_choice (an arm64 share's side).",
            ["change"],
            registry=r,
        )
        self.admission_seconds = Histogram(
            "archfit_admission_duration_seconds",
            "Time to answer one AdmissionReview.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.workload_reviews = Counter(
            "archfit_workload_reviews",
            "Workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob) admissions "
            "by outcome: warned, clean (nothing to warn about), unchanged (an UPDATE that kept "
            "the template's images and constraints: nothing looked up), unknown (an image not "
            "resolved in time: not warned about, looked up for next time), skipped, "
            "bad_request, error.",
            ["outcome"],
            registry=r,
        )
        self.workload_warnings = Counter(
            "archfit_workload_warnings",
            "Warnings sent to the client that created or updated a workload, by workload kind.",
            ["kind"],
            registry=r,
        )
        self.workload_review_seconds = Histogram(
            "archfit_workload_review_duration_seconds",
            "Time to answer one workload AdmissionReview.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.gated_pods = Gauge(
            "archfit_gated_pods",
            "Pods held by archfit's scheduling gate now, as the releaser sees them (0 on "
            "replicas that do not hold the releaser's Lease).",
            registry=r,
        )
        self.gate_oldest_seconds = Gauge(
            "archfit_gate_oldest_seconds",
            "Age of the oldest pod held by archfit's gate (0 when none).",
            registry=r,
        )
        self.gate_wait_seconds = Histogram(
            "archfit_gate_wait_seconds",
            "From a held pod's creation to its release.",
            buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
            registry=r,
        )
        self.gate_releases = Counter(
            "archfit_gate_releases",
            "Held pods released, by outcome: resolved (every image known), fallback (released "
            "at the cap with webhook.gate.fallback), removed (someone else removed the gate).",
            ["outcome"],
            registry=r,
        )
        self.gate_release_errors = Counter(
            "archfit_gate_release_errors",
            "Release patches that failed, by cause: refused (422), conflict (409), error.",
            ["cause"],
            registry=r,
        )
        self.webhook_certificate_expiry = Gauge(
            "archfit_webhook_certificate_expiry_timestamp_seconds",
            "When the webhook's self-managed serving certificate expires (Unix time).",
            registry=r,
        )
        self.releaser_leader = Gauge(
            "archfit_releaser_leader",
            "1 while this replica holds the releaser's Lease (webhook.gate.leaseName), else 0.",
            registry=r,
        )
        # Read by the alerts ArchfitPodsHeldTooLong and ArchfitNoReleaser (deploy/monitoring).
        self.mismatch_findings = Counter(
            "archfit_mismatch_findings",
            "Containers found failing on their node's platform by the mismatch watcher, each "
            "once, by reason: pull (no manifest), start (exec format error), run (in its log).",
            ["reason"],
            registry=r,
        )
        self.mismatch_pods = Gauge(
            "archfit_mismatch_pods",
            "Pods with a container failing on its node's platform now (0 on replicas that do "
            "not hold the watcher's Lease).",
            registry=r,
        )
        self.mismatch_evictions = Counter(
            "archfit_mismatch_evictions",
            "Evictions asked by watcher.remediate, by outcome: evicted, refused (a "
            "PodDisruptionBudget, 429), gone, error.",
            ["outcome"],
            registry=r,
        )
        self.evidence_entries = Gauge(
            "archfit_evidence_entries",
            "Learned evidence entries (digest D does not run on platform P) this replica holds.",
            registry=r,
        )
        self.watcher_log_queue = Gauge(
            "archfit_watcher_log_queue",
            "Crash-looping containers whose previous log waits for a watcher.logsPerSecond slot"
            " (one entry per container, its latest restart).",
            registry=r,
        )
        self.evidence_ignored = Counter(
            "archfit_evidence_ignored_total",
            "Times learned evidence was not believed because it would leave an image no"
            " platform (no_platform) or a pod no node that runs it (no_node).",
            ["reason"],
            registry=r,
        )
        self.watcher_leader = Gauge(
            "archfit_watcher_leader",
            "1 while this replica holds the mismatch watcher's Lease (watcher.leaseName), else 0.",
            registry=r,
        )
        # Read by the alert ArchfitPlatformMismatch (deploy/monitoring).
        self.policy_enabled = Gauge(
            "archfit_policy_publisher_enabled",
            "1 when this replica contends to publish the admission policy's parameter (the "
            "setting is on and the cluster serves the policy API and archfit's CRD), else 0.",
            registry=r,
        )
        self.policy_images = Gauge(
            "archfit_policy_parameter_images",
            "Images in the admission policy's parameter at its last publish (admissionPolicy).",
            registry=r,
        )
        self.policy_bytes = Gauge(
            "archfit_policy_parameter_bytes",
            "Size of the admission policy's parameter spec as JSON at its last publish.",
            registry=r,
        )
        self.policy_evicted = Gauge(
            "archfit_policy_parameter_evicted_images",
            "Images left out of the parameter at its last publish to stay under "
            "admissionPolicy.maxBytes (their pods are held as unknown ones are).",
            registry=r,
        )
        self.policy_published = Gauge(
            "archfit_policy_parameter_published_timestamp_seconds",
            "When this replica last wrote the parameter, or found it current (Unix time; 0 on "
            "replicas that do not publish).",
            registry=r,
        )
        self.policy_publish_failures = Counter(
            "archfit_policy_publish_failures",
            "Failed writes of the admission policy's parameter, by cause: conflict, refused "
            "(4xx), error.",
            ["cause"],
            registry=r,
        )
        self.policy_left_out_namespaces = Gauge(
            "archfit_policy_parameter_left_out_namespaces",
            "Namespaces that had images left out of the parameter at its last publish (the "
            "object's status.leftOut names the 100 with the most).",
            registry=r,
        )
        self.policy_images_in_use = Gauge(
            "archfit_policy_images_in_use",
            "Images (digest-pinned ones by digest) named by a pod of a namespace the policy "
            "applies to, on the publisher's leader (0 elsewhere).",
            registry=r,
        )
        self.policy_unresolved = Gauge(
            "archfit_policy_unresolved_images",
            "Images in use that the publisher's leader could not resolve yet: not in the "
            "parameter, so their new pods are held while archfit is down.",
            registry=r,
        )
        self.policy_pods_indexed = Gauge(
            "archfit_policy_pods_indexed",
            "Pods the publisher's leader follows (every namespace the policy applies to).",
            registry=r,
        )
        self.policy_lookup_failures = Counter(
            "archfit_policy_lookup_failures",
            "Lookups of the publisher's leader that failed (with every reference tried); the "
            "image is tried again after 5 s, 15 s, then every minute.",
            registry=r,
        )
        self.policy_table_lookups = Counter(
            "archfit_policy_table_lookups",
            "Lookups the shared table's tier saw, by what answered: cache (this replica's), "
            "table (the published object), table_late (the object learned the image while "
            "the registry was asked), registry.",
            ["answered_by"],
            registry=r,
        )
        self.policy_publisher_leader = Gauge(
            "archfit_policy_publisher_leader",
            "1 while this replica holds the publisher's Lease (admissionPolicy.leaseName), else 0.",
            registry=r,
        )
        # Read by the alert ArchfitPolicyParameterStale (deploy/monitoring).
        self.capacity_short_pods = Gauge(
            "archfit_capacity_short_pods",
            "Pending pods whose platforms meet no node, no Karpenter NodePool and nothing "
            "declared (capacity.declared) now (0 on replicas that do not hold the capacity "
            "Lease).",
            registry=r,
        )
        self.capacity_events = Counter(
            "archfit_capacity_events",
            "Events written because a pending pod's platforms meet none of the cluster's "
            "capacity, by object: pod, controller.",
            ["regarding"],
            registry=r,
        )
        self.capacity_leader = Gauge(
            "archfit_capacity_leader",
            "1 while this replica holds the capacity check's Lease (capacity.leaseName), else 0.",
            registry=r,
        )
        # Read by the alerts ArchfitPodsWithoutCapacity and ArchfitNoCapacityCheck.

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
        return int(
            sum(
                sample.value
                for metric in self.admissions.collect()
                for sample in metric.samples
                if sample.name.endswith("_total")
            )
        )

    def stale_answer(self, error: str) -> None:
        """Count one tag answered from its last good digest."""
        self.child(self.cache_stale_answers, error).inc()

    def render(self) -> bytes:
        """The exposition text for GET /metrics."""
        return generate_latest(self.registry)
