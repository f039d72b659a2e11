"""The app as `archfit serve` builds it, resolving images from a real registry process."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from extender.server import create_app
from tests.app.conftest import post, settings
from tests.objects import args_full, node, pod

pytestmark = pytest.mark.integration

NODES = (node("amd-1", "amd64"), node("arm-1", "arm64"), node("armhf-1", "arm"))


def registry_settings(host: str, **policy):
    """Default settings, plus what any in-cluster registry on a private address needs."""
    return settings(
        registry={"hosts": {host: {"plainHttp": True}}, "allowedNetworks": ["127.0.0.1/32"]},
        policy=policy,
    )


@pytest.fixture
async def app_client(aiohttp_client, public_registry):
    app = create_app(registry_settings(public_registry.registry.host))
    return await aiohttp_client(app)


def kept(body):
    return [n["metadata"]["name"] for n in body["Nodes"]["items"]]


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("multiarch_oci", ["amd-1", "arm-1", "armhf-1"]),
        ("manifest_list", ["amd-1", "arm-1"]),
        ("single", ["arm-1"]),
        ("with_attestations", ["amd-1", "arm-1"]),
        ("armv7_only", ["armhf-1"]),
        ("amd64_only", ["amd-1"]),
        ("pinned_child", ["arm-1"]),
        ("artifact", []),
    ],
)
async def test_filter_keeps_exactly_the_nodes_each_real_image_runs_on(
    app_client, public_registry, image, expected
):
    """Every kind of manifest in the registry gives the nodes it really runs on."""
    reference = getattr(public_registry.catalog, image).reference
    body = await post(app_client, "filter", args_full(pod(reference), *NODES))
    assert expected == kept(body)
    # Reasons go out only when no node is left (they reach the FailedScheduling event).
    named = set() if expected else {n["metadata"]["name"] for n in NODES}
    assert named == set(body["FailedAndUnresolvableNodes"])


async def test_an_artifact_used_as_an_image_is_said_to_be_no_runnable_image(
    app_client, public_registry
):
    """A Helm chart in a pod's image gets "not a runnable image", not "has no linux/arm64"."""
    reference = public_registry.catalog.artifact.reference
    body = await post(app_client, "filter", args_full(pod(reference), *NODES))
    reason = f"node(s) didn't match image platform: {reference} is not a runnable image"
    assert (
        dict.fromkeys((n["metadata"]["name"] for n in NODES), reason)
        == (body["FailedAndUnresolvableNodes"])
    )


async def test_prioritize_prefers_arm64_for_a_real_multi_arch_image(app_client, public_registry):
    """The default preference reaches the scores through the real resolver."""
    reference = public_registry.catalog.manifest_list.reference
    body = await post(app_client, "prioritize", args_full(pod(reference), *NODES))
    assert {"arm-1": 10} == {e["Host"]: e["Score"] for e in body}


async def test_a_warm_cache_answers_many_pods_without_asking_the_registry(
    app_client, public_registry
):
    """After the first pod, pods of the same image cost zero registry requests."""
    reference = public_registry.catalog.multiarch_oci.reference
    await post(app_client, "filter", args_full(pod(reference), *NODES))
    mark = public_registry.registry.mark()
    for n in range(20):
        await post(app_client, "filter", args_full(pod(reference, name=f"p-{n}"), *NODES))
        await post(app_client, "prioritize", args_full(pod(reference, name=f"p-{n}"), *NODES))
    assert {} == dict(public_registry.registry.count_since(mark))


async def test_a_missing_image_is_unknown_and_fails_open(app_client, public_registry):
    """A tag the registry does not have is not 'unsupported': fail-open passes every node."""
    reference = f"{public_registry.registry.host}/archfit/multi:no-such-tag"
    body = await post(app_client, "filter", args_full(pod(reference), *NODES))
    assert (["amd-1", "arm-1", "armhf-1"], {}) == (kept(body), body["FailedAndUnresolvableNodes"])


async def test_loopback_registries_are_refused_unless_allowed(aiohttp_client, public_registry):
    """SSRF guard: without the allow-list a loopback registry is unknown, so fail-closed fails."""
    app = create_app(
        settings(
            registry={"hosts": {public_registry.registry.host: {"plainHttp": True}}},
            policy={"failurePolicy": "fail-closed"},
        )
    )
    client = await aiohttp_client(app)
    reference = public_registry.catalog.amd64_only.reference
    body = await post(client, "filter", args_full(pod(reference), *NODES))
    assert ([], {}, 3) == (kept(body), body["FailedAndUnresolvableNodes"], len(body["FailedNodes"]))


async def test_the_summary_line_counts_this_requests_cache_hits_and_misses(
    app_client, public_registry
):
    """filter_done says whether the answer came from the cache: cold 2 misses, warm 1 hit
    (the image's answer reused from the last few seconds, without asking the cache)."""
    reference = public_registry.catalog.manifest_list.reference
    summaries = []
    for n in range(2):
        with capture_logs() as logs:
            await post(app_client, "filter", args_full(pod(reference, name=f"p-{n}"), *NODES))
        summaries += [
            (e["cache_hits"], e["cache_misses"]) for e in logs if e["event"] == "filter_done"
        ]
    # Cold: one tag→digest and one digest→platforms lookup per image. Warm: one answer.
    assert [(0, 2), (1, 0)] == summaries
