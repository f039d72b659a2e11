"""Resolving every distinct (image, credentials) pair of a fleet once, concurrently.

Requests to one registry host are bounded so that queued requests wait here, before the
registry client's per-request timeout starts, not in its connection pool (where the wait
would count against that timeout and turn a slow registry into "unknown").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from extender.audit.budget import PullBudget
from extender.audit.pure.report import Lookups
from extender.audit.pure.workloads import Workload
from extender.core.platforms import Resolved, Unknown, describe_failure
from extender.core.pods import PullSecretsRef
from extender.registry.errors import RegistryError
from extender.registry.pure.reference import parse
from extender.resolution.within_deadline import PlatformResolver

Pair = tuple[str, PullSecretsRef]


def distinct_pairs(workloads: Iterable[Workload]) -> list[Pair]:
    """Each (image, credentials) pair once, in first-seen order.

    Workloads that share an image and credentials share its lookup; the resolver's cache
    keys by credential identity, so the same image under different secrets that resolve to
    the same (or no) credentials still costs one registry lookup.
    """
    pairs: dict[Pair, None] = {}
    for workload in workloads:
        for image in workload.images:
            pairs.setdefault((image, workload.pull), None)
    return list(pairs)


class BoundedResolution:
    """Resolves images, at most `per_host` at a time per registry host, within `budget`;
    never raises for an image's trouble: a failure becomes Unknown with its reason."""

    def __init__(
        self,
        resolver: PlatformResolver,
        per_host: int,
        budget: PullBudget | None = None,
        on_done: Callable[[], None] = lambda: None,
    ) -> None:
        self._resolver = resolver
        self._per_host = per_host
        self._budget = budget
        self._on_done = on_done
        self._gates: dict[str, asyncio.Semaphore] = {}

    async def one(self, image: str, pull: PullSecretsRef) -> Resolved:
        """The image's platforms, or Unknown with why."""
        try:
            ref = parse(image)
        except RegistryError as error:
            self._on_done()
            return Unknown(describe_failure(error))
        gate = self._gates.setdefault(ref.domain, asyncio.Semaphore(self._per_host))
        try:
            async with gate:
                if self._budget is None:
                    return await self._resolver.platforms(image, pull)
                with self._budget.spend(ref.api_host) as refused:
                    if refused is not None:
                        return Unknown(refused)
                    return await self._resolver.platforms(image, pull)
        except Exception as error:  # any failure means "cannot tell", never "unsupported"
            return Unknown(describe_failure(error))
        finally:
            self._on_done()

    async def all(self, pairs: Iterable[Pair]) -> Lookups:
        """Every pair's answer."""
        pairs = list(pairs)
        outcomes = await asyncio.gather(*(self.one(image, pull) for image, pull in pairs))
        return dict(zip(pairs, outcomes, strict=True))


async def resolve_pairs(
    resolver: PlatformResolver,
    pairs: Iterable[Pair],
    per_host: int,
    on_done: Callable[[], None] = lambda: None,
) -> Lookups:
    """Resolve every pair, at most `per_host` at a time per registry host (BoundedResolution)."""
    return await BoundedResolution(resolver, per_host, on_done=on_done).all(pairs)
