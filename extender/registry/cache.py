"""The resolver cache: wraps an ImageSource and keeps its Protocol.

tag→digest lives minutes, digest→facts days (digest bodies never change), failures
seconds. A tag's last good digest outlives its tag→digest by `cache.staleIfErrorSeconds`,
so that a registry failing after the TTL can be answered from it (see `last_digest`).
A tag with such a digest is revalidated (HEAD); a tag without one is fetched whole, its
digest and facts from one GET (`ImageSource.tagged`).
Answers live in this process's bounded memory, and, with a Redis URL, also in Redis for
replicas to share (and a restart to keep). Memory is asked first, so a hung or dead Redis
never changes or slows an answer memory already has. Concurrent lookups of one key share
one fetch (the memory tier's single flight, `extender.ttlmap`).

`cache.maxEntries` counts images: a tag's digest, the tag's last good digest, that digest's
facts and a recent failure are kept in four maps of that size, so as many images keep all
four.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

import orjson

from extender.config.registry_settings import CacheSettings
from extender.core.interning import Interner
from extender.core.platforms import normalize
from extender.metrics import Metrics
from extender.registry import errors
from extender.registry.deadline import (
    cached_only,
    note_registry_asked,
    request_seconds_left,
    skip_remembered_failures,
)
from extender.registry.pure.credentials import CredentialChain
from extender.registry.pure.reference import Reference
from extender.registry.source import ImageFacts, ImageSource
from extender.ttlmap import Clock, TTLMap

if TYPE_CHECKING:
    from extender.registry.redis_tier import RedisTier

T = TypeVar("T")

Kind = Literal["tag", "known", "digest", "failure"]
"""What a memory tier holds: a tag's digest, the tag's last good digest (kept
`staleIfErrorSeconds` longer), a digest's facts, a lookup's recent failure."""
_KINDS: tuple[Kind, ...] = ("tag", "known", "digest", "failure")
_REDIS_SUFFIX: dict[Kind, str] = {"tag": "", "known": ":known", "digest": "", "failure": ":failed"}
"""What sets a kind's Redis keys apart. In memory each kind has its own map, so a tag's
digest, its last good digest and its failure share one key string there."""
_TAG_SHARE = 0.8
"""Of the time a request has left, the share a tag's fetch may take when the tag's last good
digest can answer instead; the rest is for the digest's facts (memory, or Redis)."""
_FETCHED_ENTRIES = 1024
_FETCHED_SECONDS = 60.0
"""How long the mark of facts a tag's GET brought waits for the lookup that asks for them."""
_REVALIDATE_SECONDS = 86_400
"""With `staleIfErrorSeconds: 0`, how long past its TTL a tag's last digest is still kept,
answering nothing: a tag with one is revalidated with a HEAD, not fetched anew with a GET."""


