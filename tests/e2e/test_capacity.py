"""The capacity check against a real Karpenter (kwok provider): a Deployment of an amd64-only
image in a cluster whose only NodePool is arm64. archfit's webhook pins the pod to amd64,
nothing can launch amd64, and the capacity check says so on the pod and on the Deployment;
once an amd64 NodePool exists Karpenter launches from it and the pod binds, unchanged by
archfit meanwhile.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.archfit import archfit_command
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.catalog import Images
from tests.e2e.karpenter import KARPENTER_GROUP, NODE_POOLS, create_node_pools
from tests.e2e.processes import MAX_WAIT_SECONDS
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

REASON = "ArchfitNoCapacity"
AMD64_POOLS = [pool for pool in NODE_POOLS if pool.arch == "amd64"]


@pytest.fixture
def arm64_pools_only(autoscaled_controllers: AutoscaledCluster) -> Iterator[AutoscaledCluster]:
    """The session's amd64 NodePools deleted for the test, and put back after it."""
    custom = client.CustomObjectsApi(autoscaled_controllers.api_client)
    for pool in AMD64_POOLS:
        custom.delete_cluster_custom_object(KARPENTER_GROUP, "v1", "nodepools", pool.name)
    try:
        yield autoscaled_controllers
    finally:
        present = {
            item["metadata"]["name"]
            for item in custom.list_cluster_custom_object(KARPENTER_GROUP, "v1", "nodepools")[
                "items"
            ]
        }
        create_node_pools(
            autoscaled_controllers.api_client, [p for p in AMD64_POOLS if p.name not in present]
        )


def _events(core: client.CoreV1Api, namespace: str) -> list[Any]:
    return list(core.list_namespaced_event(namespace, field_selector=f"reason={REASON}").items)


def test_a_pod_no_node_pool_can_run_is_told_on_itself_and_its_deployment_then_binds(
    arm64_pools_only: AutoscaledCluster,
    autoscaled_namespace: str,
    autoscaled_settings: dict[str, Any],
    images: Images,
    tmp_path: Path,
) -> None:
    """No amd64 NodePool: an Event on the pod and on its Deployment, in the extender's words.
    An amd64 NodePool created: Karpenter launches from it and the pod binds."""
    autoscaled = arm64_pools_only
    reference = images.amd64_only.reference
    apps = client.AppsV1Api(autoscaled.api_client)
    labels = {"app": "api"}
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "containers": [
                {"name": "api", "image": reference, "resources": {"requests": {"cpu": "10m"}}}
            ],
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
        },
    }
    with autoscaled.serving_webhook(
        autoscaled_settings, autoscaled_namespace, images.multi.reference, tmp_path, extender=True
    ):
        apps.create_namespaced_deployment(
            autoscaled_namespace,
            {
                "metadata": {"name": "api"},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
            },
        )

        def told() -> list[Any]:
            found = _events(autoscaled.core, autoscaled_namespace)
            kinds = {event.involved_object.kind for event in found}
            return found if {"Pod", "Deployment"} <= kinds else []

        events = wait_for(told, f"{REASON} Events on the pod and its Deployment", MAX_WAIT_SECONDS)
        assert isinstance(events, list)
        expected = (
            f"no node or NodePool offers linux/amd64 for {reference}; NodePools: graviton (arm64)"
        )
        assert {("Pod", expected), ("Deployment", expected)} == {
            (e.involved_object.kind, e.message) for e in events
        }
        pod = next(e.involved_object.name for e in events if e.involved_object.kind == "Pod")
        assert [] == [launch for launch in autoscaled.launches() if launch.arch == "amd64"]

        create_node_pools(autoscaled.api_client, AMD64_POOLS)
        node = autoscaled.wait_scheduled(autoscaled_namespace, pod)
        launched = {launch.name: launch for launch in autoscaled.launches()}
        assert ("amd64", "general") == (launched[node].arch, launched[node].nodepool)


def test_the_audit_lists_a_workload_no_node_pool_can_run_as_a_blocker(
    arm64_pools_only: AutoscaledCluster,
    autoscaled_namespace: str,
    autoscaled_settings: dict[str, Any],
    images: Images,
    tmp_path: Path,
) -> None:
    """`archfit audit` against the real NodePools: the amd64-only StatefulSet "cannot run on
    this cluster's capacity"; the multi-arch one can (graviton launches arm64)."""
    apps = client.AppsV1Api(arm64_pools_only.api_client)
    for name, reference in (("api", images.amd64_only.reference), ("web", images.multi.reference)):
        labels = {"app": name}
        # A StatefulSet: only the Deployment and ReplicaSet controllers run here, so no pod is
        # made; the audit judges its template and its one replica.
        apps.create_namespaced_stateful_set(
            autoscaled_namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "serviceName": name,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": name, "image": reference}]},
                    },
                },
            },
        )
    config = tmp_path / "archfit.yaml"
    config.write_text(yaml.safe_dump(autoscaled_settings))
    done = subprocess.run(
        [*archfit_command(), "audit", "--config", str(config), "-n", autoscaled_namespace,
         "-o", "json", "--newer-tags", "0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    document = json.loads(done.stdout) if done.stdout else {}
    assert [("api", "cannot run on this cluster's capacity", ["linux/amd64"])] == [
        (item["name"], item["blocker"], item["needs"])
        for item in document.get("capacityBlockers") or []
    ], done.stderr
