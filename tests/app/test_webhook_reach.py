"""Two ways the webhook silently does nothing, and how archfit says so itself: /readyz counts
the AdmissionReviews received, and a start-up warning names cloud registries the nodes use
that no configured credential source serves (deploy/README.md, "When the webhook does
nothing")."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import web
from structlog.testing import capture_logs

from extender.config.loading import from_mapping
from extender.kube.client.api import KubeApi, connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.nodes import node_images
from extender.registry.cloud_check import warn_unserved_registries
from tests.app.test_webhook import Start, review, start  # noqa: F401 (the fixture)
from tests.objects import pod

ECR_IMAGE = "602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/pause:3.10"


async def test_readyz_counts_the_admission_reviews_received(start: Start) -> None:  # noqa: F811
    """Zero until the API server calls; every call counts, a refused body included."""
    hook = await start()
    before = (await (await hook.client.get("/readyz")).json())["webhookCalls"]
    await hook.admit(pod("acme/amd:1"))
    await hook.call(review(pod("acme/multi:1")))
    await hook.call(b"{not json", status=400)
    after = (await (await hook.client.get("/readyz")).json())["webhookCalls"]
    assert (0, 3) == (before, after)


async def _nodes_api(aiohttp_server: Any, images: list[str]) -> KubeApi:
    """An API server whose one node reports `images` in status.images."""

    async def nodes(request: web.Request) -> web.Response:
        item = {"metadata": {"name": "n1"}, "status": {"images": [{"names": images}]}}
        return web.json_response({"kind": "NodeList", "apiVersion": "v1", "items": [item]})

    app = web.Application()
    app.router.add_get("/api/v1/nodes", nodes)
    server = await aiohttp_server(app)
    return connect(RestConfig(host=f"http://127.0.0.1:{server.port}"))


async def test_nodes_running_ecr_images_without_a_credential_source_are_warned_about(
    aiohttp_server: Any,
) -> None:
    """EKS without the credential provider: every ECR image would be unknown."""
    api = await _nodes_api(aiohttp_server, [ECR_IMAGE, "docker.io/library/nginx:1.27"])
    settings = from_mapping({"webhook": {"enabled": True}})
    with capture_logs() as logs:
        warned = await asyncio.to_thread(
            warn_unserved_registries, partial(node_images, api), settings.registry
        )
    api.close()
    (line,) = [e for e in logs if e["event"] == "webhook_cloud_registry_without_credentials"]
    assert (["ECR"], "warning", ["602401143452.dkr.ecr.eu-west-1.amazonaws.com"]) == (
        warned,
        line["log_level"],
        line["registries"],
    )


async def test_a_credential_provider_for_ecr_silences_the_warning(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    """The plugin's matchImages cover the registry: nothing to say."""
    plugins = tmp_path / "credential-providers.yaml"
    plugins.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "- name: ecr-credential-provider\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "  matchImages: ['*.dkr.ecr.*.amazonaws.com']\n  defaultCacheDuration: 12h\n"
    )
    api = await _nodes_api(aiohttp_server, [ECR_IMAGE])
    settings = from_mapping(
        {
            "webhook": {"enabled": True},
            "registry": {
                "credentialProviders": {"configPath": str(plugins), "binDir": str(tmp_path)}
            },
        }
    )
    with capture_logs() as logs:
        warned = await asyncio.to_thread(
            warn_unserved_registries, partial(node_images, api), settings.registry
        )
    api.close()
    assert ([], []) == (warned, [e["event"] for e in logs])
