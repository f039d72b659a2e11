"""Learned evidence, "digest D does not run on platform P", kept in the cache's tiers, and the
resolver that believes it over the index (docs/operations.md, "Learned evidence").

The mismatch watcher learns it from a container that failed with exec format error. Every
replica keeps all of it in memory (a handful of entries: a lookup is a dict read) and, with
a Redis URL (`cache.url`), shares it through one Redis hash, read again every
`watcher.evidenceSyncSeconds`; so a restart or a second replica keeps what was learned, and
`archfit evidence clear` reaches every replica. Each entry expires
(`watcher.evidenceTtlSeconds`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import orjson
import structlog

from extender.mismatch import Evidence, without_failing
from extender.platforms import Platform
from extender.platforms import parse as parse_platform
from extender.pods import PullSecretsRef
from extender.registry.settings import CacheSettings

if TYPE_CHECKING:
    from extender.config import Settings
    from extender.metrics import Metrics
    from extender.registry.redis_tier import RedisTier
    from extender.registry.resolver import ImageResolution

log = structlog.get_logger("archfit.evidence")

_NONE: frozenset[Platform] = frozenset()


class EvidenceBook:
    """Evidence in memory, and in the Redis hash `<cache.namespace>:evidence` if configured."""

    def __init__(
        self,
        cache: CacheSettings,
        metrics: Metrics | None = None,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._wall = wall
        self._metrics = metrics
        self._hash = f"{cache.namespace}:evidence"
        self._entries: dict[str, Evidence] = {}
        self._by_digest: dict[str, dict[Platform, Evidence]] = {}
        self._unsaved: set[str] = set()
        """Keys learned here that Redis has not taken yet: written again at the next sync."""
        self._redis: RedisTier | None = None
        if cache.is_redis:
            from extender.registry.redis_tier import RedisTier

            self._redis = RedisTier(cache, time.monotonic, metrics)

    @property
    def shared(self) -> bool:
        """Whether the evidence lives in Redis (so the CLI and other replicas see it)."""
        return self._redis is not None

    def failing(self, digest: str) -> frozenset[Platform]:
        """The platforms `digest` is known not to run on now (a dict read: hot path)."""
        found = self._by_digest.get(digest)
        if not found:
            return _NONE
        now = self._wall()
        return frozenset(p for p, e in found.items() if e.expires > now)

    def entries(self) -> list[Evidence]:
        """Every unexpired entry, oldest first."""
        now = self._wall()
        return sorted((e for e in self._entries.values() if e.expires > now), key=_learned)

    async def learn(self, evidence: Evidence) -> bool:
        """Keep `evidence`; False when it was known already (unexpired)."""
        known = self._entries.get(evidence.key)
        if known is not None and known.expires > self._wall():
            return False
        self._keep(evidence)
        self._unsaved.add(evidence.key)
        await self._save()
        return True

    async def sync(self) -> bool:
        """Read the shared hash again (and write what it lacks); False when Redis failed."""
        if self._redis is None:
            return True
        await self._save()
        found = await self._redis.command("hgetall", self._hash)
        if not isinstance(found, dict):
            return False
        now = self._wall()
        entries: dict[str, Evidence] = {}
        expired: list[bytes] = []
        for field, value in found.items():
            evidence = _decode(value)
            if evidence is None or evidence.expires <= now:
                expired.append(field)
                continue
            entries[evidence.key] = evidence
        for key in self._unsaved:
            if key in self._entries:
                entries[key] = self._entries[key]
        self._replace(entries)
        if expired:
            await self._redis.command("hdel", self._hash, *expired)
        return True

    async def clear(self, digest: str = "") -> int:
        """Forget every entry, or those of `digest`; returns how many."""
        await self.sync()
        gone = [e for e in self._entries.values() if not digest or e.digest == digest]
        self._replace({k: e for k, e in self._entries.items() if e not in gone})
        self._unsaved.difference_update(e.key for e in gone)
        if gone and self._redis is not None:
            await self._redis.command("hdel", self._hash, *(e.key for e in gone))
        return len(gone)

    async def run(self, every_seconds: float) -> None:
        """Keep in step with the other replicas until cancelled."""
        while True:
            await self.sync()
            await asyncio.sleep(every_seconds)

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()

    async def _save(self) -> None:
        if self._redis is None or not self._unsaved:
            return
        pending = {k: self._entries[k] for k in self._unsaved if k in self._entries}
        mapping = {k: _encode(e) for k, e in pending.items()}
        if not mapping:
            self._unsaved.clear()
            return
        written = await self._redis.command("hset", self._hash, mapping=mapping)
        if written is not None:
            self._unsaved.difference_update(pending)

    def _keep(self, evidence: Evidence) -> None:
        self._replace({**self._entries, evidence.key: evidence})

    def _replace(self, entries: dict[str, Evidence]) -> None:
        by_digest: dict[str, dict[Platform, Evidence]] = {}
        for evidence in entries.values():
            by_digest.setdefault(evidence.digest, {})[evidence.platform] = evidence
        self._entries, self._by_digest = entries, by_digest  # swaps: readers see old or new
        if self._metrics is not None:
            self._metrics.evidence_entries.set(len(entries))


def _learned(evidence: Evidence) -> float:
    return evidence.learned


def _encode(evidence: Evidence) -> str:
    return orjson.dumps(
        {
            "d": evidence.digest,
            "p": str(evidence.platform),
            "i": evidence.image,
            "r": evidence.reason,
            "l": evidence.learned,
            "e": evidence.expires,
        }
    ).decode()


def _decode(raw: object) -> Evidence | None:
    """An entry from its text, or None (another version's, or damaged: dropped)."""
    try:
        document = orjson.loads(raw if isinstance(raw, bytes | str) else b"")
        reason = str(document["r"])
        if reason not in ("pull", "start", "run"):
            return None
        return Evidence(
            str(document["d"]),
            parse_platform(str(document["p"])),
            str(document["i"]),
            reason,  # type: ignore[arg-type]  # checked above
            float(document["l"]),
            float(document["e"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


@asynccontextmanager
async def evidence_book(
    cache: CacheSettings, sync_seconds: float, metrics: Metrics | None = None
) -> AsyncIterator[EvidenceBook]:
    """A book kept in step with Redis in the background while the context is open."""
    book = EvidenceBook(cache, metrics)
    syncing = asyncio.create_task(book.run(sync_seconds), name="archfit-evidence-sync")
    try:
        yield book
    finally:
        syncing.cancel()
        await asyncio.gather(syncing, return_exceptions=True)
        await book.aclose()


class DigestResolver(Protocol):
    """What LearnedResolver needs of the resolver it wraps (registry.resolver.RegistryResolver)."""

    async def resolve(self, image: str, pull: PullSecretsRef | None = None) -> ImageResolution: ...

    async def aclose(self) -> None: ...


class LearnedResolver:
    """A PlatformResolver that believes learned evidence over the index: a platform the
    digest was seen failing on is not among its platforms, whatever the index claims."""

    def __init__(self, inner: DigestResolver, book: EvidenceBook) -> None:
        self._inner = inner
        self.book = book

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        return (await self.resolve(image, pull)).platforms

    async def resolve(self, image: str, pull: PullSecretsRef | None = None) -> ImageResolution:
        found = await self._inner.resolve(image, pull)
        failing = self.book.failing(found.digest)
        if not failing:
            return found
        narrowed = without_failing(found.platforms, failing)
        return dataclasses.replace(found, platforms=narrowed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # tags(), aclose(): the wrapped resolver's


async def evidence_command(settings: Settings, action: str, digest: str, out: TextIO) -> int:
    """`archfit evidence list|clear [--digest D]`: 0, or 2 when no Redis holds any."""
    book = EvidenceBook(settings.cache)
    try:
        if not book.shared:
            print(
                "archfit: evidence lives in the memory of the serving replica: set cache.url "
                "(Redis) to list or clear it here (a restart of archfit also clears it)",
                file=sys.stderr,
            )
            return 2
        if not await book.sync():
            print("archfit: Redis did not answer (cache.url)", file=sys.stderr)
            return 1
        if action == "clear":
            print(f"cleared {await book.clear(digest)} entries", file=out)
            return 0
        for entry in book.entries():
            expires = datetime.datetime.fromtimestamp(entry.expires, datetime.UTC)
            print(
                f"{entry.digest}  {entry.platform}  {entry.reason}  {entry.image}  "
                f"expires {expires:%Y-%m-%dT%H:%M:%SZ}",
                file=out,
            )
        return 0
    finally:
        await book.aclose()
