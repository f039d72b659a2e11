"""A private image resolved with the pod's imagePullSecrets (scenario 5)."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.catalog import PRIVATE_USER, Images
from tests.e2e.stack import Stack
from tests.e2e.topology import ARCH_OF, REPLICAS, no_platform_message, replicas, schedule

pytestmark = pytest.mark.e2e
SECRET = "private-registry"


@pytest.fixture
def pull_secret(core: client.CoreV1Api, namespace: str, images: Images) -> str:
    """A dockerconfigjson Secret for the Basic-auth registry in the test's namespace."""
    cluster.docker_config_secret(core, namespace, SECRET, images.private_registry, *PRIVATE_USER)
    return SECRET


def test_a_private_arm64_only_image_lands_on_arm64_with_the_pods_pull_secret(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images, pull_secret: str
) -> None:
    """archfit reads the pod's imagePullSecrets and authenticates to the registry."""
    stack.ensure()
    pods = replicas("private", [images.private_arm64_only.reference], pull_secrets=[pull_secret])
    assert ["arm64"] * REPLICAS == schedule(core, namespace, pods)


def test_a_private_image_no_node_can_run_is_rejected_by_platform_with_the_pull_secret(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images, pull_secret: str
) -> None:
    """With credentials archfit knows the platforms, so it rejects rather than guesses."""
    stack.ensure()
    ref = images.private_s390x_only.reference
    manifest = cluster.pod_manifest("private", [ref], pull_secrets=[pull_secret])
    pod = cluster.create_pod(core, namespace, manifest)
    message = cluster.wait_failed_scheduling(core, namespace, pod)
    expected = no_platform_message(ref)
    assert expected == message[: len(expected)]


def test_a_private_image_without_a_pull_secret_is_unknown_and_passes_under_fail_open(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """The control for the two above: without the secret the registry's 401 means unknown."""
    stack.ensure({"policy": {"failurePolicy": "fail-open"}})
    ref = images.private_s390x_only.reference
    pod = cluster.create_pod(core, namespace, cluster.pod_manifest("anonymous", [ref]))
    assert cluster.wait_scheduled(core, namespace, pod) in ARCH_OF
