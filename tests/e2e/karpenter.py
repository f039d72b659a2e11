"""Karpenter with its kwok cloud provider, as tests/e2e/build-karpenter.sh built it.

Its CRDs, the KWOKNodeClass it launches from, the NodePools it chooses between, and
the process itself, configured through the env vars of its kwok Helm chart
(sigs.k8s.io/karpenter kwok/charts/templates/deployment.yaml).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.processes import Process, http_ok
from tests.support.process import free_port
from tests.support.waiting import wait_for

KARPENTER_GROUP = "karpenter.sh"
KWOK_GROUP = "karpenter.kwok.sh"
NODE_CLASS = "default"
#: Labels Karpenter and its kwok provider put on every Node they launch.
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
#: Annotation the kwok provider puts on its Nodes (kwok/apis/v1alpha1/labels.go KwokLabelKey).
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


@dataclass(frozen=True)
class KarpenterBuild:
    """What tests/e2e/build-karpenter.sh left in its cache directory."""

    directory: Path

    @property
    def executable(self) -> Path:
        """sigs.k8s.io/karpenter/kwok, Karpenter's main with the kwok cloud provider."""
        return self.directory / "karpenter-kwok"

    @property
    def crds(self) -> list[Path]:
        """The CRD manifests copied from the module: NodePool, NodeClaim, ..., KWOKNodeClass."""
        return sorted((self.directory / "crds").glob("*.yaml"))


@dataclass(frozen=True)
class NodePoolSpec:
    """A NodePool that launches one architecture; the higher weight is tried first."""

    name: str
    arch: str
    weight: int


#: The usual Graviton setup: arm64 preferred (weight 30) over amd64 (weight 10).
NODE_POOLS = (NodePoolSpec("graviton", "arm64", 30), NodePoolSpec("general", "amd64", 10))


def install_crds(api_client: client.ApiClient, manifests: Iterable[Path]) -> None:
    """Create each CRD and wait until the apiserver serves it (condition Established)."""
    extensions = client.ApiextensionsV1Api(api_client)
    names = []
    for manifest in manifests:
        document = yaml.safe_load(manifest.read_text())
        extensions.create_custom_resource_definition(document)
        names.append(document["metadata"]["name"])

    def established(name: str) -> bool:
        conditions = extensions.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    for name in names:
        wait_for(lambda name=name: established(name), f"CRD {name} to be established")


def create_node_class(api_client: client.ApiClient) -> None:
    """Create the KWOKNodeClass every NodePool launches from, and report it Ready.

    A cloud provider's own controller marks its NodeClass Ready (a NodePool whose
    NodeClass is not Ready launches nothing: pkg/controllers/nodepool/readiness); kwok
    has no such controller, so the harness plays it.
    """
    custom = client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object(
        KWOK_GROUP,
        "v1alpha1",
        "kwoknodeclasses",
        {
            "apiVersion": f"{KWOK_GROUP}/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": NODE_CLASS},
        },
    )
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": "",
        "lastTransitionTime": cluster.timestamp(),
    }
    custom.patch_cluster_custom_object_status(
        KWOK_GROUP,
        "v1alpha1",
        "kwoknodeclasses",
        NODE_CLASS,
        {"status": {"conditions": [ready]}},
    )


def node_pool_manifest(pool: NodePoolSpec) -> dict[str, Any]:
    """A NodePool for one architecture that never removes a node while a test runs."""
    return {
        "apiVersion": f"{KARPENTER_GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": pool.name},
        "spec": {
            "weight": pool.weight,
            "template": {
                "spec": {
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": [pool.arch]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "nodeClassRef": {
                        "group": KWOK_GROUP,
                        "kind": "KWOKNodeClass",
                        "name": NODE_CLASS,
                    },
                    "expireAfter": "Never",
                }
            },
            # Nodes leave only through reset(): no consolidation, and a budget of zero
            # nodes blocks every other voluntary disruption too.
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "Never",
                "budgets": [{"nodes": "0"}],
            },
            "limits": {"cpu": "1000"},
        },
    }


def create_node_pools(api_client: client.ApiClient, pools: Iterable[NodePoolSpec]) -> None:
    """Create the NodePools."""
    custom = client.CustomObjectsApi(api_client)
    for pool in pools:
        custom.create_cluster_custom_object(
            KARPENTER_GROUP, "v1", "nodepools", node_pool_manifest(pool)
        )


class Karpenter:
    """The Karpenter process (kwok provider) with its admin kubeconfig, leader election off.

    Upstream binds its metrics and health servers to ":<port>", every interface, with no
    flag for the address (pkg/operator/operator.go NewOperator); the ports are random
    free ones and nothing is served but metrics and probes.
    """

    def __init__(self, build: KarpenterBuild, kubeconfig: Path, workdir: Path) -> None:
        self.health_port = free_port()
        metrics_port = free_port()
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            # One replica; a lease would only delay the start.
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(metrics_port),
            "HEALTH_PROBE_PORT": str(self.health_port),
            "LOG_LEVEL": "debug",
        }
        self.process = Process("karpenter", [build.executable], workdir, env=env)

    def start(self) -> Karpenter:
        """Start Karpenter and wait until /readyz says its caches synced and CRDs resolve."""
        self.process.start()
        self.process.wait_ready(lambda: http_ok(f"http://127.0.0.1:{self.health_port}/readyz"))
        return self

    def stop(self) -> None:
        """Stop Karpenter."""
        self.process.stop()
