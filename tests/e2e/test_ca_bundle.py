"""The self-managed certificate's caBundle against a real kube-apiserver: a GitOps sync that
reverts it (Argo CD, Flux: the configuration as in Git, without a caBundle) is undone at once,
from a watch of the configuration, not at the next `checkSeconds` (600 s)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from extender.config.loading import from_mapping
from extender.kube.webhook_certs import SelfManagedCertificate
from tests.e2e.cluster import kube_api
from tests.e2e.controlplane import ControlPlane
from tests.e2e.webhook import SHIPPED_WARNINGS, SHIPPED_WEBHOOK, shipped_configuration

pytestmark = pytest.mark.e2e

NAMESPACE = "archfit-system"
MUTATING, VALIDATING = "archfit", "archfit-workload-warnings"


@pytest.fixture
def admission(control_plane: ControlPlane) -> client.AdmissionregistrationV1Api:
    api = config.new_client_from_config(config_file=str(control_plane.admin_kubeconfig))
    core = client.CoreV1Api(api)
    with contextlib.suppress(client.ApiException):  # 409: it exists already
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    return client.AdmissionregistrationV1Api(api)


@pytest.fixture
async def kept(
    control_plane: ControlPlane, admission: client.AdmissionregistrationV1Api, tmp_path: Path
) -> AsyncIterator[SelfManagedCertificate]:
    """Both shipped configurations, and the certificate kept by one replica's keep()."""
    for delete in (admission.delete_mutating_webhook_configuration,
                   admission.delete_validating_webhook_configuration):  # fmt: skip
        for name in (MUTATING, VALIDATING):
            with contextlib.suppress(client.ApiException):
                delete(name)
    url = "https://127.0.0.1:9/"
    admission.create_mutating_webhook_configuration(shipped_configuration(url + "mutate"))
    admission.create_validating_webhook_configuration(
        shipped_configuration(url + "warn", SHIPPED_WARNINGS)
    )
    settings = from_mapping({"webhook": {
        "enabled": True,
        "certFile": str(tmp_path / "tls.crt"),
        "keyFile": str(tmp_path / "tls.key"),
        "certificate": {"selfManaged": True, "secretNamespace": NAMESPACE, "hosts": ["127.0.0.1"],
                        "checkSeconds": 600},
    }})  # fmt: skip
    api = kube_api(control_plane.admin_kubeconfig)
    manager = SelfManagedCertificate(api, settings.webhook)
    task = asyncio.create_task(manager.keep())
    try:
        await asyncio.wait_for(manager.first_pass.wait(), 30)
        yield manager
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        api.close()


def _bundles(read: Callable[[str], Any], name: str) -> list[bytes]:
    return [base64.b64decode(hook.client_config.ca_bundle or "") for hook in read(name).webhooks]


async def _seconds_until_set_again(read: Callable[[str], Any], name: str) -> float:
    started = time.monotonic()
    while not all(_bundles(read, name)):
        assert time.monotonic() - started < 20, f"{name}'s caBundle was not set again"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def test_a_sync_that_reverts_the_ca_bundle_is_undone_within_seconds(
    kept: SelfManagedCertificate, admission: client.AdmissionregistrationV1Api
) -> None:
    """Both configurations replaced as Git has them (no caBundle): set again in seconds."""
    reads = {
        MUTATING: (admission.read_mutating_webhook_configuration,
                   admission.replace_mutating_webhook_configuration, SHIPPED_WEBHOOK, "mutate"),
        VALIDATING: (admission.read_validating_webhook_configuration,
                     admission.replace_validating_webhook_configuration, SHIPPED_WARNINGS, "warn"),
    }  # fmt: skip
    took = {}
    for name, (read, replace, shipped, path) in reads.items():
        assert all(_bundles(read, name)), f"{name}: the first pass did not set it"
        synced = shipped_configuration(f"https://127.0.0.1:9/{path}", shipped)
        synced["metadata"]["resourceVersion"] = read(name).metadata.resource_version
        replace(name, synced)  # what a sync that owns the whole object does
        assert not any(_bundles(read, name))
        took[name] = await _seconds_until_set_again(read, name)
    assert {MUTATING: True, VALIDATING: True} == {name: s < 10 for name, s in took.items()}
