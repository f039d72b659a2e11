"""KubeSecretSource through archfit's API client against a local API-server stand-in."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from extender.core.pods import PullSecretsRef
from extender.kube.client.api import KubeApi, connect
from extender.kube.client.errors import ApiError
from extender.kube.client.rest_config import RestConfig
from extender.kube.pull_secrets import KubeSecretSource
from extender.registry.pure.credentials import DOCKER_CONFIG_JSON
from tests.support.clock import FakeClock
from tests.support.pull_secrets import auth_field, secret_manifest

pytestmark = pytest.mark.integration


@dataclass
class FakeApi:
    """Serves Secrets and ServiceAccounts at the core/v1 paths, counting reads."""

    objects: dict[str, dict[str, object]] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)
    refuse: bool = False
    """Answer 403 to everything, as RBAC would."""

    async def handle(self, request: web.Request) -> web.Response:
        self.reads.append(request.path)
        if self.refuse:
            return web.json_response({"kind": "Status", "code": 403}, status=403)
        found = self.objects.get(request.path)
        if found is None:
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                      "reason": "NotFound", "message": "not found"}  # fmt: skip
            return web.json_response(status, status=404)
        return web.json_response(found)


@dataclass
class Api:
    """The fake API server and an API client pointed at it."""

    fake: FakeApi
    api_client: KubeApi


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    """A served FakeApi and a client for it (closed after the test)."""
    fake = FakeApi()
    app = web.Application()
    app.router.add_get("/{tail:.*}", fake.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    api_client = connect(RestConfig(host=f"http://127.0.0.1:{server.port}"))
    try:
        yield Api(fake, api_client)
    finally:
        api_client.close()
        await server.close()


def _account(namespace: str, name: str, secrets: list[str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
            "imagePullSecrets": [{"name": s} for s in secrets]}  # fmt: skip


async def test_pod_secrets_come_before_the_service_accounts_and_missing_ones_are_skipped(
    api: Api,
) -> None:
    """Order: the pod's imagePullSecrets, then its ServiceAccount's; a 404 Secret is left out."""
    base = "/api/v1/namespaces/team-a"
    payload = {"auths": {"r.io": {"auth": auth_field("u", "p")}}}
    api.fake.objects.update(
        {
            f"{base}/secrets/pod-secret": secret_manifest("team-a", "pod-secret", payload),
            f"{base}/secrets/sa-secret": secret_manifest("team-a", "sa-secret", payload),
            f"{base}/serviceaccounts/builder": _account(
                "team-a", "builder", ["sa-secret", "pod-secret", "gone"]
            ),
        }
    )
    source = KubeSecretSource(api.api_client, ttl_seconds=60)
    found = await source.pull_secrets(PullSecretsRef("team-a", ("pod-secret",), "builder"))
    await source.aclose()
    expected = [("pod-secret", DOCKER_CONFIG_JSON, json.dumps(payload).encode()),
                ("sa-secret", DOCKER_CONFIG_JSON, json.dumps(payload).encode())]  # fmt: skip
    assert expected == [(s.name, s.type, s.data[".dockerconfigjson"]) for s in found]


async def test_secrets_are_reused_within_the_ttl(api: Api) -> None:
    """A second pod in the namespace costs no API reads while the TTL lasts."""
    base = "/api/v1/namespaces/team-a"
    api.fake.objects[f"{base}/secrets/regcred"] = secret_manifest(
        "team-a", "regcred", {"auths": {}}
    )
    source = KubeSecretSource(api.api_client, ttl_seconds=60)
    pull = PullSecretsRef("team-a", ("regcred",), "default")
    for _ in range(3):
        await source.pull_secrets(pull)
    await source.aclose()
    expected = sorted([f"{base}/serviceaccounts/default", f"{base}/secrets/regcred"])
    assert expected == sorted(api.fake.reads)


async def test_secrets_and_missing_ones_are_read_again_once_the_ttl_has_passed(api: Api) -> None:
    """A rotated secret is seen after `ttl_seconds`; a missing one is remembered as missing."""
    base = "/api/v1/namespaces/team-a"
    api.fake.objects[f"{base}/secrets/regcred"] = secret_manifest(
        "team-a", "regcred", {"auths": {}}
    )
    clock = FakeClock()
    source = KubeSecretSource(api.api_client, ttl_seconds=60, clock=clock)
    pull = PullSecretsRef("team-a", ("regcred", "absent"), "")
    reads: list[int] = []
    for advance in (0, 59, 1):
        clock.advance(advance)
        await source.pull_secrets(pull)
        reads.append(len(api.fake.reads))
    await source.aclose()
    assert [2, 2, 4] == reads


async def test_an_api_error_other_than_not_found_propagates(api: Api) -> None:
    """403 (RBAC) is an error for the caller, which then goes on anonymously."""
    api.fake.refuse = True
    source = KubeSecretSource(api.api_client)
    with pytest.raises(ApiError):
        await source.pull_secrets(PullSecretsRef("team-a", ("regcred",), ""))
    await source.aclose()
