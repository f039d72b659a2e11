"""Workload, ReplicaSet, Job, pod and event JSON as the API serves them, for audit tests."""

from __future__ import annotations

from typing import Any

from extender.audit.pure.workloads import Workload, WorkloadKey
from extender.core.pods import PullSecretsRef


def container(name: str, image: str, cpu: str | None = "100m", memory: str = "64Mi") -> dict:
    """A container with requests (none when cpu is None)."""
    body: dict[str, Any] = {"name": name, "image": image}
    if cpu is not None:
        body["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
    return body


def pod_spec(*images: str, init: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    """A pod spec with one container per image."""
    spec: dict[str, Any] = {"containers": [container(f"c{i}", im) for i, im in enumerate(images)]}
    if init:
        spec["initContainers"] = [container(f"init{i}", im) for i, im in enumerate(init)]
    spec.update(extra)
    return spec


def meta(name: str, namespace: str = "shop", owner: str | None = None, kind: str = "") -> dict:
    """metadata with a uid derived from the name, and a controller ownerReference if asked."""
    body: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner is not None:
        body["ownerReferences"] = [
            {"kind": kind, "name": owner, "uid": f"uid-{owner}", "controller": True}
        ]
    return body


def workload_object(kind: str, name: str, spec: dict[str, Any], **fields: Any) -> dict:
    """A Deployment/StatefulSet/DaemonSet/Job (template), CronJob (job template) or Pod."""
    if kind == "Pod":
        return {"metadata": meta(name), "spec": spec}
    status = fields.pop("status", {})
    body: dict[str, Any] = {"template": {"spec": spec}, **fields}
    if kind == "CronJob":
        body = {"schedule": "@daily", "jobTemplate": {"spec": body}}
    return {"metadata": meta(name), "spec": body, "status": status}


def workload(
    name: str,
    *images: str,
    kind: str = "Deployment",
    replicas: int = 1,
    cpu_millis: int = 1000,
    pull: PullSecretsRef | None = None,
) -> Workload:
    """A parsed Workload, for report tests."""
    return Workload(
        key=WorkloadKey(kind, "shop", name),
        uid=f"uid-{name}",
        images=images,
        pull=pull or PullSecretsRef("shop"),
        replicas=replicas,
        cpu_millis=cpu_millis,
        memory_bytes=1 << 30,
    )


def running_pod(name: str, node: str, owner: str | None, kind: str = "", **status: Any) -> dict:
    """A pod bound to node, owned by owner (a controller of kind)."""
    return {
        "metadata": meta(name, owner=owner, kind=kind),
        "spec": {"nodeName": node, "containers": [container("c0", "app:1")]},
        "status": {"phase": "Running", **status},
    }


def arch_node(name: str, arch: str) -> dict:
    """A node with only its architecture label."""
    return {"metadata": {"name": name, "labels": {"kubernetes.io/arch": arch}}}
