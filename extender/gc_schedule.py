"""Full garbage collections on a timer, between requests: tuned thresholds never reach them.

`cli.tune_gc` makes collections rare so that parsing a big Node list does not set them
off mid-request; with those thresholds the oldest generation is, in practice, never
collected, and cycles (exceptions with tracebacks, for one) pile up: RSS crept by 32 MB
over 150,000 failing lookups. A collection on the event loop runs between two
requests, never inside one, and costs milliseconds for what a server holds after
`gc.freeze()`.
"""

from __future__ import annotations

import asyncio
import gc
import time

import structlog

log = structlog.get_logger("archfit")


async def collect_periodically(interval: float) -> None:
    """Run a full collection every `interval` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        started = time.perf_counter()
        freed = gc.collect()
        log.debug(
            "gc_collected", freed=freed, duration_ms=round((time.perf_counter() - started) * 1e3, 3)
        )
