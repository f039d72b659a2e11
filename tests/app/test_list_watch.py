"""How a list-watch thread stops (extender.kube.client.watching.ListWatch), against a local server
that holds a watch open: stop() cuts the read in progress so the thread ends, and a thread
that does not end in the join's second does not keep stop() from returning."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import msgspec
import orjson
import structlog
from aiohttp import web

from extender.kube.client.api import connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.client.watching import REQUEST_TIMEOUT, ListWatch
from tests.support.waiting import wait_for_async

_PATH = "/api/v1/things"
_EVENTS = ("things_watch_expired", "things_watch_error")
_HANG_GUARD_SECONDS = 30
"""Only so a broken stop() fails the test instead of hanging the run: no timing is asserted."""


class HeldWatch:
    """Lists nothing at version 1; a watch sends one BOOKMARK, then holds the stream open
    until `release` is set (as a quiet real watch does for its timeoutSeconds)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") is None:
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": []})
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        bookmark = {"metadata": {"resourceVersion": "2"}}
        await response.write(orjson.dumps({"type": "BOOKMARK", "object": bookmark}) + b"\n")
        await self.release.wait()
        return response


def running(name: str) -> bool:
    return any(thread.name == name for thread in threading.enumerate())


async def test_stop_cuts_the_watch_being_read_and_the_thread_ends(
    aiohttp_server: Callable[..., Any],
) -> None:
    """While the thread blocks reading a watch the server keeps open, stop() cuts the read:
    when it returns, the thread has ended (the join did not just give up on it)."""
    held = HeldWatch()
    app = web.Application()
    app.router.add_get(_PATH, held.handle)
    server = await aiohttp_server(app)
    api = connect(RestConfig(host=f"http://127.0.0.1:{server.port}"))
    told: list[str] = []

    def apply(kind: str, raw: msgspec.Raw, version: str) -> str:
        told.append(kind)
        return version

    def list_all() -> str:
        return str(api.get(_PATH, timeout=REQUEST_TIMEOUT)["metadata"]["resourceVersion"])

    name = "archfit-test-held-watch"
    log = structlog.get_logger("test")
    watch = ListWatch(
        name, list_all, lambda version: watch.follow(api, _PATH, version, apply), log, _EVENTS
    )
    watch.start()
    try:
        await wait_for_async(lambda: told == ["BOOKMARK"], "the watch to be read")
        await asyncio.wait_for(watch.stop(), _HANG_GUARD_SECONDS)
        assert not running(name)
    finally:
        held.release.set()
        api.close()


async def test_a_thread_that_does_not_end_does_not_hold_stop_hostage() -> None:
    """A thread blocked where no cut reaches (here its list) is left behind after the
    join's second: stop() returns while it still runs, as shutdown needs."""
    blocked = threading.Event()
    listing = threading.Event()

    def list_all() -> str:
        listing.set()
        blocked.wait()
        return "1"

    name = "archfit-test-stuck-list"
    log = structlog.get_logger("test")
    watch = ListWatch(name, list_all, lambda version: version, log, _EVENTS)
    watch.start()
    try:
        await asyncio.to_thread(listing.wait, _HANG_GUARD_SECONDS)
        await asyncio.wait_for(watch.stop(), _HANG_GUARD_SECONDS)
        assert running(name)
    finally:
        blocked.set()
