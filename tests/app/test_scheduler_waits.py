"""How long kube-scheduler waits on archfit: a registry that ran one call out of time is not
waited on again, by prioritize after filter or by the next pod (docs/operations.md, "How long
the scheduler waits"). A real registry behind a front that holds every answer."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from extender.server import create_app
from tests.app.conftest import post, settings
from tests.objects import args_full, node, pod
from tests.support.delaying_proxy import DelayingProxy

pytestmark = pytest.mark.integration

NODES = (node("amd-1", "amd64"), node("arm-1", "arm64"))


@pytest.fixture
def held_registry(public_registry):
    """The public registry behind a front that answers nothing until released."""
    with DelayingProxy(public_registry.registry.url) as front:
        front.hang()
        yield front
        front.hang(False)


@pytest.fixture
async def client(aiohttp_client, held_registry):
    app = create_app(
        settings(
            registry={
                "hosts": {held_registry.host: {"plainHttp": True}},
                "allowedNetworks": ["127.0.0.1/32"],
            },
            policy={"resolveDeadlineSeconds": 0.3},
        )
    )
    return await aiohttp_client(app)


def _image(front: DelayingProxy, catalog_image) -> str:
    """The catalog image's reference through the front."""
    return catalog_image.reference.replace(catalog_image.reference.split("/", 1)[0], front.host)


async def _registry_waits(client) -> dict[str, float]:
    """archfit_extender_registry_waits_total by verb, from /metrics."""
    text = await (await client.get("/metrics")).text()
    waits = {}
    for line in text.splitlines():
        if line.startswith("archfit_extender_registry_waits_total{"):
            verb = line.split('verb="', 1)[1].split('"', 1)[0]
            waits[verb] = float(line.rsplit(" ", 1)[1])
    return waits


async def test_one_scheduling_cycle_waits_on_a_held_registry_then_none_until_it_answers(
    client, held_registry, public_registry
):
    """Four calls, as kube-scheduler makes them one pod at a time: filter and prioritize of a
    pod whose image the held registry has, then of a pod of another of its images. Only the
    first waits; the others are unknown at once, each saying why; once the registry answers,
    the first pod's next attempt is decided from the cache without waiting."""
    catalog = public_registry.catalog
    first, second = (
        _image(held_registry, catalog.amd64_only),
        _image(held_registry, catalog.manifest_list),
    )
    with capture_logs() as logs:
        for image in (first, second):
            for verb in ("filter", "prioritize"):
                await post(client, verb, args_full(pod(image), *NODES))
    # The first call's budget is what is left of the deadline when it resolves (0.3 s, or
    # less on a loaded machine): its reason is read up to the figure.
    reasons = [
        (e["image"], e["error"].split(" (")[0].split(" the ")[0])
        for e in logs
        if e["event"] == "image_platforms_unknown"
    ]
    waits = [(e["event"], e["registry_waits"]) for e in logs if e["event"].endswith("_done")]
    assert [
        (first, "registry slower than"),
        (
            second,
            f"registry {held_registry.host} did not answer an earlier call in time, not waited for",
        ),
    ] == reasons
    assert [
        ("filter_done", 1),
        ("prioritize_done", 0),
        ("filter_done", 0),
        ("prioritize_done", 0),
    ] == waits
    assert {"filter": 1.0} == await _registry_waits(client)

    held_registry.hang(False)
    kept: list[str] = []
    with capture_logs() as logs:
        async with asyncio.timeout(30):  # the lookups go on in the background meanwhile
            while kept != ["amd-1"]:
                body = await post(client, "filter", args_full(pod(first, name="retry"), *NODES))
                kept = [n["metadata"]["name"] for n in body["Nodes"]["items"]]
    assert {0} == {e["registry_waits"] for e in logs if e["event"] == "filter_done"}


async def test_a_pod_archfit_decided_at_create_never_waits_on_a_registry(
    client, held_registry, public_registry
):
    """A pod with the webhook's `archfit.io/platforms` (or the releaser's
    `archfit.io/released`) carries its constraint already: its filter does not wait on the
    held registry; a pod of another image that archfit never decided does."""
    catalog = public_registry.catalog
    decided = pod(_image(held_registry, catalog.amd64_only), name="decided")
    decided["metadata"]["annotations"] = {"archfit.io/platforms": "linux/amd64"}
    released = pod(_image(held_registry, catalog.single), name="released")
    released["metadata"]["annotations"] = {"archfit.io/released": "resolved"}
    undecided = pod(_image(held_registry, catalog.manifest_list), name="undecided")
    with capture_logs() as logs:
        for each in (decided, released, undecided):
            await post(client, "filter", args_full(each, *NODES))
    assert [0, 0, 1] == [e["registry_waits"] for e in logs if e["event"] == "filter_done"]
