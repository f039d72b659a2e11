"""Cluster objects for scenarios: kubelet-less nodes, namespaces, pods, events.

Thin helpers over the kubernetes Python client, with bounded waits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from extender.kube.client.api import KubeApi, connect
from extender.kube.client.kubeconfig import ClientConfig, LoadingRules, read_files
from tests.e2e.processes import MAX_WAIT_SECONDS
from tests.support.pull_secrets import docker_config, secret_manifest
from tests.support.waiting import wait_for


def core_api(kubeconfig: Path) -> client.CoreV1Api:
    """A CoreV1Api that authenticates with the given kubeconfig."""
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def kube_api(kubeconfig: Path, host: str | None = None) -> KubeApi:
    """archfit's own API client for the kubeconfig's current context (optionally through
    another host:port), as `archfit serve` builds it."""
    config = ClientConfig(read_files(LoadingRules(explicit=str(kubeconfig)))).rest_config()
    if host is not None:
        config = dataclasses.replace(config, host=host)
    return connect(config, {})


@dataclass(frozen=True)
class NodeSpec:
    """A node as the scheduler sees it: platform labels and room for pods."""

    name: str
    arch: str
    os: str = "linux"
    cpu: str = "16"
    memory: str = "64Gi"
    pods: str = "250"
    runtime: str = "none://0"
    """status.nodeInfo.containerRuntimeVersion; archfit reads its matching rule from it."""
    labels: tuple[tuple[str, str], ...] = ()
    """More labels, such as archfit.io/aarch32."""


def create_node(core: client.CoreV1Api, spec: NodeSpec) -> None:
    """Create a Ready node with platform labels, capacity and no taints."""
    core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": spec.name,
                "labels": {
                    "kubernetes.io/arch": spec.arch,
                    "kubernetes.io/os": spec.os,
                    "kubernetes.io/hostname": spec.name,
                    **dict(spec.labels),
                },
            },
        }
    )
    # The TaintNodesByCondition admission plugin taints every new node not-ready; the
    # node lifecycle controller would lift it once the kubelet reports Ready. Neither
    # runs here, so lift it by hand.
    core.patch_node(spec.name, {"spec": {"taints": None}})
    resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": spec.pods}
    status = ready_status(spec.arch, spec.os, spec.runtime)
    status.update(capacity=resources, allocatable=resources)
    core.patch_node_status(spec.name, {"status": status})


def timestamp() -> str:
    """Now, as the API's RFC 3339 timestamps in whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def ready_status(arch: str, os: str, runtime: str = "containerd://2.1.4") -> dict[str, Any]:
    """The Node status a kubelet would report: Ready, on this platform, with this runtime."""
    now = timestamp()
    return {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "e2e node without a kubelet",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
        "nodeInfo": {
            "architecture": arch,
            "operatingSystem": os,
            "kubeletVersion": "v0.0.0-e2e",
            "containerRuntimeVersion": runtime,
            "kernelVersion": "",
            "osImage": "",
            "bootID": "",
            "machineID": "",
            "systemUUID": "",
            "kubeProxyVersion": "",
        },
    }


def create_namespace(core: client.CoreV1Api, name: str) -> None:
    """Create a namespace with its default ServiceAccount (no controller-manager makes it)."""
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_service_account(
        name, {"metadata": {"name": "default"}, "automountServiceAccountToken": False}
    )


@contextlib.contextmanager
def scratch_namespace(core: client.CoreV1Api, prefix: str) -> Iterator[str]:
    """A new namespace for one test; its pods are deleted afterwards."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    create_namespace(core, name)
    try:
        yield name
    finally:
        delete_namespace_pods(core, name)


def delete_namespace_pods(core: client.CoreV1Api, namespace: str) -> None:
    """Delete every pod in namespace at once; without kubelets they go immediately."""
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    wait_for(
        lambda: not core.list_namespaced_pod(namespace).items,
        f"pods in {namespace} to be deleted",
    )


def docker_config_secret(
    core: client.CoreV1Api, namespace: str, name: str, registry: str, username: str, password: str
) -> None:
    """Create a kubernetes.io/dockerconfigjson pull secret for one registry."""
    config = docker_config(registry, username, password, fields=True)
    core.create_namespaced_secret(namespace, secret_manifest(namespace, name, config))


def pod_manifest(
    name: str,
    images: Iterable[str],
    init_images: Iterable[str] = (),
    annotations: Mapping[str, str] | None = None,
    pull_secrets: Iterable[str] = (),
    cpu: str = "10m",
    node_selector: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod with one container per image, requests of cpu each, and no service-account token."""

    def containers(prefix: str, refs: Iterable[str]) -> list[dict[str, Any]]:
        return [
            {
                "name": f"{prefix}{index}",
                "image": ref,
                "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}},
            }
            for index, ref in enumerate(refs)
        ]

    spec: dict[str, Any] = {
        "containers": containers("c", images),
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
    }
    init = containers("init", init_images)
    if init:
        spec["initContainers"] = init
    secrets = [{"name": secret} for secret in pull_secrets]
    if secrets:
        spec["imagePullSecrets"] = secrets
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": spec,
    }


def create_pod(core: client.CoreV1Api, namespace: str, manifest: dict[str, Any]) -> str:
    """Create the pod and return its name."""
    core.create_namespaced_pod(namespace, manifest)
    return str(manifest["metadata"]["name"])


def node_of(core: client.CoreV1Api, namespace: str, pod: str) -> str | None:
    """The node the pod is bound to, or None."""
    spec = core.read_namespaced_pod(pod, namespace).spec
    return str(spec.node_name) if spec and spec.node_name else None


def wait_scheduled(
    core: client.CoreV1Api, namespace: str, pod: str, timeout: float = MAX_WAIT_SECONDS
) -> str:
    """Wait until the pod is bound and return its node; the error names the last events."""
    try:
        return str(
            wait_for(
                lambda: node_of(core, namespace, pod), f"pod {pod} to be bound", seconds=timeout
            )
        )
    except TimeoutError as error:
        raise TimeoutError(
            f"{error}; events: {scheduling_messages(core, namespace, pod)}"
        ) from None


def scheduling_messages(core: client.CoreV1Api, namespace: str, pod: str) -> list[str]:
    """Messages of the pod's FailedScheduling events, oldest first."""
    events = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={pod},reason=FailedScheduling"
    ).items
    events.sort(key=lambda e: str(e.metadata.creation_timestamp))
    return [str(e.message) for e in events]


def wait_failed_scheduling(
    core: client.CoreV1Api, namespace: str, pod: str, timeout: float = MAX_WAIT_SECONDS
) -> str:
    """Wait for the pod's first FailedScheduling event and return its message."""
    messages = wait_for(
        lambda: scheduling_messages(core, namespace, pod),
        f"a FailedScheduling event for pod {pod}",
        seconds=timeout,
    )
    return str(messages[0])  # type: ignore[index]