class Store:
    """Values with a TTL, in memory first and in Redis if configured.

    Memory holds decoded values, so a warm answer costs a dict lookup; Redis holds their
    text. A failing or slow Redis is a miss, never an error. Memory keeps each kind of
    value in its own map of `maxEntries`, so that many images keep their tag's digest, its
    last good digest, their digest's facts and a recent failure all at once: the bound
    counts images.
    """

    def __init__(
        self,
        settings: CacheSettings,
        metrics: Metrics | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.settings = settings
        self._local: dict[Kind, TTLMap[str, Any]] = {
            kind: TTLMap(settings.max_entries, clock) for kind in _KINDS
        }
        self._redis: RedisTier | None = None
        if settings.is_redis:
            # aiocache and redis-py are the `redis` extra: loaded only with a Redis URL.
            from extender.registry.redis_tier import RedisTier

            self._redis = RedisTier(settings, clock, metrics)

    def key(self, *parts: str) -> str:
        """A namespaced key."""
        return ":".join((self.settings.namespace, *parts))

    async def get(self, kind: Kind, key: str, decode: Callable[[str], T], ttl: float) -> T | None:
        """The value under `key`: from memory, else from Redis (then kept in memory too).

        `ttl` bounds how long a value read from Redis stays in memory.
        """
        value: T | None = self._local[kind].get(key)
        if value is not None or self._redis is None:
            return value
        found = await self._from_redis(self._redis, kind, key, decode, ttl)
        return None if found is None else found[0]

    async def get_with_ttl(
        self, kind: Kind, key: str, decode: Callable[[str], T], ttl: float
    ) -> tuple[T, float] | None:
        """As `get`, with the seconds the value has left."""
        entry: tuple[T, float] | None = self._local[kind].get_with_ttl(key)
        if entry is not None or self._redis is None:
            return entry
        return await self._from_redis(self._redis, kind, key, decode, ttl)

    async def _from_redis(
        self, redis: RedisTier, kind: Kind, key: str, decode: Callable[[str], T], ttl: float
    ) -> tuple[T, float] | None:
        """The value under `key` in Redis and its seconds left, now also kept in memory."""
        found = await redis.get(key + _REDIS_SUFFIX[kind], decode)
        if found is None:
            return None
        decoded, remaining = found
        left = min(ttl, remaining) if remaining else ttl
        self._local[kind].put(key, decoded, left)
        return decoded, left

    async def set(
        self, kind: Kind, key: str, value: T, encode: Callable[[T], str], ttl: int
    ) -> None:
        """Keep `value` for `ttl` seconds, in memory and in Redis."""
        self._local[kind].put(key, value, ttl)
        if self._redis is not None:
            await self._redis.set(key + _REDIS_SUFFIX[kind], value, encode, ttl)

    async def load(
        self,
        kind: Kind,
        key: str,
        fetch: Callable[[], Awaitable[T]],
        encode: Callable[[T], str],
        ttl: int,
    ) -> T:
        """What one `fetch()`, shared by every concurrent caller, answers; kept as `set` does.

        A failed fetch is not kept: its caller decides whether to remember the failure.
        """

        async def fill() -> T:
            # The map's shared load: it keeps the answer even if every caller has gone.
            value = await fetch()
            if self._redis is not None:
                # Memory first, for Redis may be slow; without Redis the map keeps the
                # answer itself as the load ends.
                await self.set(kind, key, value, encode, ttl)
            return value

        result: T = await self._local[kind].get_or_load(key, fill, lambda _: ttl)
        return result

    async def delete(self, kind: Kind, key: str) -> None:
        """Forget `key` everywhere."""
        self._local[kind].pop(key)
        if self._redis is not None:
            await self._redis.delete(key + _REDIS_SUFFIX[kind])

    async def aclose(self) -> None:
        """Cancel loads still running and close Redis connections."""
        for local in self._local.values():
            await local.aclose()
        if self._redis is not None:
            await self._redis.aclose()


class KnownDigest(NamedTuple):
    """The digest a tag pointed at when the registry last answered, and how long ago."""

    digest: str
    age_seconds: float


class CachedSource:
    """An ImageSource that remembers answers and shares in-flight fetches."""

    def __init__(self, inner: ImageSource, store: Store, metrics: Metrics | None = None) -> None:
        self._inner = inner
        self._store = store
        self._settings = store.settings
        self._metrics = metrics
        self._shared: Interner[ImageFacts] = Interner()
        """One copy of each distinct ImageFacts: thousands of images have a few shapes."""
        self._fetched: TTLMap[str, bool] = TTLMap(_FETCHED_ENTRIES)
        """Digest keys whose facts a never-seen tag's GET just brought: the lookup that asks
        for them next found them, but counts as the miss it was (the registry was asked)."""

    async def digest(self, ref: Reference, creds: CredentialChain) -> str:
        key = self._tag_key(ref, creds)

        async def fetch() -> str:
            if await self._store.get("known", key, str, self._known_ttl) is not None:
                # A digest to revalidate: HEAD asks only whether it still holds (no Docker
                # Hub pull), and that digest's facts are most likely still cached.
                digest = await self._inner.digest(ref, creds)
            else:
                # Nothing to revalidate: the manifest is needed anyway, so one GET of the
                # tag answers both, and its facts are kept as a digest's are.
                digest, facts = await self._inner.tagged(ref, creds)
                facts_ttl = self._settings.digest_ttl_seconds
                digest_key = self._digest_key(ref, digest, creds)
                await self._store.set(
                    "digest", digest_key, self._shared(facts), _encode_facts, facts_ttl
                )
                self._fetched.put(digest_key, True, _FETCHED_SECONDS)
            await self._store.set("known", key, digest, str, self._known_ttl)
            return digest

        ttl = self._settings.tag_ttl_seconds
        until = lambda load: self._until_deadline(ref, key, load)  # noqa: E731
        return await self._cached("tag", key, ttl, fetch, str, str, wait=until)

    async def tagged(self, ref: Reference, creds: CredentialChain) -> tuple[str, ImageFacts]:
        """The tag's digest, then its facts, each from the cache where it has them."""
        digest = await self.digest(ref, creds)
        return digest, await self.facts(ref, digest, creds)

    async def last_digest(self, ref: Reference, creds: CredentialChain) -> KnownDigest | None:
        """The digest the registry last gave for the tag, up to `staleIfErrorSeconds` after
        that answer's TTL ran out, or None. Only for a registry that fails to answer now.

        Its age is read from the record's time left, so it holds across replicas and restarts
        that share Redis.
        """
        if not self._settings.stale_if_error_seconds:
            return None
        key = self._tag_key(ref, creds)
        found = await self._store.get_with_ttl("known", key, str, self._known_ttl)
        if found is None:
            return None
        digest, left = found
        return KnownDigest(digest, max(self._known_ttl - left, 0.0))

    async def facts(self, ref: Reference, digest: str, creds: CredentialChain) -> ImageFacts:
        key = self._digest_key(ref, digest, creds)

        async def fetch() -> ImageFacts:
            return self._shared(await self._inner.facts(ref, digest, creds))

        def decode(text: str) -> ImageFacts:
            return self._shared(_decode_facts(text))

        ttl = self._settings.digest_ttl_seconds
        fetched = self._fetched.get(key) is not None
        self._fetched.pop(key)
        return await self._cached("digest", key, ttl, fetch, _encode_facts, decode, fetched)

    async def forget_tag(self, ref: Reference, creds: CredentialChain) -> None:
        """Drop what the tag was said to point at (its digest's body failed verification)."""
        key = self._tag_key(ref, creds)
        await self._store.delete("tag", key)
        await self._store.delete("known", key)

    def _tag_key(self, ref: Reference, creds: CredentialChain) -> str:
        return self._store.key("tag", creds.identity, f"{ref.name}:{ref.tag}")

    def _digest_key(self, ref: Reference, digest: str, creds: CredentialChain) -> str:
        return self._store.key("digest", creds.identity, f"{ref.name}@{digest}")

    @property
    def _known_ttl(self) -> int:
        """How long a tag's last good digest is kept: its TTL, then the stale-if-error time
        (without one, `_REVALIDATE_SECONDS`: it then only says the tag is worth a HEAD)."""
        stale = self._settings.stale_if_error_seconds
        return self._settings.tag_ttl_seconds + (stale or _REVALIDATE_SECONDS)

    async def _cached(
        self,
        kind: Kind,
        key: str,
        ttl: int,
        fetch: Callable[[], Awaitable[T]],
        encode: Callable[[T], str],
        decode: Callable[[str], T],
        fetched: bool = False,
        wait: Callable[[Awaitable[T]], Awaitable[T]] | None = None,
    ) -> T:
        """The value from the store, else a remembered failure raised, else a shared fetch,
        awaited through `wait` if given. A value `fetched` for this lookup counts as a miss."""
        hit = await self._store.get(kind, key, decode, ttl)
        if hit is not None:
            if fetched:
                note_registry_asked()
            self._count(kind, "miss" if fetched else "hit")
            return hit
        if cached_only.get():
            raise errors.NotCached(f"no {kind} cached")
        failure_ttl = self._settings.failure_ttl_seconds
        if not skip_remembered_failures.get():
            failure = await self._store.get("failure", key, _decode_failure, failure_ttl)
            if failure is not None:
                self._count(kind, "failure")
                raise failure.error()
        self._count(kind, "miss")
        note_registry_asked()
        remember = lambda: self._remember_failure(kind, key, fetch)  # noqa: E731
        load = self._store.load(kind, key, remember, encode, ttl)
        return await (load if wait is None else wait(load))

    async def _until_deadline(self, ref: Reference, key: str, load: Awaitable[str]) -> str:
        """The tag's fetch; but if the tag has a last good digest to answer with instead, a
        Timeout when most of the request's time is gone (the fetch goes on, to fill the cache).

        A registry slower than the request's deadline is, for that request, one that failed.
        """
        left = request_seconds_left()
        if left is None or not self._settings.stale_if_error_seconds:
            return await load
        if await self._store.get("known", key, str, self._known_ttl) is None:
            return await load
        task = asyncio.ensure_future(load)
        done, _ = await asyncio.wait({task}, timeout=max(left * _TAG_SHARE, 0.0))
        if task in done:
            return task.result()
        task.add_done_callback(_retrieve)
        raise errors.Timeout(f"{ref.domain}: no answer for the tag within the request's deadline")

    async def _remember_failure(self, kind: Kind, key: str, fetch: Callable[[], Awaitable[T]]) -> T:
        try:
            return await fetch()
        except errors.RegistryError as error:
            if kind == "tag" and isinstance(error, errors.DigestMismatch):
                # The tag's body did not hash to the digest named with it: that answer is as
                # suspect as the body, so the next lookup asks again (as `forget_tag`).
                raise
            failure_ttl = self._settings.failure_ttl_seconds
            record = Failure.of(error)
            await self._store.set("failure", key, record, _encode_failure, failure_ttl)
            raise

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


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a fetch nobody waits for any more as seen, so asyncio does not log its error."""
    if not task.cancelled():
        task.exception()


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
