"""What a credential provider plugin costs: a run (cache miss) against a cached answer.

Run: `.venv/bin/python -m bench.credential_plugins`. It writes the test suite's plugin (a
Python executable speaking the v1 exec protocol) and asks for credentials for 20 images of one
registry: with cacheKeyType Image every image costs a run, with Registry only the first does.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from extender.config.registry_settings import CredentialProviderSettings
from extender.registry.plugins import CredentialPlugins
from tests.support.credential_plugin import ProviderPlugin

HOST = "registry.example.com"
IMAGES = [f"{HOST}/team/app{n}" for n in range(20)]


async def measure(key_type: str, root: Path) -> tuple[list[float], list[float], int]:
    """Per-image latency of a first pass and a second pass, and the plugin's run count."""
    plugin = ProviderPlugin.install(root / key_type, [HOST])
    fields = {"key": HOST, "username": "bench", "password": "bench", "cacheKeyType": key_type}
    plugin.behave("ok", **fields)
    settings = CredentialProviderSettings(str(plugin.config_path), str(plugin.bin_dir))
    plugins = CredentialPlugins.from_settings(settings)
    assert plugins is not None
    passes: list[list[float]] = [[], []]
    for timings in passes:
        for image in IMAGES:
            started = time.perf_counter()
            await plugins.entries(image)
            timings.append((time.perf_counter() - started) * 1000)
    await plugins.aclose()
    return passes[0], passes[1], len(plugin.calls())


def summary(timings: list[float]) -> str:
    return f"median {statistics.median(timings):8.3f} ms  max {max(timings):8.3f} ms"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for key_type in ("Image", "Registry"):
            first, second, runs = await measure(key_type, Path(tmp))
            print(f"cacheKeyType {key_type:8}  runs {runs:2}/{2 * len(IMAGES)}")
            print(f"  first pass   {summary(first)}")
            print(f"  second pass  {summary(second)}")


if __name__ == "__main__":
    asyncio.run(main())
