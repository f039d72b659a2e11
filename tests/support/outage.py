"""A relay in front of a real registry that a test can switch into an outage.

While `failure` is None every request is passed to the registry and its answer passed back;
set it and every request meets that failure instead: a status (503, 429, 401, 404), a hang
(no answer, ever) or a reset (the connection is dropped before any answer).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

Failure = Literal["hang", "reset"] | int
_PASSED_HEADERS = ("Accept", "Authorization")
_RETURNED_HEADERS = ("Content-Type", "Docker-Content-Digest", "WWW-Authenticate", "Location")
_ERROR_CODES = {401: "UNAUTHORIZED", 404: "MANIFEST_UNKNOWN", 429: "TOOMANYREQUESTS"}


@dataclass
class Relay:
    """The relay's state: where it passes requests, and the outage now in force."""

    upstream: str
    """`http://host:port` of the real registry."""
    host: str = ""
    """host:port the relay listens on; name images with it."""
    failure: Failure | None = None
    """None: relay every request; else answer each with this failure."""
    failed: int = 0
    """Requests met with a failure so far."""
    _session: aiohttp.ClientSession = field(init=False, repr=False)
    _closing: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        failure = self.failure
        if failure is None:
            return await self._relay(request)
        self.failed += 1
        if failure == "hang":
            await self._closing.wait()  # until the relay stops; then a 503
            failure = 503
        if failure == "reset":
            if request.transport is not None:
                request.transport.abort()  # RST: no status line at all
            raise asyncio.CancelledError
        status = int(failure)
        code = _ERROR_CODES.get(status, "UNAVAILABLE")
        body = f'{{"errors":[{{"code":"{code}","message":"outage"}}]}}'
        return web.Response(status=status, text=body, content_type="application/json")

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        headers = {
            name: request.headers[name] for name in _PASSED_HEADERS if name in request.headers
        }
        url = self.upstream + request.path_qs
        async with self._session.request(
            request.method, url, headers=headers, allow_redirects=False
        ) as answer:
            body = await answer.read()
            returned = {n: answer.headers[n] for n in _RETURNED_HEADERS if n in answer.headers}
            if request.method == "HEAD" and "Content-Length" in answer.headers:
                returned["Content-Length"] = answer.headers["Content-Length"]
            return web.Response(status=answer.status, body=body or None, headers=returned)


@contextlib.asynccontextmanager
async def serve_relay(upstream: str) -> AsyncIterator[Relay]:
    """Serve a Relay to `upstream` on its own port for the duration of the block."""
    relay = Relay(upstream)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", relay._handle)
    server = TestServer(app, host="127.0.0.1")
    async with aiohttp.ClientSession() as session:
        relay._session = session
        await server.start_server()
        relay.host = f"127.0.0.1:{server.port}"
        try:
            yield relay
        finally:
            relay._closing.set()  # hung requests end, so the server need not wait for them
            await server.close()
