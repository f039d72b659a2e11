"""Does an index tell the truth? Each entry's claimed platform against its image config.

`archfit inspect --verify` and `archfit audit --verify` ask this; `archfit serve` does not:
it costs a manifest GET per entry, which Docker Hub counts as a pull (docs/operations.md,
"Checking that an index tells the truth"). A check is kept for the life of the index's
digest (`cache.digestTtlSeconds`): a digest's content never changes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import orjson

from extender.core.platforms import Platform, normalize
from extender.registry.cache import Store
from extender.registry.manifests import Entry, Index, config_check, index_entries
from extender.registry.pure.credentials import CredentialChain
from extender.registry.pure.reference import Reference
from extender.registry.source import RegistrySource


@dataclass(frozen=True, slots=True)
class EntryCheck:
    """One index entry: what the index claims, what its config says, and the difference."""

    digest: str
    """The child manifest's digest."""
    claimed: Platform
    believed: Platform
    """The config's platform where it names one; else the claim."""
    problem: str
    """A plain sentence of the disagreement; empty when the config agrees."""


@dataclass(frozen=True, slots=True)
class Verification:
    """What checking an image's index found; no checks for a single manifest (its platform
    already comes from its config)."""

    checks: tuple[EntryCheck, ...] = ()

    @property
    def disagreements(self) -> tuple[EntryCheck, ...]:
        return tuple(check for check in self.checks if check.problem)

    def believed(self, claimed: frozenset[Platform]) -> frozenset[Platform]:
        """The image's platforms, believing each entry's config over the index."""
        return frozenset(c.believed for c in self.checks) if self.checks else claimed


class IndexVerifier:
    """Reads an index's entries, their manifests and configs; keeps each answer in the store."""

    def __init__(self, source: RegistrySource, store: Store) -> None:
        self._source = source
        self._store = store

    async def verify(self, ref: Reference, digest: str, creds: CredentialChain) -> Verification:
        """Check every runnable entry of the index under `digest` (concurrently).

        Raises a RegistryError when the index or an entry cannot be read: nothing is kept then.
        """
        key = self._store.key("verified", creds.identity, f"{ref.name}@{digest}")
        ttl = self._store.settings.digest_ttl_seconds
        hit = await self._store.get("digest", key, _decode, ttl)
        if hit is not None:
            return hit

        async def fetch() -> Verification:
            body, manifest = await self._source.manifest(ref, digest, creds)
            if not isinstance(manifest, Index):
                return Verification()
            entries = index_entries(body)
            checks = await asyncio.gather(*(self._check(ref, e, creds) for e in entries))
            return Verification(tuple(checks))

        return await self._store.load("digest", key, fetch, _encode, ttl)

    async def _check(self, ref: Reference, entry: Entry, creds: CredentialChain) -> EntryCheck:
        _, child = await self._source.manifest(ref, entry.digest, creds)
        if isinstance(child, Index) or not child.is_image:
            problem = f"index says {entry.platform}; the entry is not an image manifest"
            return EntryCheck(entry.digest, entry.platform, entry.platform, problem)
        config = await self._source.config(ref, child, creds)
        believed, problem = config_check(entry.platform, config)
        return EntryCheck(entry.digest, entry.platform, believed, problem)


def _encode(verification: Verification) -> str:
    return orjson.dumps(
        [[c.digest, list(c.claimed), list(c.believed), c.problem] for c in verification.checks]
    ).decode()


def _decode(text: str) -> Verification:
    return Verification(
        tuple(
            EntryCheck(str(d), normalize(*map(str, claimed)), normalize(*map(str, b)), str(p))
            for d, claimed, b, p in orjson.loads(text)
        )
    )
