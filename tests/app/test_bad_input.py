"""Malformed requests get a clear 4xx answer and are never logged as archfit's errors."""

import orjson
import pytest
from structlog.testing import capture_logs

from tests.app.conftest import settings
from tests.objects import args_names, node, pod
from tests.support.static_nodes import StaticNodes


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
