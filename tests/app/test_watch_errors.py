"""Every list-watch on the one loop (extender.kube.client.watching.follow_watch), against a local
server that speaks Kubernetes list/watch: a watch ERROR other than 410 is archfit's
WatchFailed (its error tree), logged, and followed by a fresh list."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web
from structlog.testing import capture_logs

from extender.core.gates import GATED_LABEL
from extender.kube.client.api import connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.gated_pods import GatedPods
from extender.kube.nodes import NodeIndex
from tests.objects import node, pod
from tests.support.waiting import wait_for_async

_LEADER_CHANGED = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "etcdserver: leader changed",
    "code": 500,
}


def held(name: str) -> dict[str, Any]:
    """A pod carrying archfit's gated label, with a uid of its own."""
    obj = pod("acme/app:1", name=name)
    obj["metadata"].update(uid=f"uid-{name}", labels={GATED_LABEL: "true"})
    return obj


class ScriptedWatches:
    """One resource's list (`items`), and a first watch that plays `events`, then ends in a
    500 ERROR event; every later watch stays quiet."""

    def __init__(self, items: list[dict[str, Any]], events: list[tuple[str, dict[str, Any]]]):
        self.items = items
        self.events = events
        self.lists = 0
        self.watches = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") is None:
            self.lists += 1
            metadata = {"resourceVersion": str(10 * self.lists)}
            return web.json_response({"metadata": metadata, "items": self.items})
        self.watches += 1
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        if self.watches > 1:
            await asyncio.sleep(5)
            return response
        for version, (kind, obj) in enumerate(self.events, start=11):
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(version)
            await response.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")
        await response.write(orjson.dumps({"type": "ERROR", "object": _LEADER_CHANGED}) + b"\n")
        return response


async def api_for(aiohttp_server: Callable[..., Any], path: str, watches: ScriptedWatches):
    """An API client for a local server that answers `path` from `watches`."""
    app = web.Application()
    app.router.add_get(path, watches.handle)
    server = await aiohttp_server(app)
    return connect(RestConfig(host=f"http://127.0.0.1:{server.port}"))


def failures(logs: list[dict[str, Any]], event: str) -> list[str]:
    return [entry["error"] for entry in logs if entry["event"] == event]


async def test_held_pods_are_told_from_the_watch_and_a_watch_error_is_watch_failed(
    aiohttp_server,
):
    """The held-pod watch tells ADDED and DELETED as they come; a 500 ERROR event is
    WatchFailed, logged as gated_pods_error, and the pods are listed again."""
    first, second = held("first"), held("second")
    watches = ScriptedWatches([first], [("DELETED", first), ("ADDED", second)])
    api = await api_for(aiohttp_server, "/api/v1/pods", watches)
    told: list[tuple[str, str]] = []
    pods = GatedPods(api)
    with capture_logs() as logs:
        pods.start(lambda kind, obj: told.append((kind, obj["metadata"]["name"])))
        try:
            await wait_for_async(lambda: len(told) == 5, "the relist to be told")
        finally:
            await pods.stop()
            api.close()
    # The relist tells the pod it no longer shows as DELETED, and the listed one again.
    assert [
        ("ADDED", "first"),
        ("DELETED", "first"),
        ("ADDED", "second"),
        ("DELETED", "second"),
        ("ADDED", "first"),
    ] == told
    assert ["WatchFailed: watch error 500: etcdserver: leader changed"] == failures(
        logs, "gated_pods_error"
    )


async def test_a_node_watch_error_is_watch_failed_and_the_index_lists_again(aiohttp_server):
    """A 500 ERROR event on the node watch is WatchFailed, logged as node_index_error, and
    the nodes are listed again."""
    n1, n2 = node("n1", "amd64"), node("n2", "arm64")
    watches = ScriptedWatches([n1], [("ADDED", n2)])
    api = await api_for(aiohttp_server, "/api/v1/nodes", watches)
    index = NodeIndex(api)
    with capture_logs() as logs:
        index.start()
        try:
            await wait_for_async(lambda: index.relists == 2, "a list after the watch failed")
        finally:
            await index.stop()
            api.close()
    assert ["WatchFailed: watch error 500: etcdserver: leader changed"] == failures(
        logs, "node_index_error"
    )
