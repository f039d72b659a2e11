"""The shared Redis tier of the resolver cache: aiocache's RedisCache, behind a circuit breaker,
a connection cap and one time limit per operation.

Redis only ever saves a registry request: every operation has a time limit, at most
`redisMaxConnections` connections are open (a lookup that finds none free skips Redis
rather than wait), and after repeated failures the breaker skips Redis for a while at no
cost per call. A hung or dead Redis is then a miss, never a wait.

Imported only with a Redis URL: aiocache and redis-py are the `redis` extra.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
from aiocache import RedisCache  # type: ignore[import-untyped]
from aiocache.serializers import StringSerializer  # type: ignore[import-untyped]
from redis.exceptions import ConnectionError as RedisConnectionError

from extender.config.registry_settings import CacheSettings
from extender.metrics import Metrics
from extender.registry.breaker import CircuitBreaker
from extender.ttlmap import Clock

log = structlog.get_logger(__name__)
T = TypeVar("T")
_POOL_FULL = "Too many connections"
"""redis-py's message when the pool is at max_connections (MaxConnectionsError from 6.0)."""


class RedisTier:
    """GET (with the entry's remaining TTL), SET with TTL and DEL on one capped pool.

    The client is aiocache's RedisCache with its StringSerializer: Redis holds text, and each
    kind of answer is written and read by the encode and decode its caller gives, as
    aiocache's per-call `dumps_fn` and `loads_fn`, so the text is the same whatever wrote it.
    """

    def __init__(self, settings: CacheSettings, clock: Clock, metrics: Metrics | None) -> None:
        url = urllib.parse.urlsplit(settings.url)
        timeout = settings.redis_timeout_seconds
        self._cache = RedisCache(
            serializer=StringSerializer(),
            endpoint=url.hostname or "127.0.0.1",
            port=url.port or 6379,
            db=int(url.path.strip("/") or 0),
            password=urllib.parse.unquote(url.password) if url.password else None,
            ssl=url.scheme == "rediss",
            pool_max_size=settings.redis_max_connections,
            create_connection_timeout=timeout,
            connection_pool_kwargs={"socket_timeout": timeout},
            # aiocache's own limit bounds each command; `_call` bounds an operation as one
            # (a GET and its PTTL), so aiocache's is off.
            timeout=None,
        )
        self._timeout = timeout
        self._breaker = CircuitBreaker(
            settings.redis_breaker_failures, settings.redis_breaker_open_seconds, clock
        )
        self._metrics = metrics

    async def get(self, key: str, decode: Callable[[str], T]) -> tuple[T, float | None] | None:
        """The decoded value and its remaining seconds (None: no expiry), or None: absent,
        skipped, or a value that does not decode (another version's, or damaged)."""
        found = await self._call("get", self._get, key, decode)
        return found if isinstance(found, tuple) else None

    async def set(self, key: str, value: T, encode: Callable[[T], str], ttl: int) -> None:
        """Store `encode(value)` for `ttl` seconds, unless Redis is being skipped."""
        # A float TTL: aiocache then sends PSETEX (milliseconds); with an int it sends SETEX,
        # which redis-py 8 reports as deprecated. The entry expires the same.
        await self._call("set", self._cache.set, key, value, ttl=float(ttl), dumps_fn=encode)

    async def delete(self, key: str) -> None:
        """Drop `key`, unless Redis is being skipped."""
        await self._call("delete", self._cache.delete, key)

    async def command(self, name: str, *args: Any, **kwargs: Any) -> object:
        """One raw command (`hgetall`, `hset`, `hdel`: the learned evidence's hash), bounded
        and skipped as the others are; None when skipped or failed."""
        return await self._call(name, self._cache.raw, name, *args, **kwargs)

    async def aclose(self) -> None:
        """Close every pooled connection.

        Through the redis-py client aiocache made (`RedisCache.client`): aiocache 0.12's
        `close()` calls redis-py's `close()`, deprecated since redis-py 5.0.1 for `aclose()`.
        """
        await self._cache.client.aclose()

    async def _get(self, key: str, decode: Callable[[str], T]) -> tuple[T, float | None] | None:
        def loads(text: str | None) -> T | None:
            if text is None:
                return None
            try:
                return decode(text)
            except (ValueError, KeyError, TypeError):
                log.warning("cache_entry_unreadable", key=key.split(":", 2)[1])
                return None

        value = await self._cache.get(key, loads_fn=loads)
        if value is None:
            return None
        pttl = await self._cache.raw("pttl", key)
        return value, (pttl / 1000 if isinstance(pttl, int) and pttl > 0 else None)

    async def _call(
        self, operation: str, func: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any
    ) -> object:
        if not self._breaker.allow():
            self._count("skipped")
            return None
        try:
            async with asyncio.timeout(self._timeout):
                result: object = await func(*args, **kwargs)
        except BaseException as error:
            if isinstance(error, RedisConnectionError) and str(error) == _POOL_FULL:
                # Every connection is busy: skip Redis for this call; Redis is not at fault.
                self._breaker.abandoned()
                self._count("busy")
                return None
            # A timeout, a refused connection, a cancelled caller: all count as a failure,
            # so a probe never stays pending and the breaker never sticks half-open.
            self._breaker.failed()
            if not isinstance(error, Exception):
                raise
            log.warning(
                "cache_backend_failed",
                operation=operation,
                error=type(error).__name__,
                breaker="open" if self._breaker.is_open else "closed",
            )
            self._count("error")
            return None
        self._breaker.succeeded()
        return result

    def _count(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.cache_lookups.labels("backend", result).inc()
