"""archfit's node index follows the real apiserver's watch (scenario 6, nodeCacheCapable)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.catalog import Images
from tests.e2e.stack import Stack
from tests.e2e.topology import NODES
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e
LATE = cluster.NodeSpec("s390x-late", "s390x")


def indexed_nodes(stack: Stack) -> int | None:
    """archfit's `archfit_node_index_nodes` gauge."""
    assert stack.archfit is not None
    return stack.archfit.indexed_nodes()


@pytest.fixture
def remove_late_node(core: client.CoreV1Api) -> Iterator[None]:
    """Delete the late node after the test, if it created it."""
    yield
    try:
        core.delete_node(LATE.name)
    except client.ApiException as error:
        if error.status != 404:
            raise


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
