"""Which event loop `archfit serve` runs on (server.eventLoop): uvloop, or asyncio's own; and
`in_background`, the one way archfit runs work as a task while a block runs.

uvloop (libuv) is the default (`auto`) where it is installed, which is on Linux (a dependency
there, so in the image): its compiled TLS, which the webhook's listener uses through
loop.start_tls (extender.serving.listener), made a pod admission ~10% cheaper in CPU than
on asyncio's loop and its pure-Python TLS (python -m bench.webhook_cost; a do-nothing aiohttp
webhook: 15-35%). The filter verbs, plain HTTP, gained ~2%, within noise (docs/benchmarks.md).
asyncio's loop stays one setting away, and is what `auto` runs elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Literal

from extender.errors import SetupError

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class EventLoopUnavailable(SetupError, ValueError):
    """server.eventLoop names a loop that is not installed."""


def loop_factory(choice: Literal["auto", "uvloop", "asyncio"]) -> tuple[str, LoopFactory]:
    """The loop's name and a factory for asyncio.Runner. Raises EventLoopUnavailable."""
    if choice == "asyncio" or (choice == "auto" and importlib.util.find_spec("uvloop") is None):
        return "asyncio", asyncio.new_event_loop
    try:
        import uvloop
    except ImportError as error:
        raise EventLoopUnavailable(
            f"server.eventLoop: uvloop is not installed ({error}); pip install 'archfit[uvloop]', "
            "or set auto or asyncio"
        ) from error
    return "uvloop", uvloop.new_event_loop


@contextlib.asynccontextmanager
async def in_background(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run `work` as a task while the block runs; cancel it and wait for it after."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
