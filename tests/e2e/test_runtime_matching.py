"""`policy.matching: auto` through the real scheduler: nodes judged by the runtime they report.

Four arm64 nodes that differ only in status.nodeInfo.containerRuntimeVersion and the
archfit.io/aarch32 label exist for this module alone: they are created before its tests and
deleted after them, so every other scenario keeps seeing the four shared nodes ("0/4 nodes
are available").
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.catalog import Images
from tests.e2e.stack import Stack
from tests.e2e.topology import NODES, REPLICAS
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

#: containerd 2.0 pulls with platforms.Only(), which pulls arm/v7 onto arm64; containerd 2.2
#: (OnlyStrict) and CRI-O (containers/image: arm64 wants v8) do not. Pulling is not running:
#: by default only a node labelled archfit.io/aarch32 (its CPUs run 32-bit Arm) gets it. The
#: shared nodes report "none://0", a runtime archfit does not know, and are judged strictly.
CONTAINERD_2_0 = cluster.NodeSpec("arm64-containerd-2-0", "arm64", runtime="containerd://2.0.5")
CONTAINERD_2_0_AARCH32 = cluster.NodeSpec(
    "arm64-containerd-2-0-aarch32",
    "arm64",
    runtime="containerd://2.0.5",
    labels=(("archfit.io/aarch32", "true"),),
)
CONTAINERD_2_2 = cluster.NodeSpec("arm64-containerd-2-2", "arm64", runtime="containerd://2.2.0")
CRI_O = cluster.NodeSpec("arm64-cri-o", "arm64", runtime="cri-o://1.31.2")
RUNTIME_NODES = (CONTAINERD_2_0, CONTAINERD_2_0_AARCH32, CONTAINERD_2_2, CRI_O)


@pytest.fixture(scope="module")
def runtime_nodes(core: client.CoreV1Api) -> Iterator[None]:
    """The runtime nodes, for this module only."""
    try:
        for spec in RUNTIME_NODES:
            cluster.create_node(core, spec)
        yield
    finally:
        for spec in RUNTIME_NODES:
            try:
                core.delete_node(spec.name)
            except client.ApiException as error:
                if error.status != 404:
                    raise
        wait_for(
            lambda: len(core.list_node().items) == len(NODES),
            "the runtime nodes to be deleted",
        )


@pytest.fixture(scope="module", params=[True, False], ids=["nodeCache", "fullNodes"])
def auto_matching(stack: Stack, runtime_nodes: None, request: pytest.FixtureRequest) -> Stack:
    """archfit with default settings (`matching: auto`), in both scheduler modes."""
    node_cache_capable: bool = request.param
    ensured = stack.ensure({"kubernetes": {"nodeIndex": node_cache_capable}}, node_cache_capable)
    if node_cache_capable:
        # A node the index has not seen yet is unknown, and fail-open would pass it.
        assert ensured.archfit is not None
        expected = len(NODES) + len(RUNTIME_NODES)
        wait_for(lambda: ensured.archfit.indexed_nodes() == expected, "archfit to index nodes")
    return ensured


def test_an_arm_v7_only_image_lands_only_on_the_labelled_arm64_node_running_containerd_2_0(
    auto_matching: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Of six arm64 nodes two pull 32-bit arm, and only the one labelled as running it gets it."""
    ref = images.armv7_only.reference
    names = [
        cluster.create_pod(core, namespace, cluster.pod_manifest(f"armv7-{i}", [ref]))
        for i in range(REPLICAS)
    ]
    placed = [cluster.wait_scheduled(core, namespace, name) for name in names]
    assert [CONTAINERD_2_0_AARCH32.name] * REPLICAS == placed


@pytest.mark.parametrize(
    "node", [CONTAINERD_2_0, CONTAINERD_2_2, CRI_O], ids=lambda spec: spec.name
)
def test_an_arm_v7_only_image_pinned_to_a_node_that_cannot_run_it_stays_pending_with_a_reason(
    auto_matching: Stack,
    core: client.CoreV1Api,
    namespace: str,
    images: Images,
    node: cluster.NodeSpec,
) -> None:
    """Unlabelled containerd 2.0, containerd 2.2 and CRI-O arm64 nodes are rejected, with the
    reason in the event."""
    ref = images.armv7_only.reference
    manifest = cluster.pod_manifest(
        "pinned", [ref], node_selector={"kubernetes.io/hostname": node.name}
    )
    pod = cluster.create_pod(core, namespace, manifest)
    message = cluster.wait_failed_scheduling(core, namespace, pod)
    expected = f"1 node(s) didn't match image platform: {ref} has no linux/arm64"
    assert expected in message, message
