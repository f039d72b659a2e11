"""Workloads as the audit sees them: pod template, replicas, requests, and whose pods are whose.

Pure functions over Kubernetes objects as the API serves them (camelCase JSON). A pod
template's spec is a pod spec, so images and pull secrets come from `extender.core.pods`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from extender.audit.pure import quantities
from extender.core import pods
from extender.core.platforms import node_platform
from extender.core.pods import PodError, PullSecretsRef, read_mapping, read_mapping_at
from extender.core.steering import CHOICE_LABEL, SIDES
from extender.errors import AuditInputError

AUDITED_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")
"""What the audit reads, in the order reports list them."""

_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


class WorkloadKey(NamedTuple):
    """Names a workload in reports and joins pods, events and lookups to it."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind.lower()}/{self.name}"


@dataclass(frozen=True, slots=True)
class Workload:
    """What one workload pulls and asks for."""

    key: WorkloadKey
    uid: str
    images: tuple[str, ...]
    """Init container and container images of its pod template, deduplicated, in order."""
    pull: PullSecretsRef
    """The template's imagePullSecrets and ServiceAccount, as kubelet would look them up."""
    replicas: int
    """Pods it asks for: spec.replicas, a DaemonSet's desired count, a Job's parallelism."""
    cpu_millis: int
    """CPU requested by one pod, in millicores (what the scheduler reserves)."""
    memory_bytes: int
    """Memory requested by one pod."""
    constraints: Mapping[str, Any] = field(default_factory=dict)
    """Its pod template's nodeSelector and affinity: where its pods may go, as written."""


class WorkloadError(AuditInputError):
    """A workload object lacks what the audit reads, or has the wrong type; names the field."""


def from_object(kind: str, obj: Mapping[str, Any]) -> Workload:
    """The Workload of a Deployment, StatefulSet, DaemonSet, Job, CronJob or Pod object.

    Raises WorkloadError naming the workload and the bad field.
    """
    metadata = read_mapping_at(obj, "metadata", WorkloadError)
    namespace = str(metadata.get("namespace") or "default")
    key = WorkloadKey(kind, namespace, str(metadata.get("name") or ""))
    try:
        spec = pods.template_spec(kind, obj)
        return Workload(
            key=key,
            uid=str(metadata.get("uid") or ""),
            images=pods.images(spec),
            pull=_pull(namespace, spec),
            replicas=_replicas(kind, obj),
            cpu_millis=_request(spec, "cpu", quantities.millicores),
            memory_bytes=_request(spec, "memory", quantities.whole),
            constraints={key: spec.get(key) for key in ("nodeSelector", "affinity")},
        )
    except (PodError, quantities.QuantityError, WorkloadError) as error:
        raise WorkloadError(f"{key}: {error}") from error


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the object's managing owner (`controller: true`), as kubectl finds it."""
    refs = read_mapping_at(obj, "metadata", WorkloadError).get("ownerReferences") or []
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid"):
            return str(ref["uid"])
    return None


def has_owner(obj: Mapping[str, Any]) -> bool:
    """Whether any ownerReference exists (a bare pod has none)."""
    return bool(read_mapping_at(obj, "metadata", WorkloadError).get("ownerReferences"))


class Owners:
    """Walks a pod's controller chain to its workload: Pod → ReplicaSet → Deployment,
    Pod → Job → CronJob, or straight to a StatefulSet, DaemonSet, Job (kubectl's way)."""

    def __init__(
        self, workloads: Iterable[Workload], intermediates: Iterable[Mapping[str, Any]]
    ) -> None:
        self._by_uid = {workload.uid: workload.key for workload in workloads if workload.uid}
        # ReplicaSets and Jobs: their own uid → their controller's uid.
        self._parent: dict[str, str] = {}
        for obj in intermediates:
            uid = read_mapping_at(obj, "metadata", WorkloadError).get("uid")
            parent = controller_uid(obj)
            if uid and parent:
                self._parent[str(uid)] = parent

    def of(self, pod: Mapping[str, Any]) -> WorkloadKey | None:
        """The audited workload a pod belongs to, or None (not audited, or unowned)."""
        uid = controller_uid(pod)
        if uid is None:
            uid = str(read_mapping_at(pod, "metadata", WorkloadError).get("uid") or "")
            return self._by_uid.get(uid) if not has_owner(pod) else None
        for _ in range(2):  # at most pod → ReplicaSet/Job → Deployment/CronJob
            if uid in self._by_uid:
                return self._by_uid[uid]
            if uid not in self._parent:
                return None
            uid = self._parent[uid]
        return self._by_uid.get(uid)


