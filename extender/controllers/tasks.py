"""The background tasks a controller spawns (the watcher's reports and log reads, the
capacity check's judgements): each kept until it ends, a failure logged, all drained or
cancelled together."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from extender.core.text import error_text


class Tasks:
    """A controller's tasks; `failed` is the log event of one that raised."""

    def __init__(self, log: Any, failed: str) -> None:
        self._log = log
        self._failed = failed
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            self._log.error(self._failed, error=error_text(error))

    async def drain(self) -> None:
        """Wait for the work under way, and what it spawns (tests, the bench)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel every task and wait for them to end."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
