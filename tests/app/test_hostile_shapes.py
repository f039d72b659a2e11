"""Bodies shaped to hurt: deep nesting, huge integers, absurd counts. Each gets a clear answer."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import weakref
from typing import Any

import orjson
from structlog.testing import capture_logs

from tests.app.conftest import settings
from tests.objects import args_full, args_names, node, pod
from tests.support.fakes import StaticNodes
from tests.support.waiting import wait_for_async


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def encode(value: Any) -> bytes:
    """JSON deeper than orjson writes (the standard library goes to Python's recursion limit)."""
    return json.dumps(value).encode()


def errors(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["log_level"] in ("error", "critical")]


async def test_a_node_nested_300_levels_deep_is_returned_unmodified(make_client):
    """orjson writes at most 255 levels; the kept Node still comes back as it was sent."""
    client = await make_client()
    deep = node("n1", "amd64")
    deep["x"] = nested(300)
    with capture_logs() as logs:
        response = await client.post(
            "/scheduler/filter", data=encode(args_full(pod("acme/amd:1"), deep))
        )
    assert (200, [deep]) == (response.status, orjson.loads(await response.read())["Nodes"]["items"])
    assert [] == errors(logs)


async def test_a_node_nested_too_deep_to_return_is_a_400(make_client):
    """1,010 levels parse (orjson reads 1,024) but cannot be written back: a 400, not a 500."""
    client = await make_client()
    body = orjson.dumps(args_full(pod("acme/amd:1"), {**node("n1", "amd64"), "x": "DEEP"}))
    body = body.replace(b'"DEEP"', b"[" * 1010 + b"]" * 1010)
    with capture_logs() as logs:
        response = await client.post("/scheduler/filter", data=body)
    assert 400 == response.status
    assert [] == errors(logs)


async def test_a_skip_annotation_nested_900_levels_deep_is_a_400(make_client):
    """A skip annotation that is a deep list is a wrong type, not str()'d into a crash."""
    client = await make_client(nodes=StaticNodes(node("n1")))
    body = args_names(pod("acme/amd:1", annotations={"archfit.io/skip": nested(900)}), "n1")
    with capture_logs() as logs:
        response = await client.post("/scheduler/filter", data=encode(body))
    assert 400 == response.status
    assert "archfit.io/skip" in orjson.loads(await response.read())["error"]
    assert [] == errors(logs)


async def test_integers_above_64_bits_in_a_node_come_back_byte_for_byte(make_client):
    """orjson reads them as floats; the kept Node's JSON must be what the scheduler sent."""
    client = await make_client()
    body = orjson.dumps(args_full(pod("acme/amd:1"), node("n1", "amd64"))).replace(
        b'"resourceVersion":"123456"',
        b'"resourceVersion":"123456","generation":18446744073709551616,'
        b'"x":-9223372036854775809,"y":123456789012345678901234567890',
    )
    response = await client.post("/scheduler/filter", data=body)
    raw = await response.read()
    assert 200 == response.status
    for literal in (
        b"18446744073709551616",
        b"-9223372036854775809",
        b"123456789012345678901234567890",
    ):
        assert literal in raw


async def test_a_pod_with_more_containers_than_any_real_pod_is_a_400(make_client):
    """Each image costs a registry lookup: 1,001 containers are refused, not resolved."""
    client = await make_client(nodes=StaticNodes(node("n1")))
    body = args_names(pod(*[f"acme/img-{i}:1" for i in range(1001)]), "n1")
    response = await client.post("/scheduler/filter", data=orjson.dumps(body))
    assert 400 == response.status
    assert "Pod.spec.containers has 1001 entries" in orjson.loads(await response.read())["error"]


async def test_a_body_of_millions_of_empty_objects_is_refused_before_parsing(make_client):
    """Two million `{}` in a pod are no real request: 400, and never parsed."""
    client = await make_client(nodes=StaticNodes(node("n1")))
    body = (
        b'{"Pod":{"spec":{"volumes":[' + b",".join([b"{}"] * 2_000_000) + b']}},"NodeNames":["n1"]}'
    )
    response = await client.post("/scheduler/filter", data=io.BytesIO(body))
    assert 400 == response.status
    assert "JSON objects and arrays" in orjson.loads(await response.read())["error"]


class _Cycle:
    def __init__(self) -> None:
        self.me = self


async def test_full_collections_run_between_requests(make_client):
    """With the collector's thresholds out of reach, a cycle is still freed on the timer."""
    gc.disable()
    try:
        await make_client(settings(server={"gcIntervalSeconds": 0.05}))
        cycle = _Cycle()
        alive = weakref.ref(cycle)
        del cycle
        with contextlib.suppress(TimeoutError):
            await wait_for_async(lambda: alive() is None, "the cycle collected", seconds=2)
        assert None is alive()
    finally:
        gc.enable()
