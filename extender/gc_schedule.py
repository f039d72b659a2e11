"""Full garbage collections on a timer, between requests: tuned thresholds never reach them.

`cli.tune_gc` makes collections rare so that parsing a big Node list does not set them
off mid-request; with those thresholds the oldest generation is, in practice, never
collected, and cycles (exceptions with their tracebacks, for one: about five objects per
failing lookup) pile up. A collection on the event loop runs between two requests, never
inside one; bench/fuzz.py's soak measured 10-50 ms each, every 5 s at 200 calls a second.
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
