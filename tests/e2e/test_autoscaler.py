"""A real Karpenter (kwok provider) choosing between the `graviton` (arm64, weight 30)
and `general` (amd64, weight 10) NodePools, in a cluster that starts with no nodes.

This file holds the control run, with no archfit at all. The "with archfit" variant
(webhook plus the extender in the scheduler as shipped) comes with the webhook work.
Its tests take the `autoscaled` fixture (reset to zero nodes before and after each
test), `autoscaled_namespace` and `images`. They register the webhook against
`autoscaled.control_plane`, call `autoscaled.start_scheduler(archfit.url_prefix)`, and
compare `autoscaled.launches()` with what they expect.
"""

from __future__ import annotations

import pytest

from tests.e2e import cluster
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.catalog import Images

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
