"""extender.logs: the request's fields on every line, and the writer that batches info lines."""

from __future__ import annotations

import asyncio
import io

import orjson
import structlog

from extender import logs
from extender.logs import LINE_LINGER_SECONDS, JsonLines


class Trickle(io.RawIOBase):
    """An unbuffered stream that takes at most `step` bytes a write, as a pipe may."""

    def __init__(self, step: int = 7) -> None:
        self.data = bytearray()
        self.step = step
        self.writes = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
        self.writes += 1
        taken = bytes(data[: self.step])
        self.data += taken
        return len(taken)

    def lines(self) -> list[bytes]:
        return bytes(self.data).splitlines()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_info_lines_wait_for_the_timer_and_go_out_together():
    out = Trickle(step=1 << 20)
    lines = JsonLines(out)
    lines.info(b"one")
    lines.info(b"two")
    assert out.lines() == []
    await asyncio.sleep(LINE_LINGER_SECONDS)  # the writer's timer was set first: it has run
    assert out.lines() == [b"one", b"two"]
    assert out.writes == 1


async def test_a_warning_is_written_at_once_after_the_lines_that_wait():
    out = Trickle()
    lines = JsonLines(out)
    lines.info(b"first")
    lines.warning(b"second")
    lines.debug(b"third")
    assert out.lines() == [b"first", b"second"]  # every byte, however little each write took
    lines.flush()
    assert out.lines() == [b"first", b"second", b"third"]


async def test_a_line_past_its_due_time_is_written_when_its_timer_never_ran():
    """A loop held up (or closed) never runs the timer: the next line writes them all."""
    out, clock = Trickle(), Clock()
    lines = JsonLines(out, clock)
    lines.info(b"one")
    clock.now += LINE_LINGER_SECONDS / 2
    lines.info(b"two")
    assert out.lines() == []
    clock.now += LINE_LINGER_SECONDS
    lines.info(b"three")
    assert out.lines() == [b"one", b"two", b"three"]


def test_off_the_loop_every_line_is_written_at_once():
    out = Trickle()
    JsonLines(out).info(b"no loop here")
    assert out.lines() == [b"no loop here"]


async def test_each_line_carries_its_requests_fields():
    """bind_request starts afresh, bind adds; a task keeps the fields it started with."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw)  # held: collected, it would close `raw`
    logs.configure("info", "json", stream=stream)
    try:
        log = structlog.get_logger("archfit")
        logs.bind_request("r1", "mutate")
        logs.bind(pod="web-1", namespace="shop")
        started = asyncio.get_running_loop().create_future()
        proceed = asyncio.get_running_loop().create_future()

        async def later() -> None:
            started.set_result(None)
            await proceed
            log.info("task", pod="its own")

        task = asyncio.create_task(later())
        await started
        logs.bind_request(None, "filter")
        log.info("next")
        proceed.set_result(None)
        await task
        logs.flush()
    finally:
        logs.reset()
    written = [orjson.loads(line) for line in raw.getvalue().splitlines()]
    fields = [
        {k: v for k, v in line.items() if k not in ("timestamp", "request_id")} for line in written
    ]
    assert fields == [
        {"event": "next", "verb": "filter", "level": "info"},
        {"event": "task", "pod": "its own", "verb": "mutate", "namespace": "shop", "level": "info"},
    ]
    assert written[1]["request_id"] == "r1"
    assert len(written[0]["request_id"]) == 16
