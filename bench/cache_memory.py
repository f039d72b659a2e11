"""Memory the resolver cache's memory tier keeps per image, and how many images it keeps.

Resolves N distinct images by tag (each an OCI index of linux/amd64 and linux/arm64, its
facts parsed from a manifest body as the registry source parses them) through the real
CachedSource and Store under the default `cache` settings, then asks for every image again
and counts how many were still answered from memory (newest first, so that the misses'
own entries evict only images already counted).

    .venv/bin/python -m bench.cache_memory [--images 10000] [--rss]

With `--rss` the growth of the resident set is reported instead of what tracemalloc sees.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import tracemalloc

import orjson

from extender.config.registry_settings import CacheSettings
from extender.registry.cache import CachedSource, Store
from extender.registry.manifests import parse_manifest
from extender.registry.pure.credentials import CredentialChain
from extender.registry.pure.reference import Reference, parse
from extender.registry.source import ImageFacts

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


class SyntheticRegistry:
    """An ImageSource answering every tag with its own index; counts what it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    async def digest(self, ref: Reference, creds: CredentialChain) -> str:
        self.asked += 1
        return "sha256:" + hashlib.sha256(str(ref).encode()).hexdigest()

    async def tagged(self, ref: Reference, creds: CredentialChain) -> tuple[str, ImageFacts]:
        digest = await self.digest(ref, creds)
        return digest, await self.facts(ref, digest, creds)

    async def facts(self, ref: Reference, digest: str, creds: CredentialChain) -> ImageFacts:
        self.asked += 1
        entries = [
            {
                "mediaType": OCI_MANIFEST,
                "digest": "sha256:" + hashlib.sha256(f"{digest}{arch}".encode()).hexdigest(),
                "size": 1000,
                "platform": {"os": "linux", "architecture": arch},
            }
            for arch in ("amd64", "arm64")
        ]
        body = orjson.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
        index = parse_manifest(body, OCI_INDEX)
        return ImageFacts(index.media_type, index.platforms)

    async def forget_tag(self, ref: Reference, creds: CredentialChain) -> None:
        """Nothing is remembered here."""


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


async def measure(count: int, rss: bool) -> None:
    settings = CacheSettings()
    refs = [parse(f"registry.example.com/team{i % 50}/app{i}:v1.{i % 7}") for i in range(count)]
    creds = CredentialChain()
    registry = SyntheticRegistry()
    gc.collect()
    if not rss:
        tracemalloc.start()
    before = _rss() if rss else tracemalloc.get_traced_memory()[0]
    store = Store(settings)
    source = CachedSource(registry, store)
    for ref in refs:
        await source.facts(ref, await source.digest(ref, creds), creds)
    gc.collect()
    held = (_rss() if rss else tracemalloc.get_traced_memory()[0]) - before
    tracemalloc.stop()
    registry.asked = 0
    kept = 0
    for ref in reversed(refs):  # newest first: a miss then evicts only what was counted
        asked = registry.asked
        await source.facts(ref, await source.digest(ref, creds), creds)
        kept += registry.asked == asked
    await store.aclose()
    print(
        f"cache.maxEntries {settings.max_entries}, {count} images resolved:"
        f" {kept} still cached, memory tier {held / 1024:.0f} KiB"
        f" ({'RSS growth' if rss else 'tracemalloc'}),"
        f" {held / max(kept, 1):.0f} B per cached image"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--rss", action="store_true", help="measure RSS growth instead")
    args = parser.parse_args()
    asyncio.run(measure(args.images, args.rss))


if __name__ == "__main__":
    main()
