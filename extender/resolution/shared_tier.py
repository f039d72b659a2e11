"""The published table as a cache tier every replica reads: what the leader resolved, any
replica answers at once (docs/webhook.md, "When archfit is down").

Tiers, in order: the recent answers (extender.resolution.within_deadline), this replica's cache
(memory, then Redis), the shared table (the ImagePlatforms object, watched), the registry. An
image the table lists is first asked of the cache alone (`cached_only`); only where the cache
has nothing does the table answer, with the exact platform set the leader published (never
the projection its bits are). An image it does not list goes to the registry, and the lookup
is answered by whichever comes first: the registry, or the table learning the image.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

from extender.core.parameter import EMPTY_TABLE, PublishedTable, table_key, workload_key
from extender.core.platforms import Platform, Resolved
from extender.core.pods import PullSecretsRef
from extender.registry.deadline import cached_only
from extender.registry.errors import NotCached
from extender.resolution.within_deadline import PlatformResolver, WorkloadEvidence


class DigestMemory(WorkloadEvidence, Protocol):
    """What the tier needs of the learned resolver beside its narrowing
    (extender.resolution.learned_resolver.LearnedResolver)."""

    def digest_of(self, image: str, pull: PullSecretsRef) -> str | None: ...


class SharedTier:
    """A PlatformResolver over `inner` (the learned resolver: cache, then registry) that
    answers from the published table where the cache has nothing, and narrows answers by
    workload evidence as the table publishes it where this replica does not know the digest."""

    def __init__(
        self,
        inner: PlatformResolver,
        evidence: DigestMemory | None = None,
        on_answer: Callable[[str], None] | None = None,
    ) -> None:
        self._inner = inner
        self._evidence = evidence
        self._table = EMPTY_TABLE
        self._waiting: dict[str, list[asyncio.Future[frozenset[Platform]]]] = {}
        self._watched = False
        """Whether the object was ever read: until then (or on a cluster without it) every
        lookup goes to the cache and the registry as without this tier."""
        self._on_answer = on_answer
        """Told where each lookup was answered: cache, table, table_late (the table learned
        it while the registry was asked), registry (a metric)."""

    @property
    def table(self) -> PublishedTable:
        return self._table

    def update(self, table: PublishedTable) -> None:
        """The object as published now; lookups waiting on a key it lists are answered."""
        self._table = table
        self._watched = True
        if not self._waiting:
            return
        for key in [key for key in self._waiting if key in table.images]:
            found = table.platforms_of(key)
            if found is None:
                continue
            for waiter in self._waiting.pop(key):
                if not waiter.done():
                    waiter.set_result(found)

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        if not self._watched:
            return await self._inner.platforms(image, pull)
        key = table_key(image)
        listed = self._table.platforms_of(key)
        if listed is not None:
            token = cached_only.set(True)
            try:
                found = await self._inner.platforms(image, pull)
            except NotCached:
                self._tell("table")
                return listed
            finally:
                cached_only.reset(token)
            self._tell("cache")
            return found
        return await self._first_of_registry_and_table(key, image, pull)

    async def _first_of_registry_and_table(
        self, key: str, image: str, pull: PullSecretsRef
    ) -> frozenset[Platform]:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[frozenset[Platform]] = loop.create_future()
        self._waiting.setdefault(key, []).append(waiter)
        lookup = asyncio.ensure_future(self._inner.platforms(image, pull))
        try:
            await asyncio.wait((lookup, waiter), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            lookup.cancel()  # the request stopped waiting: so does its lookup (not the cache's)
            raise
        finally:
            waiters = self._waiting.get(key)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiting[key]
            if not waiter.done():
                waiter.cancel()
        if lookup.done():
            self._tell("registry")
            return lookup.result()
        # The registry's fetch goes on in the cache (a shared load outlives its callers).
        lookup.cancel()
        self._tell("table_late")
        return waiter.result()

    def narrow(
        self, resolved: Mapping[str, Resolved], pull: PullSecretsRef, namespace: str, workload: str
    ) -> Mapping[str, Resolved]:
        """The learned resolver's narrowing; then, for each image whose digest this replica
        does not know (the table answered it), the set the table publishes for this
        workload."""
        narrowed = (
            resolved
            if self._evidence is None
            else self._evidence.narrow(resolved, pull, namespace, workload)
        )
        name = workload_key(namespace, workload)
        entries = self._table.workloads.get(name)
        if not entries or {table_key(image) for image in resolved} != entries.keys():
            return narrowed  # judged with other images: as the policy, not applied
        out: dict[str, Resolved] | None = None
        for image, found in narrowed.items():
            if not isinstance(found, frozenset):
                continue
            if self._evidence is not None and self._evidence.digest_of(image, pull) is not None:
                continue
            published = self._table.workload_platforms(name, table_key(image))
            if published is not None and published != found:
                out = dict(narrowed) if out is None else out
                out[image] = published
        return narrowed if out is None else out

    def _tell(self, where: str) -> None:
        if self._on_answer is not None:
            self._on_answer(where)
