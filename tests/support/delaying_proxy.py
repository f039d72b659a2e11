"""A registry front that misbehaves on purpose: it forwards to a real registry, late or not at all.

archfit reaches an image as `<proxy>/<repo>:<tag>`; the proxy relays each request to the
real CNCF distribution registry behind it, after a delay the test sets, or answers 503 (or
nothing) for a while. It runs an aiohttp server in its own thread, so synchronous e2e
tests and benchmarks can drive it, and it counts what it relayed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from tests.support.process import free_port

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class _Faults:
    first_delay: float = 0.0
    """Added before the next answer only (the first lookup's first round trip)."""
    each_delay: float = 0.0
    """Added before every answer."""
    failing_until: float = 0.0
    """time.monotonic() before which every request gets 503."""
    hanging: bool = False
    """Requests wait (unanswered) while this holds."""
    relayed: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(method, kind) relayed: kind is `manifest`, `blob`, `tags`, or `other`."""
    answered_at: list[float] = field(default_factory=list)
    """time.time() of each manifest answer relayed with 200."""


class DelayingProxy:
    """`with DelayingProxy(upstream) as proxy:` a registry at `proxy.host` that obeys the test."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.port = free_port()
        self.faults = _Faults()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, name="delaying-proxy", daemon=True)

    @property
    def host(self) -> str:
        """host:port of the proxy, to write in image references."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> DelayingProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the delaying proxy did not start")
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    # --- what the test asks for -----------------------------------------------------------

    def reset(self) -> None:
        """Answer at once again, and forget what was relayed."""
        with self._lock:
            self.faults = _Faults()

    def delay_first(self, seconds: float) -> None:
        """The next answer comes `seconds` late; the rest on time."""
        with self._lock:
            self.faults.first_delay = seconds

    def delay_each(self, seconds: float) -> None:
        """Every answer comes `seconds` late."""
        with self._lock:
            self.faults.each_delay = seconds

    def fail_for(self, seconds: float) -> None:
        """Answer 503 to everything for the next `seconds`."""
        with self._lock:
            self.faults.failing_until = time.monotonic() + seconds

    @contextmanager
    def hung(self) -> Iterator[None]:
        """Hold every request unanswered inside the block; release them when it ends."""
        with self._lock:
            self.faults.hanging = True
        try:
            yield
        finally:
            self.hang(False)

    def hang(self, on: bool = True) -> None:
        """Hold (or stop holding) every request unanswered."""
        with self._lock:
            self.faults.hanging = on

    def relayed(self, kind: str = "manifest") -> int:
        """Requests of this kind relayed to the registry with any answer."""
        with self._lock:
            return sum(n for (_, k), n in self.faults.relayed.items() if k == kind)

    def first_answer(self) -> float | None:
        """When the first manifest answer went out (time.time()), or None."""
        with self._lock:
            return self.faults.answered_at[0] if self.faults.answered_at else None

    def last_answer(self) -> float | None:
        """When the last manifest answer went out (time.time()), or None."""
        with self._lock:
            return self.faults.answered_at[-1] if self.faults.answered_at else None

    # --- the server -----------------------------------------------------------------------

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            self._session = session
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._relay)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                await runner.cleanup()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            faults = self.faults
            delay, faults.first_delay = faults.first_delay + faults.each_delay, 0.0
            failing = time.monotonic() < faults.failing_until
        # Set from the test's thread, so a poll rather than an asyncio.Event of this loop.
        while self.faults.hanging and self.faults is faults:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if delay:
            await asyncio.sleep(delay)
        kind = _kind(request.path)
        if failing:
            with self._lock:
                faults.relayed[(request.method, kind)] += 1
            return web.Response(status=503, text="registry unavailable (delaying proxy)")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        body = await request.read()
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
        ) as upstream:
            payload = await upstream.read()
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
            with self._lock:
                faults.relayed[(request.method, kind)] += 1
                if kind == "manifest" and upstream.status == 200:
                    faults.answered_at.append(time.time())
            # A HEAD answer carries no body; aiohttp sets Content-Length itself.
            return web.Response(status=upstream.status, headers=out, body=payload or None)


def _kind(path: str) -> str:
    for kind, marker in (("manifest", "/manifests/"), ("blob", "/blobs/"), ("tags", "/tags/")):
        if marker in path:
            return kind
    return "other"
