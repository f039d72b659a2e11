"""GET /metrics: archfit's own metrics beside the process and Python collectors."""

from __future__ import annotations

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
