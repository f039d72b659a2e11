"""A real Karpenter (kwok provider) choosing between the `graviton` (arm64, weight 30)
and `general` (amd64, weight 10) NodePools, in a cluster that starts with no nodes.

The control run has no archfit at all: Karpenter launches from the heavier pool and an
amd64-only pod lands on arm64 (the trap). The "with archfit" runs register archfit's
webhook through the shipped MutatingWebhookConfiguration and give kube-scheduler the
extender as shipped; Karpenter then reads the constraint the webhook wrote into each pod.
Every test starts from zero nodes (`autoscaled` resets before and after) and prints its
launches (`pytest -s`), which the notes quote.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import cluster
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.catalog import Images
from tests.e2e.webhook import WebhookArchfit

pytestmark = pytest.mark.e2e


def test_without_archfit_an_amd64_only_pod_gets_an_arm64_node_from_the_heavier_pool(
    autoscaled: AutoscaledCluster, autoscaled_namespace: str, images: Images
) -> None:
    """Control run: Karpenter sees no platform constraint, launches arm64, the pod binds."""
    autoscaled.start_scheduler(url_prefix=None)
    pod = cluster.create_pod(
        autoscaled.core,
        autoscaled_namespace,
        cluster.pod_manifest("amd64-only", [images.amd64_only.reference]),
    )

    node = autoscaled.wait_scheduled(autoscaled_namespace, pod)

    launches = autoscaled.launches()
    # The launches per variant are quoted in the notes; `pytest -s` shows them.
    print(f"control run (no archfit) launches: {[str(launch) for launch in launches]}")
    assert [(node, "arm64", "graviton")] == [
        (launch.name, launch.arch, launch.nodepool) for launch in launches
    ], f"launches: {launches}"


@pytest.fixture
def with_archfit(
    autoscaled: AutoscaledCluster,
    autoscaled_namespace: str,
    autoscaled_settings: dict[str, Any],
    images: Images,
    tmp_path: Path,
) -> Iterator[WebhookArchfit]:
    """archfit with its webhook registered and called, and the scheduler calling its extender."""
    with autoscaled.serving_webhook(
        autoscaled_settings, autoscaled_namespace, images.multi.reference, tmp_path, extender=True
    ) as hook:
        yield hook


@pytest.mark.parametrize(
    ("image", "arch", "pool"),
    [
        ("amd64_only", "amd64", "general"),
        ("multi", "arm64", "graviton"),
        ("arm64_only", "arm64", "graviton"),
    ],
)
def test_with_archfit_karpenter_launches_a_node_the_pods_images_run_on(
    autoscaled: AutoscaledCluster,
    autoscaled_namespace: str,
    images: Images,
    with_archfit: WebhookArchfit,
    image: str,
    arch: str,
    pool: str,
) -> None:
    """The webhook's required arch affinity steers Karpenter; the pod binds to the new node."""
    reference = getattr(images, image).reference
    pod = cluster.create_pod(
        autoscaled.core,
        autoscaled_namespace,
        cluster.pod_manifest(image.replace("_", "-"), [reference]),
    )
    node = autoscaled.wait_scheduled(autoscaled_namespace, pod)
    launches = autoscaled.launches()
    print(f"with archfit, {image} launches: {[str(launch) for launch in launches]}")
    assert [(node, arch, pool)] == [
        (launch.name, launch.arch, launch.nodepool) for launch in launches
    ], f"launches: {launches}"


def test_with_archfit_a_mixed_batch_gets_one_node_per_architecture_and_every_pod_binds(
    autoscaled: AutoscaledCluster,
    autoscaled_namespace: str,
    images: Images,
    with_archfit: WebhookArchfit,
) -> None:
    """amd64-only, multi-arch and arm64-only pods together: one amd64 and one arm64 node.

    Single-arch pods land on their architecture. Multi-arch pods may take whichever node is
    Ready first (both fit); alone, one gets a graviton node (the test above).
    """
    names = [
        cluster.create_pod(
            autoscaled.core, autoscaled_namespace, cluster.pod_manifest(f"{kind}-{i}", [ref])
        )
        for i in range(2)
        for kind, ref in (
            ("amd64", images.amd64_only.reference),
            ("multi", images.multi.reference),
            ("arm64", images.arm64_only.reference),
        )
    ]
    nodes = {name: autoscaled.wait_scheduled(autoscaled_namespace, name) for name in names}
    launches = {launch.name: launch for launch in autoscaled.launches()}
    print(f"with archfit, mixed batch launches: {[str(launch) for launch in launches.values()]}")
    placed = {name: launches[node].arch for name, node in nodes.items()}
    single_arch = {name: arch for name, arch in placed.items() if not name.startswith("multi")}
    assert {
        "amd64-0": "amd64",
        "amd64-1": "amd64",
        "arm64-0": "arm64",
        "arm64-1": "arm64",
    } == single_arch
    assert {"multi-0", "multi-1"} <= set(placed)  # every pod binds
    assert [("amd64", "general"), ("arm64", "graviton")] == sorted(
        (launch.arch, launch.nodepool) for launch in launches.values()
    )
