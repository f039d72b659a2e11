"""Karpenter's NodePools list-watched (extender.kube.node_pools), against a local server that
answers as kube-apiserver does: with Karpenter (a list, then watch events), and without it
(404: there are none, and the watch neither fails nor spins). The real apiserver and
Karpenter are in tests/e2e/test_capacity.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from extender.kube.client.api import KubeApi, connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.node_pools import NODE_POOLS, NodePoolWatch
from tests.support.waiting import wait_for_async


def _pool(name: str, arch: str, version: str) -> dict[str, Any]:
    requirement = {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]}
    linux = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
    return {
        "metadata": {"name": name, "resourceVersion": version},
        "spec": {"template": {"spec": {"requirements": [requirement, linux]}}},
    }


class Karpenter:
    """Lists `graviton` (arm64); a watch then sends `general` (amd64) ADDED and `graviton`
    DELETED, and holds the stream until `release`."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.lists = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") is None:
            self.lists += 1
            return web.json_response(
                {"metadata": {"resourceVersion": "1"}, "items": [_pool("graviton", "arm64", "1")]}
            )
        response = web.StreamResponse()
        await response.prepare(request)
        for kind, obj in (("ADDED", _pool("general", "amd64", "2")),
                          ("DELETED", _pool("graviton", "arm64", "3"))):  # fmt: skip
            await response.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")
        await self.release.wait()
        return response


async def _served(aiohttp_server: Callable[..., Any], handler: Any) -> KubeApi:
    app = web.Application()
    app.router.add_get(NODE_POOLS, handler)
    server = await aiohttp_server(app)
    return connect(RestConfig(host=f"http://127.0.0.1:{server.port}"))


async def test_node_pools_are_listed_then_followed_through_the_watch(
    aiohttp_server: Callable[..., Any],
) -> None:
    """graviton (arm64) listed; general (amd64) added and graviton deleted by the watch."""
    karpenter = Karpenter()
    api = await _served(aiohttp_server, karpenter.handle)
    changes: list[tuple[str, ...]] = []
    watch = NodePoolWatch(api, on_change=lambda: changes.append(tuple(map(str, watch.offers()))))
    watch.start()
    try:
        await wait_for_async(lambda: len(changes) >= 3, "the list and two watch events")
    finally:
        karpenter.release.set()
        await watch.stop()
    assert [
        ("graviton (arm64)",),
        ("general (amd64)", "graviton (arm64)"),
        ("general (amd64)",),
    ] == changes[:3]


async def test_without_karpenter_there_are_no_node_pools_and_the_watch_waits(
    aiohttp_server: Callable[..., Any],
) -> None:
    """A 404 for the NodePool API: synced with none after one list, no watch opened on an
    API that is not there, and stop() ends the minute's wait before the next list."""
    asked = []

    async def absent(request: web.Request) -> web.Response:
        asked.append(request.query.get("watch"))
        return web.json_response({"kind": "Status", "code": 404}, status=404)

    api = await _served(aiohttp_server, absent)
    watch = NodePoolWatch(api)
    watch.start()
    try:
        assert await watch.wait_synced(10.0)
        offers = watch.offers()
    finally:
        await watch.stop()
    assert ((), [None]) == (offers, asked)
