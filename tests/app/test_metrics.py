"""GET /metrics: archfit's own metrics beside the process and Python collectors."""

from __future__ import annotations

import gc

from extender import __version__
from tests.app.conftest import MakeClient


async def test_metrics_carry_build_info_and_the_process_and_python_collectors(
    make_client: MakeClient,
) -> None:
    """Operators' dashboards expect process_*, python_* and a build_info series."""
    client = await make_client()
    text = await (await client.get("/metrics")).text()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    assert {
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "python_gc_objects_collected_total",
        "python_info",
        "archfit_build_info",
    } <= names
    assert 'archfit_build_info{python="' in text
    assert f'version="{__version__}"' in text


async def test_each_garbage_collection_is_timed_by_generation_while_the_app_runs(
    make_client: MakeClient,
) -> None:
    """A full collection shows in archfit_gc_pause_seconds under generation 2, and the timer
    leaves gc.callbacks when the app stops (tests build many apps in one process)."""
    callbacks = len(gc.callbacks)
    client = await make_client()

    async def full_collections() -> float:
        text = await (await client.get("/metrics")).text()
        found = [
            line.rsplit(" ", 1)[1]
            for line in text.splitlines()
            if line.startswith('archfit_gc_pause_seconds_count{generation="2"}')
        ]
        return float(found[0]) if found else 0.0

    before = await full_collections()
    gc.collect()
    gc.collect()
    assert 2 <= await full_collections() - before
    assert callbacks + 1 == len(gc.callbacks)
    await client.close()
    assert callbacks == len(gc.callbacks)
