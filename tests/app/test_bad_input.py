"""Malformed requests get a clear 4xx answer and are never logged as archfit's errors."""

from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from tests.app.conftest import settings
from tests.objects import args_full, args_names, node, pod
from tests.support.fakes import StaticNodes


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"{", "not valid JSON"),
        (b"", "not valid JSON"),
        (b'{"Nodes": null, "NodeNames": ["n"]}', "Pod is missing"),
        (
            b'{"Pod": "x", "NodeNames": ["n"]}',
            "Pod is not a v1.Pod: Expected `object | null`, got `str`",
        ),
        (b'{"Pod": {}, "Nodes": null, "NodeNames": null}', "both Nodes and NodeNames are null"),
        (
            b'{"Pod": {}, "NodeNames": [1, 2]}',
            "Expected `str`, got `int` - at `$.NodeNames[0]`",
        ),
        (b'{"Pod": {"spec": {"containers": "x"}}, "NodeNames": []}', "containers must be a list"),
        (b'{"Pod": {"metadata": {"annotations": []}}, "NodeNames": []}', "annotations must be"),
    ],
)
async def test_malformed_bodies_get_400_with_a_json_problem(make_client, verb, body, problem):
    """Each malformed body names its problem; nothing is logged at error level."""
    client = await make_client(nodes=StaticNodes(node("n")))
    with capture_logs() as logs:
        response = await client.post(f"/scheduler/{verb}", data=body)
    assert 400 == response.status
    assert problem in orjson.loads(await response.read())["error"]
    assert [] == [e for e in logs if e["log_level"] in ("error", "critical")]


async def test_bodies_over_the_limit_get_413(make_client):
    """server.maxBodyBytes bounds what archfit reads."""
    client = await make_client(settings(server={"maxBodyBytes": 4096}))
    big = orjson.dumps(args_names(pod("acme/amd:1"), *[f"node-{i:05d}" for i in range(1000)]))
    response = await client.post("/scheduler/filter", data=big)
    assert 413 == response.status
    assert "error" in orjson.loads(await response.read())


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_verbs_only_accept_post(make_client, method):
    """Anything but POST on a verb is 405."""
    client = await make_client()
    response = await client.request(method, "/scheduler/filter")
    assert 405 == response.status


async def test_health_endpoints_answer_and_metrics_are_exposed(make_client):
    """/healthz and /readyz answer 200 once started; /metrics speaks Prometheus."""
    client = await make_client(nodes=StaticNodes(node("n")))
    assert 200 == (await client.get("/healthz")).status
    ready = await client.get("/readyz")
    assert (200, {"ready": True, "checks": {"started": True, "nodeIndexSynced": True}}) == (
        ready.status,
        orjson.loads(await ready.read()),
    )
    text = await (await client.get("/metrics")).text()
    assert "# TYPE archfit_requests_total counter" in text


def _spoiled(body: dict[str, Any], marker: str) -> bytes:
    """`body` as JSON with the string `marker` made into bytes that are not UTF-8."""
    return orjson.dumps(body).replace(marker.encode(), b"web-\xff\xfe", 1)


_NOT_UTF8 = {
    "pod name": _spoiled(args_names(pod("acme/amd:1", name="MARK"), "n"), "MARK"),
    "pod image": _spoiled(args_names(pod("MARK"), "n"), "MARK"),
    "node name": _spoiled(args_names(pod("acme/amd:1"), "MARK"), "MARK"),
    "node label": _spoiled(args_full(pod("acme/amd:1"), node("n", "MARK")), "MARK"),
    "a node field archfit skips": _spoiled(
        args_full(pod("acme/amd:1"), {**node("n"), "spec": {"providerID": "MARK"}}), "MARK"
    ),
    "the node list's metadata": _spoiled(
        {"Pod": pod("acme/amd:1"), "Nodes": {"metadata": {"x": "MARK"}, "items": [node("n")]}},
        "MARK",
    ),
}


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("where", list(_NOT_UTF8))
async def test_bytes_that_are_not_utf8_anywhere_in_the_body_get_400_and_a_warning(
    make_client, verb, where
):
    """Invalid UTF-8 is the client's mistake wherever it sits: a 400 naming it, no error line."""
    client = await make_client(nodes=StaticNodes(node("n")))
    with capture_logs() as logs:
        response = await client.post(f"/scheduler/{verb}", data=_NOT_UTF8[where])
        text = await response.text(errors="replace")
    assert (400, "body is not UTF-8") == (response.status, orjson.loads(text)["error"][:17])
    assert [] == [e for e in logs if e["log_level"] in ("error", "critical")]
    assert ["bad_request"] == [e["event"] for e in logs if e["log_level"] == "warning"]


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/extender/filter"])
async def test_a_verb_without_the_prefix_gets_404_naming_the_prefix(make_client, path):
    """A urlPrefix without /scheduler: not aiohttp's bare `404: Not Found`, but the paths
    archfit serves, counted as a client problem."""
    client = await make_client(nodes=StaticNodes(node("n")))
    response = await client.post(path, data=orjson.dumps(args_names(pod("a:1"), "n")))
    error = orjson.loads(await response.read())["error"]
    metrics = await (await client.get("/metrics")).text()
    assert (404, True, True) == (
        response.status,
        "POST /scheduler/filter and /scheduler/prioritize (server.prefix '/scheduler')" in error,
        'archfit_client_problems_total{cause="unknown_path"} 1.0' in metrics,
    )
