"""Where pods land, through the real kube-scheduler calling archfit (scenarios 1-4 and 6).

Every scenario runs twice: with `nodeCacheCapable: true`, where archfit judges node
names against its own index of the real apiserver's Nodes, and with `false`, where the
scheduler sends full Node objects and archfit's node index is off.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.catalog import Images
from tests.e2e.stack import Stack
from tests.e2e.topology import REPLICAS, no_platform_message, replicas, schedule

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=[True, False], ids=["nodeCache", "fullNodes"])
def enforcing(stack: Stack, request: pytest.FixtureRequest) -> Stack:
    """archfit enforcing with the default arm64 preference, in both scheduler modes."""
    node_cache_capable: bool = request.param
    # With full Node objects in each request archfit needs no index; turning it off
    # proves the labels it judges come from the request.
    return stack.ensure({"kubernetes": {"nodeIndex": node_cache_capable}}, node_cache_capable)


def test_a_multi_arch_image_lands_on_arm64_when_both_architectures_fit(
    enforcing: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Prioritize's arm64 preference wins through the scheduler's real weight math."""
    placed = schedule(core, namespace, replicas("multi", [images.multi.reference]))
    assert ["arm64"] * REPLICAS == placed


def test_the_arm64_preference_outweighs_the_schedulers_spreading_of_big_pods(
    enforcing: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Score x weight x 10 = +100 beats least-allocation, which alone spreads these pods."""
    # A quarter of a node each (test_safety_switches shows they spread without archfit).
    placed = schedule(core, namespace, replicas("big", [images.multi.reference], cpu="4"))
    assert ["arm64"] * REPLICAS == placed


def test_an_amd64_only_image_lands_on_amd64_nodes_only(
    enforcing: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Filter keeps an amd64-only image off arm64 nodes, despite the arm64 preference."""
    placed = schedule(core, namespace, replicas("amd64", [images.amd64_only.reference]))
    assert ["amd64"] * REPLICAS == placed


def test_an_arm64_only_image_lands_on_arm64_nodes_only(
    enforcing: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Filter keeps an arm64-only image off amd64 nodes."""
    placed = schedule(core, namespace, replicas("arm64", [images.arm64_only.reference]))
    assert ["arm64"] * REPLICAS == placed


def test_an_amd64_only_init_container_restricts_a_multi_arch_pod_to_amd64(
    enforcing: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Init container images count like container images."""
    pods = replicas("init", [images.multi.reference], init_images=[images.amd64_only.reference])
    assert ["amd64"] * REPLICAS == schedule(core, namespace, pods)


def test_an_image_with_no_platform_among_the_nodes_stays_pending_with_reasons_per_platform(
    enforcing: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """The FailedScheduling event groups archfit's reason by node platform."""
    ref = images.s390x_only.reference
    pod = cluster.create_pod(core, namespace, cluster.pod_manifest("s390x", [ref]))
    message = cluster.wait_failed_scheduling(core, namespace, pod)
    expected = no_platform_message(ref)
    assert expected == message[: len(expected)]
    # FailedAndUnresolvableNodes: the scheduler does not try preemption for a mismatch.
    assert "4 Preemption is not helpful for scheduling" in message
    assert cluster.node_of(core, namespace, pod) is None
