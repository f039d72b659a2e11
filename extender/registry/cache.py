"""The resolver cache: wraps an ImageSource and keeps its Protocol (noe's NewCachedRegistry).

tag→digest lives minutes, digest→facts days (digest bodies never change), failures
seconds. Answers live in this process's bounded memory, and, with a Redis URL, also in
Redis for replicas to share. Memory is asked first, so a hung or dead Redis never
changes or slows an answer memory already has.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson
import structlog

from extender.metrics import Metrics
from extender.platforms import normalize
from extender.registry import errors
from extender.registry.breaker import Clock
from extender.registry.credentials import CredentialChain
from extender.registry.flight import SingleFlight
from extender.registry.redis_tier import RedisTier
from extender.registry.reference import Reference
from extender.registry.settings import CacheSettings
from extender.registry.source import ImageFacts, ImageSource

log = structlog.get_logger(__name__)
T = TypeVar("T")
V = TypeVar("V")


class BoundedTTLMap(Generic[V]):
    """A dict with a TTL per entry and a size bound: the least recently used entry goes first.

    Expired entries are dropped when met; the bound caps what the rest can cost.
    """

    def __init__(self, max_entries: int, clock: Clock = time.monotonic) -> None:
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[V, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> V | None:
        """The live value under `key`, or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def set(self, key: str, value: V, ttl: float) -> None:
        """Keep `value` for `ttl` seconds."""
        self._entries[key] = (value, self._clock() + ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def pop(self, key: str) -> None:
        """Drop `key` if present."""
        self._entries.pop(key, None)


class Store:
    """Values with a TTL, in memory first and in Redis if configured.

    Memory holds decoded values, so a warm answer costs a dict lookup; Redis holds their
    text. A failing or slow Redis is a miss, never an error.
    """

    def __init__(
        self,
        settings: CacheSettings,
        metrics: Metrics | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.settings = settings
        self._local: BoundedTTLMap[Any] = BoundedTTLMap(settings.max_entries, clock)
        self._redis = RedisTier(settings, clock, metrics) if settings.is_redis else None

    def key(self, *parts: str) -> str:
        """A namespaced key."""
        return ":".join((self.settings.namespace, *parts))

    async def get(self, key: str, decode: Callable[[str], T], ttl: float) -> T | None:
        """The value under `key`: from memory, else from Redis (then kept in memory too).

        `ttl` bounds how long a value read from Redis stays in memory.
        """
        value: T | None = self._local.get(key)
        if value is not None or self._redis is None:
            return value
        found = await self._redis.get(key)
        if found is None:
            return None
        text, remaining = found
        try:
            decoded = decode(text)
        except (ValueError, KeyError, TypeError):
            log.warning("cache_entry_unreadable", key=key.split(":", 2)[1])
            return None
        self._local.set(key, decoded, min(ttl, remaining) if remaining else ttl)
        return decoded

    async def set(self, key: str, value: T, encode: Callable[[T], str], ttl: int) -> None:
        """Keep `value` for `ttl` seconds, in memory and in Redis."""
        self._local.set(key, value, ttl)
        if self._redis is not None:
            await self._redis.set(key, encode(value), ttl)

    async def delete(self, key: str) -> None:
        """Forget `key` everywhere."""
        self._local.pop(key)
        if self._redis is not None:
            await self._redis.delete(key)

    async def aclose(self) -> None:
        """Close Redis connections."""
        if self._redis is not None:
            await self._redis.aclose()


class CachedSource:
    """An ImageSource that remembers answers and shares in-flight fetches."""

    def __init__(self, inner: ImageSource, store: Store, metrics: Metrics | None = None) -> None:
        self._inner = inner
        self._store = store
        self._settings = store.settings
        self._metrics = metrics
        self._flights: SingleFlight[str, Any] = SingleFlight()

    async def aclose(self) -> None:
        """Cancel fetches still running."""
        await self._flights.aclose()

    async def digest(self, ref: Reference, creds: CredentialChain) -> str:
        fetch = lambda: self._inner.digest(ref, creds)  # noqa: E731
        ttl = self._settings.tag_ttl_seconds
        return await self._cached("tag", self._tag_key(ref, creds), ttl, fetch, str, str)

    async def facts(self, ref: Reference, digest: str, creds: CredentialChain) -> ImageFacts:
        key = self._store.key("digest", creds.identity, f"{ref.name}@{digest}")
        fetch = lambda: self._inner.facts(ref, digest, creds)  # noqa: E731
        ttl = self._settings.digest_ttl_seconds
        return await self._cached("digest", key, ttl, fetch, _encode_facts, _decode_facts)

    async def forget_tag(self, ref: Reference, creds: CredentialChain) -> None:
        """Drop what the tag was said to point at (its digest's body failed verification)."""
        await self._store.delete(self._tag_key(ref, creds))

    def _tag_key(self, ref: Reference, creds: CredentialChain) -> str:
        return self._store.key("tag", creds.identity, f"{ref.name}:{ref.tag}")

    async def _cached(
        self,
        kind: str,
        key: str,
        ttl: int,
        fetch: Callable[[], Awaitable[T]],
        encode: Callable[[T], str],
        decode: Callable[[str], T],
    ) -> T:
        hit = await self._store.get(key, decode, ttl)
        if hit is not None:
            self._count(kind, "hit")
            return hit
        failure_ttl = self._settings.failure_ttl_seconds
        failure = await self._store.get(f"{key}:failed", _decode_failure, failure_ttl)
        if failure is not None:
            self._count(kind, "failure")
            raise failure.error()
        self._count(kind, "miss")
        result: T = await self._flights.run(key, lambda: self._fill(key, ttl, fetch, encode))
        return result

    async def _fill(
        self, key: str, ttl: int, fetch: Callable[[], Awaitable[T]], encode: Callable[[T], str]
    ) -> T:
        # Runs as the shared task: it stores the answer even if every caller has gone.
        try:
            value = await fetch()
        except errors.RegistryError as error:
            failure_ttl = self._settings.failure_ttl_seconds
            record = Failure.of(error)
            await self._store.set(f"{key}:failed", record, _encode_failure, failure_ttl)
            raise
        await self._store.set(key, value, encode, ttl)
        return value

    def _count(self, kind: str, result: str) -> None:
        if self._metrics is not None:
            self._metrics.cache_lookup(kind, result)


@dataclass(frozen=True, slots=True)
class Failure:
    """A remembered failure: raised afresh on each hit, so no traceback piles up."""

    kind: str
    message: str
    status: int = 0

    @classmethod
    def of(cls, error: errors.RegistryError) -> Failure:
        return cls(type(error).__name__, str(error), getattr(error, "status", 0))

    def error(self) -> errors.RegistryError:
        """A new exception of the remembered kind."""
        if self.kind == "UnexpectedStatus":
            return errors.UnexpectedStatus(self.message, self.status)
        kind = getattr(errors, self.kind, None)
        if isinstance(kind, type) and issubclass(kind, errors.RegistryError):
            return kind(self.message)
        return errors.RegistryError(self.message)


def _encode_facts(facts: ImageFacts) -> str:
    platforms = sorted(facts.platforms)
    return orjson.dumps(
        {
            "m": facts.media_type,
            "a": facts.artifact,
            "p": [[p.os, p.architecture, p.variant, p.os_version] for p in platforms],
        }
    ).decode()


def _decode_facts(text: str) -> ImageFacts:
    document = orjson.loads(text)
    # Normalised again on the way out: entries cached by an older archfit (Redis keeps
    # them for a week) then follow today's rules. normalize() is idempotent.
    platforms = frozenset(normalize(*(str(part) for part in entry)) for entry in document["p"])
    return ImageFacts(str(document["m"]), platforms, bool(document["a"]))


def _encode_failure(failure: Failure) -> str:
    return orjson.dumps({"t": failure.kind, "m": failure.message, "s": failure.status}).decode()


def _decode_failure(text: str) -> Failure:
    try:
        document = orjson.loads(text)
        return Failure(str(document["t"]), str(document["m"]), int(document["s"]))
    except (ValueError, KeyError, TypeError):
        return Failure("RegistryError", "lookup failed recently (cached failure)")
