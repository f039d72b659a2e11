"""archfit's node index follows the real apiserver's watch (scenario 6, nodeCacheCapable)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kubernetes import client

from extender.core.platforms import Rule, parse
from extender.kube.nodes import NodeIndex
from tests.e2e import cluster
from tests.e2e.catalog import Images
from tests.e2e.controlplane import ControlPlane
from tests.e2e.stack import Stack
from tests.e2e.topology import NODES
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e
LATE = cluster.NodeSpec("s390x-late", "s390x")
PAGED = cluster.NodeSpec("paged-late", "arm64", runtime="cri-o://1.31.2")


def indexed_nodes(stack: Stack) -> int | None:
    """archfit's `archfit_node_index_nodes` gauge."""
    assert stack.archfit is not None
    return stack.archfit.indexed_nodes()


@pytest.fixture
def remove_late_node(core: client.CoreV1Api) -> Iterator[None]:
    """Delete the late node after the test, if it created it."""
    yield
    delete_if_there(core, LATE.name)


def delete_if_there(core: client.CoreV1Api, name: str) -> None:
    try:
        core.delete_node(name)
    except client.ApiException as error:
        if error.status != 404:
            raise


def test_the_index_lists_in_pages_and_follows_add_modify_and_delete(
    control_plane: ControlPlane, core: client.CoreV1Api
) -> None:
    """Pages of two nodes cover the whole list; the watch adds, relabels and drops a node."""
    api = cluster.kube_api(control_plane.admin_kubeconfig)
    index = NodeIndex(api, page_size=2)
    index.start()
    try:
        wait_for(lambda: index.synced, "the first node list")
        assert {n.name for n in NODES} == set(index.snapshot())
        # Four nodes at two a page: two pages, each its own request to the apiserver.
        assert (1, 2) == (index.relists, index.pages)
        cluster.create_node(core, PAGED)
        # Created bare, then its status patched in: the runtime comes with the second event.
        wait_for(
            lambda: (
                index.snapshot().get(PAGED.name)
                == (parse("linux/arm64"), Rule.CONTAINERS_IMAGE, False)
            ),
            "the watch to add the node, then its runtime",
        )
        core.patch_node(PAGED.name, {"metadata": {"labels": {"kubernetes.io/arch": "amd64"}}})
        wait_for(
            lambda: index.snapshot()[PAGED.name][0] == parse("linux/amd64"),
            "the watch to relabel the node",
        )
        core.delete_node(PAGED.name)
        wait_for(lambda: PAGED.name not in index.snapshot(), "the watch to drop the node")
        assert 1 == index.relists  # all of it through the one watch, no relist
    finally:
        asyncio.run(index.stop())
        api.close()
        delete_if_there(core, PAGED.name)


def test_a_node_added_after_archfit_started_is_judged_by_its_labels(
    stack: Stack,
    core: client.CoreV1Api,
    namespace: str,
    images: Images,
    remove_late_node: None,
) -> None:
    """Under fail-closed an unknown node is rejected; the watch makes the late one known."""
    stack.ensure({"policy": {"failurePolicy": "fail-closed"}}, node_cache_capable=True)
    assert len(NODES) == wait_for(lambda: indexed_nodes(stack), "archfit's node index")
    cluster.create_node(core, LATE)
    # Only a watch event can bring the count up: the list ran before the node existed.
    wait_for(lambda: indexed_nodes(stack) == len(NODES) + 1, "archfit to index the late node")
    pod = cluster.create_pod(
        core, namespace, cluster.pod_manifest("late", [images.s390x_only.reference])
    )
    assert LATE.name == cluster.wait_scheduled(core, namespace, pod)
