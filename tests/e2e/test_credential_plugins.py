"""A private image with no pull secret, resolved through a kubelet credential provider plugin.

The plugin is a real executable speaking the v1 exec protocol (tests/support), handing out
the Basic-auth registry's user, as ecr-credential-provider hands out an ECR token.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.catalog import PRIVATE_USER, Images
from tests.e2e.stack import Stack
from tests.e2e.topology import REPLICAS, no_platform_message, replicas, schedule
from tests.support.credential_plugin import ProviderPlugin

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory, images: Images) -> ProviderPlugin:
    """The test plugin, matching the private registry and answering per registry."""
    installed = ProviderPlugin.install(tmp_path_factory.mktemp("plugin"), [images.private_registry])
    user, password = PRIVATE_USER
    key = images.private_registry
    installed.behave("ok", key=key, username=user, password=password, cacheKeyType="Registry")
    return installed


def test_a_private_arm64_only_image_without_pull_secret_lands_on_arm64_through_the_plugin(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images, plugin: ProviderPlugin
) -> None:
    """No imagePullSecrets: the plugin's credential lets archfit read the platforms."""
    stack.ensure({"registry": {"credentialProviders": plugin.settings()}})
    pods = replicas("plugin", [images.private_arm64_only.reference])
    assert ["arm64"] * REPLICAS == schedule(core, namespace, pods)


def test_a_private_image_no_node_can_run_is_rejected_by_platform_through_the_plugin(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images, plugin: ProviderPlugin
) -> None:
    """Without the plugin this pod passes under fail-open; with it archfit knows and rejects."""
    stack.ensure({"registry": {"credentialProviders": plugin.settings()}})
    ref = images.private_s390x_only.reference
    pod = cluster.create_pod(core, namespace, cluster.pod_manifest("plugin-s390x", [ref]))
    message = cluster.wait_failed_scheduling(core, namespace, pod)
    expected = no_platform_message(ref)
    assert expected == message[: len(expected)]
    asked = {call["request"]["image"].split("/", 1)[0] for call in plugin.calls()}
    assert {images.private_registry} == asked
