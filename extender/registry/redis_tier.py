"""The shared Redis tier of the resolver cache, behind a circuit breaker and a connection cap.

Redis only ever saves a registry request: every operation has a time limit, at most
`redisMaxConnections` connections are open (a lookup that finds none free skips Redis
rather than wait), and after repeated failures the breaker skips Redis for a while at no
cost per call. A hung or dead Redis is then a miss, never a wait.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

import structlog

from extender.metrics import Metrics
from extender.registry.breaker import CircuitBreaker, Clock
from extender.registry.settings import CacheSettings

log = structlog.get_logger(__name__)
_POOL_FULL = "Too many connections"
"""redis-py's message when the pool is at max_connections (MaxConnectionsError from 6.0)."""


class RedisTier:
    """GET (with the entry's remaining TTL), SET with TTL and DEL on one capped pool."""

    def __init__(self, settings: CacheSettings, clock: Clock, metrics: Metrics | None) -> None:
        from redis.asyncio import ConnectionPool, Redis, SSLConnection  # optional dependency

        url = urllib.parse.urlsplit(settings.url)
        timeout = settings.redis_timeout_seconds
        options: dict[str, Any] = {
            "host": url.hostname or "127.0.0.1",
            "port": url.port or 6379,
            "db": int(url.path.strip("/") or 0),
            "password": urllib.parse.unquote(url.password) if url.password else None,
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "max_connections": settings.redis_max_connections,
        }
        if url.scheme == "rediss":
            options["connection_class"] = SSLConnection
        self._client = Redis.from_pool(ConnectionPool(**options))  # closes the pool with it
        self._timeout = timeout
        self._breaker = CircuitBreaker(
            settings.redis_breaker_failures, settings.redis_breaker_open_seconds, clock
        )
        self._metrics = metrics

    async def get(self, key: str) -> tuple[str, float | None] | None:
        """The value and its remaining seconds (None: no expiry), or None: absent or skipped."""
        found = await self._call("get", self._get, key)
        return found if isinstance(found, tuple) else None

    async def set(self, key: str, value: str, ttl: int) -> None:
        """Store `value` for `ttl` seconds, unless Redis is being skipped."""
        await self._call("set", self._client.set, key, value, ex=ttl)

    async def delete(self, key: str) -> None:
        """Drop `key`, unless Redis is being skipped."""
        await self._call("delete", self._client.delete, key)

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self._client.aclose()

    async def _get(self, key: str) -> tuple[str, float | None] | None:
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.get(key)
            pipe.pttl(key)
            value, pttl = await pipe.execute()
        if not isinstance(value, bytes):
            return None
        return value.decode(), (pttl / 1000 if isinstance(pttl, int) and pttl > 0 else None)

    async def _call(self, operation: str, func: Any, *args: Any, **kwargs: Any) -> object:
        from redis.exceptions import ConnectionError as RedisConnectionError

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
