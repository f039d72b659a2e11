"""When archfit or a registry is down (scenario 7)."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.catalog import Images
from tests.e2e.stack import Stack
from tests.e2e.topology import ARCH_OF

pytestmark = pytest.mark.e2e


def test_pods_schedule_by_the_scheduler_rules_alone_while_archfit_is_down(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """With `ignorable: true` an unreachable archfit lets every node pass."""
    stack.ensure()
    stack.stop_archfit()
    # Enforcing archfit keeps this pod Pending (test_placement); without archfit it binds.
    pod = cluster.create_pod(
        core, namespace, cluster.pod_manifest("down", [images.s390x_only.reference])
    )
    assert cluster.wait_scheduled(core, namespace, pod) in ARCH_OF


def test_a_registry_outage_under_fail_open_lets_every_node_pass(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Unknown platforms are not "unsupported": under fail-open the pod binds."""
    stack.ensure({"policy": {"failurePolicy": "fail-open"}})
    pod = cluster.create_pod(
        core, namespace, cluster.pod_manifest("outage", [images.unreachable_s390x_only.reference])
    )
    assert cluster.wait_scheduled(core, namespace, pod) in ARCH_OF


def test_a_registry_outage_under_fail_closed_keeps_the_pod_pending_with_an_unknown_reason(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Under fail-closed every node goes to FailedNodes with archfit's unknown-platform reason."""
    stack.ensure({"policy": {"failurePolicy": "fail-closed"}})
    ref = images.unreachable_s390x_only.reference
    pod = cluster.create_pod(core, namespace, cluster.pod_manifest("outage", [ref]))
    message = cluster.wait_failed_scheduling(core, namespace, pod)
    expected = (
        f"0/4 nodes are available: "
        f"4 node(s) couldn't verify image platform: platforms of {ref} are unknown: "
    )
    assert expected == message[: len(expected)]
    # FailedNodes, not FailedAndUnresolvableNodes: the scheduler considers preemption.
    assert "Preemption is not helpful" not in message
    assert cluster.node_of(core, namespace, pod) is None
