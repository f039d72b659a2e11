"""An audit's registry work: one lookup per distinct image, within the registries' pull
limits, then the newer tags of the images that block arm64.

One lookup per registry host goes first: its answer carries the host's pull limit (Docker
Hub's `ratelimit-remaining`), so a run that would use it up says so before the rest start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from extender.audit import hints
from extender.audit.budget import PullBudget, Remaining, shortfalls, warning
from extender.audit.distinct_images import BoundedResolution, Pair
from extender.audit.pure.newer_tags import TagHint
from extender.audit.pure.options import AuditOptions
from extender.audit.pure.report import Disagreement, Lookups, same_image
from extender.config.settings import Settings
from extender.core.platforms import LINUX_ARM64, Platform, Unknown, any_accepts
from extender.core.pods import PullSecretsRef
from extender.metrics import Metrics, total_of
from extender.registry.client import TagList
from extender.registry.errors import RegistryError
from extender.registry.pure.reference import parse
from extender.registry.resolver import RegistryResolver
from extender.resolution.within_deadline import PlatformResolver


@dataclass(frozen=True, slots=True)
class RegistryAnswers:
    """What the registries answered."""

    lookups: Lookups
    hints: dict[str, TagHint] = field(default_factory=dict)
    """Newer-tag hints per blocking image (`report.same_image`)."""
    disagreements: tuple[Disagreement, ...] | None = None
    """With `--verify`, the index entries their configs contradict (CheckedIndexes)."""


async def resolve(
    resolver: PlatformResolver,
    pairs: Sequence[Pair],
    *,
    per_host: int,
    remaining: Remaining,
    say: Callable[[str], None],
    advance: Callable[[], None] = lambda: None,
    lister: hints.TagLister | None = None,
    newer_tags: int = 0,
    loose: bool = False,
) -> RegistryAnswers:
    """Look every pair up (probes first), then hint at newer tags of arm64 blockers when a
    `lister` is given and `newer_tags` > 0."""
    budget = PullBudget(remaining)
    resolution = BoundedResolution(resolver, per_host, budget, advance)
    probes: dict[str, Pair] = {}
    for pair in pairs:
        host = _api_host(pair[0])
        if host is not None:
            probes.setdefault(host, pair)
    lookups = dict(await resolution.all(probes.values()))
    rest = [pair for pair in pairs if pair not in lookups]
    looked = {same_image(image) for image, _ in lookups}
    needed: dict[str, set[str]] = {}
    for image, _ in rest:
        host = _api_host(image)
        if host is not None and same_image(image) not in looked:
            needed.setdefault(host, set()).add(same_image(image))
    counts = {host: len(images) for host, images in needed.items()}
    for host, (count, left) in sorted(shortfalls(counts, remaining).items()):
        say(warning(host, count, left))
    lookups.update(await resolution.all(rest))
    if lister is None or newer_tags <= 0:
        return RegistryAnswers(lookups)
    blocking = blocking_images(lookups, loose=loose)
    found = await hints.hints(
        lister, resolution.one, blocking, pairs, limit=newer_tags, loose=loose
    )
    return RegistryAnswers(lookups, found)


def blocking_images(lookups: Lookups, *, loose: bool = False) -> list[str]:
    """Images (one spelling each) whose platforms are known and lack linux/arm64."""
    found: dict[str, str] = {}
    for (image, _), outcome in lookups.items():
        if not isinstance(outcome, Unknown) and not any_accepts(LINUX_ARM64, outcome, loose=loose):
            found.setdefault(same_image(image), image)
    return list(found.values())


def metric_remaining(metrics: Metrics) -> Remaining:
    """Pulls left per API host, as the transport recorded them in `metrics`."""

    def remaining(host: str) -> int | None:
        value = metrics.registry.get_sample_value(
            "archfit_registry_ratelimit_remaining", {"host": host}
        )
        return None if value is None else int(value)

    return remaining


def registry_requests(metrics: Metrics) -> int:
    """Requests sent to registries so far (`archfit_registry_requests_total`)."""
    return total_of(metrics.registry_requests)


def _api_host(image: str) -> str | None:
    try:
        return parse(image).api_host
    except RegistryError:
        return None


class CheckedIndexes:
    """A PlatformResolver that checks each index against its configs (`audit --verify`,
    extender.registry.verify): it answers the platforms the configs name, and keeps every
    disagreement for the report."""

    def __init__(self, resolver: RegistryResolver) -> None:
        self._resolver = resolver
        self._found: dict[tuple[str, str], Disagreement] = {}

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        resolution, verification = await self._resolver.verify(image, pull)
        for check in verification.disagreements:
            key = (same_image(image), check.digest)
            self._found.setdefault(key, Disagreement(image, check.digest, check.problem))
        return verification.believed(resolution.platforms)

    async def tags(
        self, image: str, pull: PullSecretsRef | None, *, page_size: int, pages: int
    ) -> TagList:
        return await self._resolver.tags(image, pull, page_size=page_size, pages=pages)

    @property
    def disagreements(self) -> tuple[Disagreement, ...]:
        """Each contradicted entry once, by image and entry digest."""
        return tuple(sorted(self._found.values(), key=lambda d: (d.image, d.digest)))


async def resolve_with(
    resolver: PlatformResolver,
    metrics: Metrics,
    settings: Settings,
    pairs: Sequence[Pair],
    advance: Callable[[], None],
    options: AuditOptions,
    err: TextIO,
) -> RegistryAnswers:
    """The audit's registry work (`resolve`) with `resolver`, whose transport records
    registries' pull limits in `metrics`; with `--verify`, through CheckedIndexes."""
    registry = resolver if isinstance(resolver, RegistryResolver) else None
    checked = CheckedIndexes(registry) if options.verify and registry is not None else None
    found = await resolve(
        checked or resolver,
        pairs,
        per_host=settings.registry.max_connections_per_host,
        remaining=metric_remaining(metrics),
        say=lambda line: print(f"archfit: {line}", file=err, flush=True),
        advance=advance,
        lister=checked or registry,
        newer_tags=options.newer_tags,
        loose=settings.policy.loose_matching,
    )
    if checked is None:
        return found
    return dataclasses.replace(found, disagreements=checked.disagreements)
