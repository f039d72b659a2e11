"""Learned evidence shared through Redis (with `cache.url`): one hash, an entry per field, as
extender.resolution.evidence_book encodes them; every replica and `archfit evidence` read it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from extender.config.registry_settings import CacheSettings

if TYPE_CHECKING:
    from extender.metrics import Metrics


class RedisEvidence:
    """Evidence in the Redis hash `<cache.namespace>:evidence` (with `cache.url`)."""

    def __init__(self, cache: CacheSettings, metrics: Metrics | None = None) -> None:
        from extender.registry.redis_tier import RedisTier

        self._hash = f"{cache.namespace}:evidence"
        self._redis = RedisTier(cache, time.monotonic, metrics)

    async def read(self) -> dict[str, str] | None:
        found = await self._redis.command("hgetall", self._hash)
        if not isinstance(found, dict):
            return None
        return {_text(key): _text(value) for key, value in found.items()}

    async def write(self, entries: dict[str, str]) -> bool:
        return await self._redis.command("hset", self._hash, mapping=entries) is not None

    async def delete(self, keys: list[str]) -> None:
        if keys:
            await self._redis.command("hdel", self._hash, *keys)

    async def aclose(self) -> None:
        await self._redis.aclose()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
