"""Learned evidence (extender.resolution.evidence_book) through a real redis-server: a restart and
a second replica keep it, a clear reaches every replica, and the resolver believes it over the
index."""

from __future__ import annotations

import dataclasses
import time

from extender.config.registry_settings import CacheSettings
from extender.core.mismatch import Evidence
from extender.core.platforms import normalize
from extender.core.pods import PullSecretsRef
from extender.resolution.evidence_book import EvidenceBook
from extender.resolution.learned_resolver import LearnedResolver
from tests.support.clock import FakeClock
from tests.support.fakes import AnsweringRegistry

DIGEST = "sha256:" + "cd" * 32
ARM64 = normalize("linux", "arm64")
AMD64 = normalize("linux", "amd64")
CLAIMED = frozenset({AMD64, normalize("linux", "arm64", "v8")})
"""What the index claims for DIGEST: amd64 and arm64."""


def _evidence(now: float, ttl: float = 3600) -> Evidence:
    """A cluster-wide entry (corroborated), with where it came from."""
    return Evidence(
        DIGEST,
        ARM64,
        "127.0.0.1:5000/lies:1",
        "start",
        now,
        now + ttl,
        namespace="shop",
        workload="ReplicaSet/web-5d9c",
        pod="web-5d9c-x1",
        said="exec format error",
        corroboration="the index's linux/arm64 entry is a linux/amd64 image, per its config",
    )


async def test_a_restart_and_a_second_replica_keep_what_one_replica_learned(redis_url: str) -> None:
    """Learned on one book, it is known to a new book (a restart) and to another replica's."""
    cache = CacheSettings(url=redis_url)
    first, second = EvidenceBook(cache), EvidenceBook(cache)
    try:
        learned = _evidence(time.time())
        assert learned == await first.learn(learned)
        await first.aclose()
        restarted = EvidenceBook(cache)
        await restarted.sync()
        await second.sync()
        assert (frozenset({ARM64}), frozenset({ARM64})) == (
            restarted.failing(DIGEST),
            second.failing(DIGEST),
        )
        assert [learned] == restarted.entries()  # with its origin and corroboration
        await restarted.aclose()
    finally:
        await second.aclose()


async def test_a_clear_reaches_every_replica_at_its_next_sync(redis_url: str) -> None:
    """`archfit evidence clear` on one book empties the others once they read Redis again."""
    cache = CacheSettings(url=redis_url)
    one, other = EvidenceBook(cache), EvidenceBook(cache)
    try:
        await one.learn(_evidence(time.time()))
        await other.sync()
        cleared = await one.clear()
        await other.sync()
        assert (1, frozenset()) == (cleared, other.failing(DIGEST))
    finally:
        await one.aclose()
        await other.aclose()


async def test_evidence_expires() -> None:
    """Past its expiry an entry no longer counts, even before any sync."""
    clock = FakeClock(5000.0)
    book = EvidenceBook(CacheSettings(), wall=clock)
    await book.learn(_evidence(5000.0, ttl=60))
    before = book.failing(DIGEST)
    clock.advance(61)
    assert (frozenset({ARM64}), frozenset()) == (before, book.failing(DIGEST))


async def test_the_resolver_believes_learned_evidence_over_the_index() -> None:
    """A digest seen failing on arm64 resolves to amd64 only, however the index claims arm64."""
    clock = FakeClock(5000.0)
    book = EvidenceBook(CacheSettings(), wall=clock)
    resolver = LearnedResolver(AnsweringRegistry({}, default=(DIGEST, CLAIMED)), book)
    pull = PullSecretsRef("default")
    claimed = await resolver.platforms("127.0.0.1:5000/lies:1", pull)
    await book.learn(_evidence(5000.0))
    learned = await resolver.platforms("127.0.0.1:5000/lies:1", pull)
    assert (2, frozenset({AMD64})) == (len(claimed), learned)
    assert dataclasses.is_dataclass(await resolver.resolve("127.0.0.1:5000/lies:1"))
