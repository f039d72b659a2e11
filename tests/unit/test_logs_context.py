"""extender.logs: every line carries the fields of the request it was written in."""

from __future__ import annotations

import asyncio
import io

import orjson
import structlog

from extender import logs


async def test_each_line_carries_its_requests_fields():
    """bind_request starts afresh, bind adds, a line's own field wins; a task keeps the
    fields it started with."""
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
            log.info("task")

        task = asyncio.create_task(later())
        await started
        logs.bind(pod="web-2")
        log.info("next", namespace="its own")
        proceed.set_result(None)
        await task
        logs.bind_request(None, "filter")
        log.info("after")
    finally:
        logs.reset()
    written = [orjson.loads(line) for line in raw.getvalue().splitlines()]
    fields = [
        {k: v for k, v in line.items() if k not in ("timestamp", "request_id")} for line in written
    ]
    assert fields == [
        {
            "event": "next",
            "namespace": "its own",
            "pod": "web-2",
            "verb": "mutate",
            "level": "info",
        },
        {"event": "task", "pod": "web-1", "namespace": "shop", "verb": "mutate", "level": "info"},
        {"event": "after", "verb": "filter", "level": "info"},
    ]
    assert [line["request_id"] for line in written[:2]] == ["r1", "r1"]
    assert len(written[2]["request_id"]) == 16
