"""The resolver that believes learned evidence over the index: a platform a digest was seen
failing on is not among its platforms, whatever the index claims (docs/operations.md, "Learned
evidence"). It wraps the registry's resolver and keeps its Protocol; the evidence is the
book's (extender.resolution.evidence_book)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from extender.core.mismatch import without_failing
from extender.core.node_facts import NodeFacts
from extender.core.platforms import Platform, Resolved, any_accepts
from extender.core.pods import PullSecretsRef
from extender.once import OncePerCause
from extender.resolution.evidence_book import NO_PLATFORMS, EvidenceBook
from extender.ttlmap import TTLMap

if TYPE_CHECKING:
    from extender.metrics import Metrics
    from extender.registry.resolver import ImageResolution
    from extender.registry.verify import Verification

log = structlog.get_logger("archfit.evidence")


class DigestResolver(Protocol):
    """What LearnedResolver needs of the resolver it wraps (registry.resolver.RegistryResolver)."""

    async def resolve(self, image: str, pull: PullSecretsRef | None = None) -> ImageResolution: ...

    async def verify(
        self, image: str, pull: PullSecretsRef | None = None
    ) -> tuple[ImageResolution, Verification]: ...

    async def aclose(self) -> None: ...


Runnable = Callable[[Sequence[frozenset[Platform]]], bool]
"""Whether some node known now runs a pod whose images run on these platforms (True when no
node is known: nothing to judge by)."""

_DIGEST_SECONDS = 3600.0
"""How long the digest an image resolved to is remembered for workload evidence: refreshed at
every lookup, so it follows a moved tag within the cache's tag TTL."""


class LearnedResolver:
    """A PlatformResolver that believes learned evidence over the index: a platform the
    digest was seen failing on is not among its platforms, whatever the index claims.

    Cluster-wide evidence narrows every lookup; workload evidence narrows only the answers
    of that workload's pods (`narrow`, which Resolution calls with the pod's workload).
    Evidence is never worse than knowing nothing: what would leave an image no platform,
    or a pod no node that runs it, is ignored, logged and counted.
    """

    def __init__(
        self,
        inner: DigestResolver,
        book: EvidenceBook,
        *,
        runnable: Runnable | None = None,
        metrics: Metrics | None = None,
        max_entries: int = 10_000,
    ) -> None:
        self._inner = inner
        self.book = book
        self._runnable = runnable
        self._metrics = metrics
        self._digests: TTLMap[tuple[str, PullSecretsRef | None], str] = TTLMap(max_entries)
        """(image, pull) → the digest it resolved to last: what workload evidence is keyed by."""
        self._once = OncePerCause()

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        return (await self.resolve(image, pull)).platforms

    async def resolve(self, image: str, pull: PullSecretsRef | None = None) -> ImageResolution:
        found = await self.registry_answer(image, pull)
        believed = self.believed(found.digest, found.platforms)
        if believed is found.platforms:
            return found
        return dataclasses.replace(found, platforms=believed)

    async def registry_answer(
        self, image: str, pull: PullSecretsRef | None = None
    ) -> ImageResolution:
        """What the registry (through the cache) answers, evidence not believed yet; the
        digest is remembered for the workload evidence of the pods that name the image."""
        found = await self._inner.resolve(image, pull)
        self._digests.put((image, pull), found.digest, _DIGEST_SECONDS)
        return found

    def believed(self, digest: str, platforms: frozenset[Platform]) -> frozenset[Platform]:
        """`platforms` less those `digest` is known, cluster-wide, not to run on (a dict read
        when nothing is known: hot path); `platforms` itself when nothing is believed."""
        failing = self.book.failing(digest)
        if not failing:
            return platforms
        narrowed = without_failing(platforms, failing)
        if not self._believable(digest, (narrowed,), failing):
            return platforms
        return narrowed

    def digest_of(self, image: str, pull: PullSecretsRef) -> str | None:
        """The digest `image` last resolved to with `pull` here, or None."""
        return self._digests.get((image, pull))

    def narrow(
        self, resolved: Mapping[str, Resolved], pull: PullSecretsRef, namespace: str, workload: str
    ) -> Mapping[str, Resolved]:
        """`resolved` with the evidence of this workload alone believed too (no I/O)."""
        digests = self._digests
        digest_of = lambda image: digests.get((image, pull))  # noqa: E731
        return self.narrow_by(resolved, digest_of, namespace, workload)

    def narrow_by(
        self,
        resolved: Mapping[str, Resolved],
        digest_of: Callable[[str], str | None],
        namespace: str,
        workload: str,
    ) -> Mapping[str, Resolved]:
        """`resolved` with the workload's evidence believed, each image's digest from
        `digest_of`: what the webhook believes for that workload's pods, and the publisher
        publishes for them."""
        failing_for = self.book.failing_for(namespace, workload)
        if not failing_for:
            return resolved
        narrowed = dict(resolved)
        failing_here: set[Platform] = set()
        digests: list[str] = []
        for image, found in resolved.items():
            digest = digest_of(image)
            failing = failing_for.get(digest, NO_PLATFORMS) if digest is not None else NO_PLATFORMS
            if failing and digest is not None and isinstance(found, frozenset):
                narrowed[image] = without_failing(found, failing)
                failing_here |= failing
                digests.append(digest)
        if not failing_here:
            return resolved
        sets = [found for found in narrowed.values() if isinstance(found, frozenset)]
        if not self._believable(", ".join(digests), sets, frozenset(failing_here)):
            return resolved
        return narrowed

    def _believable(
        self, digest: str, narrowed: Sequence[frozenset[Platform]], failing: frozenset[Platform]
    ) -> bool:
        """False (logged once a minute, counted) when believing the evidence would leave an
        image no platform, or the pod no node that runs it."""
        if all(narrowed):
            if self._runnable is None or self._runnable(narrowed):
                return True
            why = "no_node"
        else:
            why = "no_platform"
        if self._metrics is not None:
            self._metrics.evidence_ignored.labels(why).inc()
        if self._once.log_now(f"{why} {digest}") is not None:
            log.warning(
                "evidence_ignored",
                digest=digest,
                failing=sorted(map(str, failing)),
                why=(
                    "it would leave an image no platform"
                    if why == "no_platform"
                    else "it would leave the pod no node that runs it"
                ),
            )
        return False

    async def verify(
        self, image: str, pull: PullSecretsRef | None = None
    ) -> tuple[ImageResolution, Verification]:
        """The index's entries against their configs, as the registry has them (evidence
        does not enter: this is what corroborates it)."""
        return await self._inner.verify(image, pull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # tags(), aclose(): the wrapped resolver's


def runs_on_some_node(known: Callable[[], Iterable[NodeFacts]]) -> Runnable:
    """A Runnable over the nodes `known()` gives now (each node's platform and runtime rule)."""

    def runnable(images: Sequence[frozenset[Platform]]) -> bool:
        nodes = set(known())
        if not nodes:
            return True
        return any(
            all(any_accepts(platform, found, rule=rule, aarch32=aarch32) for found in images)
            for platform, rule, aarch32 in nodes
            if platform is not None
        )

    return runnable
