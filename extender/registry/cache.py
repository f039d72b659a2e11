"""The resolver cache: wraps an ImageSource and keeps its Protocol (noe's NewCachedRegistry).

tag→digest lives minutes, digest→facts days (digest bodies never change), failures
seconds. aiocache holds them: in memory with an LRU bound, or in Redis for replicas.
"""

from __future__ import annotations

import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import structlog
from aiocache import SimpleMemoryCache
from aiocache.base import BaseCache
from aiocache.serializers import NullSerializer, StringSerializer

from extender.metrics import Metrics
from extender.platforms import normalize
from extender.registry import errors
from extender.registry.credentials import CredentialChain
from extender.registry.flight import SingleFlight
from extender.registry.reference import Reference
from extender.registry.settings import CacheSettings
from extender.registry.source import ImageFacts, ImageSource

log = structlog.get_logger(__name__)
T = TypeVar("T")


class BoundedMemoryCache(SimpleMemoryCache):  # type: ignore[misc]
    """SimpleMemoryCache with a size bound: the least recently used entry goes first."""

    def __init__(self, max_entries: int, **kwargs: Any) -> None:
        super().__init__(serializer=NullSerializer(), **kwargs)
        self._max_entries = max_entries
        self._cache: OrderedDict[str, object] = OrderedDict()

    async def _get(self, key: str, encoding: str = "utf-8", _conn: Any = None) -> object:
        if key in self._cache:
            self._cache.move_to_end(key)
        return self._cache.get(key)

    async def _set(
        self, key: str, value: object, ttl: Any = None, _cas_token: Any = None, _conn: Any = None
    ) -> bool:
        result: bool = await super()._set(key, value, ttl=ttl, _cas_token=_cas_token, _conn=_conn)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_entries:
            oldest = next(iter(self._cache))
            await self._delete(oldest)  # also cancels its expiry timer
        return result


def redis_cache(settings: CacheSettings) -> BaseCache:
    """An aiocache RedisCache for `settings.url` (needs the `redis` extra installed)."""
    from aiocache.backends.redis import RedisCache  # optional dependency

    class ClosingRedisCache(RedisCache):  # type: ignore[misc]
        # aiocache 0.12 calls redis-py APIs that redis-py 5+ deprecates (close, setex);
        # these two overrides use their replacements.
        async def _close(self, *args: Any, _conn: Any = None, **kwargs: Any) -> None:
            await self.client.aclose()

        async def _set(
            self, key: str, value: Any, ttl: Any = None, _cas_token: Any = None, _conn: Any = None
        ) -> Any:
            return await self.client.set(key, value, ex=int(ttl) if ttl else None)

    url = urllib.parse.urlsplit(settings.url)
    timeout = settings.redis_timeout_seconds
    return ClosingRedisCache(
        serializer=StringSerializer(),
        endpoint=url.hostname or "127.0.0.1",
        port=url.port or 6379,
        db=int(url.path.strip("/") or 0),
        password=urllib.parse.unquote(url.password) if url.password else None,
        ssl=url.scheme == "rediss",
        create_connection_timeout=timeout,
        timeout=timeout,
        connection_pool_kwargs={"socket_timeout": timeout},
    )


class Store:
    """String values with a TTL. A failing or slow backend is a miss, never an error."""

    def __init__(self, settings: CacheSettings, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self._metrics = metrics
        self._backend: Any
        if settings.is_redis:
            self._backend = redis_cache(settings)
        else:
            self._backend = BoundedMemoryCache(settings.max_entries, timeout=None)

    def key(self, *parts: str) -> str:
        """A namespaced key."""
        return ":".join((self.settings.namespace, *parts))

    async def get(self, key: str) -> str | None:
        """The value under `key`, or None when absent or the backend fails."""
        try:
            value = await self._backend.get(key)
        except Exception as error:  # any backend trouble (Redis down, timeout) is a miss
            self._trouble("get", error)
            return None
        return value if isinstance(value, str) else None

    async def set(self, key: str, value: str, ttl: int) -> None:
        """Store `value` for `ttl` seconds; backend trouble is logged and ignored."""
        try:
            await self._backend.set(key, value, ttl=ttl)
        except Exception as error:  # a lost write only costs a refetch
            self._trouble("set", error)

    def _trouble(self, operation: str, error: Exception) -> None:
        log.warning("cache_backend_failed", operation=operation, error=type(error).__name__)
        if self._metrics is not None:
            self._metrics.cache_lookups.labels("backend", "error").inc()

    async def aclose(self) -> None:
        """Close the backend's connections."""
        await self._backend.close()


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
        key = self._store.key("tag", creds.identity, f"{ref.name}:{ref.tag}")
        fetch = lambda: self._inner.digest(ref, creds)  # noqa: E731
        return await self._cached("tag", key, self._settings.tag_ttl_seconds, fetch, str, str)

    async def facts(self, ref: Reference, digest: str, creds: CredentialChain) -> ImageFacts:
        key = self._store.key("digest", creds.identity, f"{ref.name}@{digest}")
        fetch = lambda: self._inner.facts(ref, digest, creds)  # noqa: E731
        ttl = self._settings.digest_ttl_seconds
        return await self._cached("digest", key, ttl, fetch, _encode_facts, _decode_facts)

    async def _cached(
        self,
        kind: str,
        key: str,
        ttl: int,
        fetch: Callable[[], Awaitable[T]],
        encode: Callable[[T], str],
        decode: Callable[[str], T],
    ) -> T:
        hit = await self._store.get(key)
        if hit is not None:
            try:
                value = decode(hit)
            except (ValueError, KeyError, TypeError):
                log.warning("cache_entry_unreadable", kind=kind)
            else:
                self._count(kind, "hit")
                return value
        failure = await self._store.get(f"{key}:failed")
        if failure is not None:
            self._count(kind, "failure")
            raise _decode_failure(failure)
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
            await self._store.set(f"{key}:failed", _encode_failure(error), failure_ttl)
            raise
        await self._store.set(key, encode(value), ttl)
        return value

    def _count(self, kind: str, result: str) -> None:
        if self._metrics is not None:
            self._metrics.cache_lookup(kind, result)


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


def _encode_failure(error: errors.RegistryError) -> str:
    status = getattr(error, "status", 0)
    return orjson.dumps({"t": type(error).__name__, "m": str(error), "s": status}).decode()


def _decode_failure(text: str) -> errors.RegistryError:
    try:
        document = orjson.loads(text)
        name, message, status = str(document["t"]), str(document["m"]), int(document["s"])
    except (ValueError, KeyError, TypeError):
        return errors.RegistryError("lookup failed recently (cached failure)")
    if name == "UnexpectedStatus":
        return errors.UnexpectedStatus(message, status)
    kind = getattr(errors, name, None)
    if isinstance(kind, type) and issubclass(kind, errors.RegistryError):
        return kind(message)
    return errors.RegistryError(message)
