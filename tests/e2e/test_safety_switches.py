"""The opt-out annotation, the prefer-arch annotation and dry-run mode (scenario 8)."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.catalog import Images
from tests.e2e.stack import Stack
from tests.e2e.topology import ARCH_OF, REPLICAS, replicas, schedule

pytestmark = pytest.mark.e2e


def test_a_pod_annotated_skip_is_neither_filtered_nor_scored(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """`archfit.io/skip: "true"` binds a pod that enforcing archfit would keep Pending."""
    stack.ensure()
    manifest = cluster.pod_manifest(
        "skip", [images.s390x_only.reference], annotations={"archfit.io/skip": "true"}
    )
    pod = cluster.create_pod(core, namespace, manifest)
    assert cluster.wait_scheduled(core, namespace, pod) in ARCH_OF


def test_a_pod_annotated_prefer_arch_amd64_lands_on_amd64(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """`archfit.io/prefer-arch: amd64` overrides the cluster's arm64 preference."""
    stack.ensure()
    pods = replicas(
        "prefer", [images.multi.reference], annotations={"archfit.io/prefer-arch": "amd64"}
    )
    assert ["amd64"] * REPLICAS == schedule(core, namespace, pods)


def test_dry_run_mode_never_rejects_a_node(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """In dry-run a pod no node can run still binds; archfit only logs and counts."""
    stack.ensure({"policy": {"mode": "dry-run"}})
    pod = cluster.create_pod(
        core, namespace, cluster.pod_manifest("dry", [images.s390x_only.reference])
    )
    assert cluster.wait_scheduled(core, namespace, pod) in ARCH_OF


def test_dry_run_mode_never_scores_so_the_scheduler_spreads_a_multi_arch_pod(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """Without archfit's arm64 score, big pods spread one per node by least allocation."""
    stack.ensure({"policy": {"mode": "dry-run"}})
    # A quarter of a node each: the scheduler's own scoring then prefers empty nodes,
    # where enforcing archfit's +100 for arm64 would pile all four onto arm64 nodes.
    pods = replicas("spread", [images.multi.reference], cpu="4")
    assert ["amd64", "amd64", "arm64", "arm64"] == sorted(schedule(core, namespace, pods))