def node_architectures(nodes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Node name → architecture (`unknown` when the node names none)."""
    found: dict[str, str] = {}
    for node in nodes:
        metadata = read_mapping_at(node, "metadata", WorkloadError)
        labels = read_mapping_at(node, "metadata.labels", WorkloadError)
        info = read_mapping_at(node, "status.nodeInfo", WorkloadError)
        platform = node_platform(labels, info)
        found[str(metadata.get("name"))] = platform.architecture if platform else "unknown"
    return found


def running(
    pods_: Iterable[Mapping[str, Any]], owners: Owners, node_arch: Mapping[str, str]
) -> dict[WorkloadKey, Counter[str]]:
    """Pods bound to a node and not finished, per workload, counted per node architecture."""
    counts: dict[WorkloadKey, Counter[str]] = {}
    for pod in pods_:
        node = read_mapping_at(pod, "spec", WorkloadError).get("nodeName")
        phase = read_mapping_at(pod, "status", WorkloadError).get("phase")
        key = owners.of(pod)
        if key is None or not node or phase in _FINISHED_PHASES:
            continue
        counts.setdefault(key, Counter())[node_arch.get(str(node), "unknown")] += 1
    return counts


def arch_choices(
    pods_: Iterable[Mapping[str, Any]], owners: Owners
) -> dict[WorkloadKey, Counter[str]]:
    """Live pods an arm64 share placed (label `archfit.io/arch-choice`), per workload and side:
    the share each workload has reached, bound or not yet (docs/webhook.md)."""
    counts: dict[WorkloadKey, Counter[str]] = {}
    for pod in pods_:
        metadata = read_mapping_at(pod, "metadata", WorkloadError)
        side = read_mapping_at(pod, "metadata.labels", WorkloadError).get(CHOICE_LABEL)
        phase = read_mapping_at(pod, "status", WorkloadError).get("phase")
        if side not in SIDES or phase in _FINISHED_PHASES or metadata.get("deletionTimestamp"):
            continue
        key = owners.of(pod)
        if key is not None:
            counts.setdefault(key, Counter())[str(side)] += 1
    return counts


def _replicas(kind: str, obj: Mapping[str, Any]) -> int:
    spec = read_mapping_at(obj, "spec", WorkloadError)
    if kind in ("Deployment", "StatefulSet"):
        return _count(spec.get("replicas"), 1, "spec.replicas")
    if kind == "DaemonSet":
        # One pod per eligible node; only the DaemonSet controller knows how many.
        status = read_mapping_at(obj, "status", WorkloadError)
        return _count(status.get("desiredNumberScheduled"), 0, "status.desiredNumberScheduled")
    if kind == "Job":
        if _finished(read_mapping_at(obj, "status", WorkloadError)):
            return 0  # a finished Job holds no CPU, so it counts towards no share or saving
        return _count(spec.get("parallelism"), 1, "spec.parallelism")
    if kind == "CronJob":
        job = read_mapping_at(obj, "spec.jobTemplate.spec", WorkloadError)
        return _count(job.get("parallelism"), 1, "spec.jobTemplate.spec.parallelism")
    return 1


def _finished(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions") or []
    return any(
        isinstance(c, Mapping)
        and c.get("type") in ("Complete", "Failed")
        and c.get("status") == "True"
        for c in conditions
    )


def _request(spec: Mapping[str, Any], resource: str, parse: Any) -> int:
    """One pod's request as the scheduler computes it (k8s.io/component-helpers resource.
    PodRequests): containers and sidecars add up; each ordinary init container runs
    alone, so the pod needs the larger of that sum and any one of them."""
    total = 0
    for container in _containers(spec, "containers"):
        total += _container_request(container, resource, parse)
    peak_init = 0
    sidecars = 0
    for container in _containers(spec, "initContainers"):
        amount = _container_request(container, resource, parse)
        if container.get("restartPolicy") == "Always":
            sidecars += amount
            total += amount
        else:
            peak_init = max(peak_init, sidecars + amount)
    return max(total, peak_init)


def _container_request(container: Mapping[str, Any], resource: str, parse: Any) -> int:
    requests = read_mapping_at(container, "resources.requests", WorkloadError)
    # An unset request defaults to the limit (API defaulting does this on create).
    value = requests.get(resource)
    if value is None:
        value = read_mapping_at(container, "resources.limits", WorkloadError).get(resource)
    return int(parse(value)) if value is not None else 0


def _containers(spec: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    containers = spec.get(key) or []
    if not isinstance(containers, list):
        raise WorkloadError(f"{key} must be a list")
    return [read_mapping(container, key, WorkloadError) for container in containers]


def _pull(namespace: str, spec: Mapping[str, Any]) -> PullSecretsRef:
    # Build a one-off pod so kubelet's lookup order comes from one place (extender.core.pods).
    facts = pods.facts({"metadata": {"namespace": namespace, "name": "-"}, "spec": spec})
    return facts.pull


def _count(value: object, default: int, where: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WorkloadError(f"{where} must be a non-negative integer")
    return value
