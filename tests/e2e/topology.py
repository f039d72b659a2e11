"""The nodes every scenario runs against, and helpers that speak in architectures."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.e2e import cluster
from tests.e2e.controlplane import Binaries, ControlPlane

#: Two nodes per architecture, so grouped reasons read "2 node(s) ...".
NODES = (
    cluster.NodeSpec("arm64-a", "arm64"),
    cluster.NodeSpec("arm64-b", "arm64"),
    cluster.NodeSpec("amd64-a", "amd64"),
    cluster.NodeSpec("amd64-b", "amd64"),
)
ARCH_OF: Mapping[str, str] = {node.name: node.arch for node in NODES}

#: Pods per placement assertion: with a broken filter or score each pod would land on
#: the wrong architecture half the time, so four right placements by luck is 1 in 16.
REPLICAS = 4


def schedule(
    core: client.CoreV1Api, namespace: str, manifests: Iterable[dict[str, Any]]
) -> list[str]:
    """Create the pods, wait until each is bound, and return the architectures they got."""
    names = [cluster.create_pod(core, namespace, manifest) for manifest in manifests]
    return [ARCH_OF[cluster.wait_scheduled(core, namespace, name)] for name in names]


def replicas(name: str, images: list[str], **pod: Any) -> list[dict[str, Any]]:
    """REPLICAS pod manifests named name-0, name-1, ... with the same images."""
    return [cluster.pod_manifest(f"{name}-{i}", images, **pod) for i in range(REPLICAS)]


def no_platform_message(ref: str) -> str:
    """How a FailedScheduling message starts when `ref` runs on none of the nodes: one
    clause per node platform, as kube-scheduler groups archfit's reasons."""
    return (
        f"0/4 nodes are available: "
        f"2 node(s) didn't match image platform: {ref} has no linux/amd64, "
        f"2 node(s) didn't match image platform: {ref} has no linux/arm64."
    )


@contextlib.contextmanager
def control_plane_with_nodes(binaries: Binaries, workdir: Path) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver of their own on loopback, in `workdir`, with NODES registered;
    stopped on leaving the block, or at once when the start fails."""
    plane = ControlPlane(binaries, workdir).start()
    try:
        core = cluster.core_api(plane.admin_kubeconfig)
        for node in NODES:
            cluster.create_node(core, node)
        yield plane
    finally:
        plane.stop()
