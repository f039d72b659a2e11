"""Learned evidence, "digest D does not run on platform P", as every replica keeps it: the book
in memory, kept in step with the shared store (docs/operations.md, "Learned evidence").

The mismatch watcher learns it from a container that failed with exec format error, for
that pod's own workload; it counts for every namespace only when something no tenant can
forge corroborates it (EvidenceBook). Every replica keeps all of it in memory (a handful of
entries: a lookup is a dict read) and, with a Redis URL (`cache.url`), shares it through one
Redis hash (extender.resolution.redis_evidence), else through a ConfigMap
(extender.kube.evidence_store), read again every `watcher.evidenceSyncSeconds`; so a restart or
a second replica keeps what was learned, and `archfit evidence clear` reaches every replica.
Each entry expires (`watcher.evidenceTtlSeconds`). The resolver that believes it over the index
is extender.resolution.learned_resolver.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import orjson
import structlog

from extender.config.registry_settings import CacheSettings
from extender.core.mismatch import Evidence
from extender.core.platforms import Platform
from extender.core.platforms import parse as parse_platform
from extender.resolution.redis_evidence import RedisEvidence

if TYPE_CHECKING:
    from extender.metrics import Metrics

log = structlog.get_logger("archfit.evidence")

NO_PLATFORMS: frozenset[Platform] = frozenset()
"""What a digest is known not to run on when nothing is known."""

MAX_ENTRIES = 500
"""Entries kept at most, the most recently learned: far more than a cluster's failing images,
and at about 1.5 KiB an entry at the most, within a ConfigMap's 1 MiB."""


class SharedEvidence(Protocol):
    """Where the replicas and the CLI share evidence: entries by key, as encoded text."""

    async def read(self) -> dict[str, str] | None:
        """Every entry; None when the store did not answer."""
        ...

    async def write(self, entries: dict[str, str]) -> bool:
        """Add or replace these entries; False when the store did not take them."""
        ...

    async def delete(self, keys: list[str]) -> None: ...

    async def aclose(self) -> None: ...


def _field(key: str) -> str:
    """An entry's name in the shared store: its key's hash, a valid Redis field and
    ConfigMap key alike (a key holds `:`, `/` and `|`)."""
    return "e-" + hashlib.sha256(key.encode()).hexdigest()[:40]


class EvidenceBook:
    """Evidence in memory, and in the Redis hash `<cache.namespace>:evidence` if configured.

    A workload entry counts for its own workload only; it becomes cluster-wide when
    corroborated: its index's config says another architecture (the watcher checks), the
    same digest failed the same way, with a provenance no pod chose, in
    `corroborating_namespaces` namespaces, or an operator confirms it (`confirm`).
    """

    def __init__(
        self,
        cache: CacheSettings,
        metrics: Metrics | None = None,
        *,
        corroborating_namespaces: int = 3,
        store: SharedEvidence | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._wall = wall
        self._metrics = metrics
        self._corroborating = corroborating_namespaces
        self._entries: dict[str, Evidence] = {}
        self._cluster: dict[str, dict[Platform, Evidence]] = {}
        """digest → platform → its cluster-wide entry."""
        self._workloads: dict[tuple[str, str], dict[str, dict[Platform, Evidence]]] = {}
        """(namespace, workload) → digest → platform → its workload entry."""
        self._unsaved: set[str] = set()
        """Keys learned here that Redis has not taken yet: written again at the next sync."""
        self.version = 0
        """Moves whenever what the book believes changes (an expiry aside)."""
        self.on_change: Callable[[], None] | None = None
        """Told when what the book believes changes (Resolution forgets its recent answers,
        so what was learned counts from the next request on)."""
        self._store = store
        if store is None and cache.is_redis:
            self._store = RedisEvidence(cache, metrics)

    @property
    def shared(self) -> bool:
        """Whether the evidence is shared (Redis or a ConfigMap), so the CLI and every replica
        see it."""
        return self._store is not None

    def failing(self, digest: str) -> frozenset[Platform]:
        """The platforms `digest` is known, cluster-wide, not to run on now (a dict read: hot
        path)."""
        found = self._cluster.get(digest)
        if not found:
            return NO_PLATFORMS
        return self._unexpired(found)

    def failing_for(self, namespace: str, workload: str) -> dict[str, frozenset[Platform]] | None:
        """digest → the platforms it is known not to run on for this workload alone; None
        when nothing is known for it (a dict read: hot path)."""
        found = self._workloads.get((namespace, workload))
        if not found:
            return None
        return {digest: self._unexpired(platforms) for digest, platforms in found.items()}

    def workloads(self) -> list[tuple[str, str]]:
        """(namespace, workload) of every workload with evidence of its own."""
        return list(self._workloads)

    def covering(self, evidence: Evidence) -> Evidence:
        """The widest entry held that says what `evidence` says: the cluster-wide one of its
        digest and platform, else `evidence`'s own."""
        wide = self._cluster.get(evidence.digest, {}).get(evidence.platform)
        return wide if wide is not None and wide.expires > self._wall() else evidence

    def entries(self) -> list[Evidence]:
        """Every unexpired entry, oldest first."""
        now = self._wall()
        return sorted((e for e in self._entries.values() if e.expires > now), key=_learned)

    async def learn(self, evidence: Evidence) -> Evidence | None:
        """Keep `evidence`, and a cluster-wide entry when it is corroborated or its namespace
        is the last of enough that saw the same; returns the widest entry it added, or None
        when everything it says was known already (unexpired)."""
        added = self._add(evidence)
        if evidence.scope == "workload" and not evidence.provenance:
            alike = self._alike_namespaces(evidence)
            if len(alike) >= self._corroborating:
                named = ", ".join(sorted(alike)[:3]) + (", …" if len(alike) > 3 else "")
                widened = dataclasses.replace(
                    evidence,
                    corroboration=f"failed alike in {len(alike)} namespaces: {named}",
                )
                added = self._add(widened) or added
        if added is not None:
            await self._save()
        return added

    async def confirm(self, digest: str, platform: Platform | None = None) -> int:
        """An operator's word: the workload entries of `digest` (on `platform`, or every one)
        count cluster-wide; returns how many cluster-wide entries were added."""
        await self.sync()
        now = self._wall()
        confirmed = 0
        for entry in list(self._entries.values()):
            if entry.digest != digest or entry.expires <= now or entry.scope == "cluster":
                continue
            if platform is not None and entry.platform != platform:
                continue
            widened = dataclasses.replace(entry, corroboration="confirmed by an operator")
            confirmed += self._add(widened) is not None
        await self._save()
        return confirmed

    async def sync(self) -> bool:
        """Read the shared hash again (and write what it lacks); False when Redis failed."""
        if self._store is None:
            return True
        await self._save()
        found = await self._store.read()
        if found is None:
            return False
        now = self._wall()
        entries: dict[str, Evidence] = {}
        expired: list[str] = []
        for field, value in found.items():
            evidence = _decode(value)
            if evidence is None or evidence.expires <= now:
                expired.append(field)
                continue
            entries[evidence.key] = evidence
        for key in self._unsaved:
            if key in self._entries:
                entries[key] = self._entries[key]
        for evidence in _beyond_bound(entries):
            del entries[evidence.key]
            expired.append(_field(evidence.key))
        self._replace(entries)
        if expired:
            await self._store.delete(expired)
        return True

    async def clear(self, digest: str = "") -> int:
        """Forget every entry, or those of `digest`; returns how many."""
        await self.sync()
        gone = [e for e in self._entries.values() if not digest or e.digest == digest]
        self._replace({k: e for k, e in self._entries.items() if e not in gone})
        self._unsaved.difference_update(e.key for e in gone)
        if gone and self._store is not None:
            await self._store.delete([_field(e.key) for e in gone])
        return len(gone)

    async def run(self, every_seconds: float) -> None:
        """Keep in step with the other replicas until cancelled."""
        while True:
            await self.sync()
            await asyncio.sleep(every_seconds)

    async def aclose(self) -> None:
        if self._store is not None:
            await self._store.aclose()

    def _add(self, evidence: Evidence) -> Evidence | None:
        known = self._entries.get(evidence.key)
        if known is not None and known.expires > self._wall():
            return None
        entries = {**self._entries, evidence.key: evidence}
        for oldest in _beyond_bound(entries):
            del entries[oldest.key]
        self._replace(entries)
        self._unsaved.add(evidence.key)
        return evidence

    def _alike_namespaces(self, evidence: Evidence) -> set[str]:
        """The namespaces with a workload entry of the same digest, platform and reason, from
        a finding no pod chose."""
        now = self._wall()
        return {
            e.namespace
            for e in self._entries.values()
            if e.scope == "workload"
            and not e.provenance
            and e.expires > now
            and (e.digest, e.platform, e.reason)
            == (evidence.digest, evidence.platform, evidence.reason)
        }

    def _unexpired(self, found: dict[Platform, Evidence]) -> frozenset[Platform]:
        now = self._wall()
        return frozenset(p for p, e in found.items() if e.expires > now)

    async def _save(self) -> None:
        if self._store is None or not self._unsaved:
            return
        pending = {k: self._entries[k] for k in self._unsaved if k in self._entries}
        mapping = {_field(k): _encode(e) for k, e in pending.items()}
        if not mapping:
            self._unsaved.clear()
            return
        if await self._store.write(mapping):
            self._unsaved.difference_update(pending)

    def _replace(self, entries: dict[str, Evidence]) -> None:
        cluster: dict[str, dict[Platform, Evidence]] = {}
        workloads: dict[tuple[str, str], dict[str, dict[Platform, Evidence]]] = {}
        for evidence in entries.values():
            if evidence.scope == "cluster":
                cluster.setdefault(evidence.digest, {})[evidence.platform] = evidence
            else:
                scope = workloads.setdefault((evidence.namespace, evidence.workload), {})
                scope.setdefault(evidence.digest, {})[evidence.platform] = evidence
        changed = entries != self._entries
        # swaps: readers see old or new
        self._entries, self._cluster, self._workloads = entries, cluster, workloads
        self.version += changed
        if changed and self.on_change is not None:
            self.on_change()
        if self._metrics is not None:
            self._metrics.evidence_entries.set(len(entries))


def _learned(evidence: Evidence) -> float:
    return evidence.learned


def _beyond_bound(entries: dict[str, Evidence]) -> list[Evidence]:
    """The entries past MAX_ENTRIES, least recently learned first."""
    if len(entries) <= MAX_ENTRIES:
        return []
    return sorted(entries.values(), key=_learned)[: len(entries) - MAX_ENTRIES]


_FIELDS = {
    "d": "digest",
    "i": "image",
    "l": "learned",
    "e": "expires",
    "n": "namespace",
    "w": "workload",
    "o": "pod",
    "s": "said",
    "v": "provenance",
    "c": "corroboration",
}
"""Short field name in the shared hash → Evidence attribute (besides "p" and "r")."""


def _encode(evidence: Evidence) -> str:
    document: dict[str, object] = {k: getattr(evidence, a) for k, a in _FIELDS.items()}
    document |= {"p": str(evidence.platform), "r": evidence.reason, "version": 2}
    return orjson.dumps(document).decode()


def _decode(raw: object) -> Evidence | None:
    """An entry from its text, or None (damaged, or written before evidence had a scope:
    such an entry came from a finding nothing corroborated, so it is dropped)."""
    try:
        document = orjson.loads(raw if isinstance(raw, bytes | str) else b"")
        reason = str(document["r"])
        if reason not in ("pull", "start", "run") or document.get("version") != 2:
            return None
        texts = {a: str(document[k]) for k, a in _FIELDS.items() if k not in ("l", "e")}
        return Evidence(
            platform=parse_platform(str(document["p"])),
            reason=reason,  # type: ignore[arg-type]  # checked above
            learned=float(document["l"]),
            expires=float(document["e"]),
            **texts,
        )
    except (ValueError, KeyError, TypeError):
        return None


@asynccontextmanager
async def evidence_book(
    cache: CacheSettings,
    sync_seconds: float,
    metrics: Metrics | None = None,
    *,
    corroborating_namespaces: int = 3,
    store: SharedEvidence | None = None,
) -> AsyncIterator[EvidenceBook]:
    """A book kept in step with Redis, else `store`, in the background while the context is
    open."""
    book = EvidenceBook(
        cache, metrics, corroborating_namespaces=corroborating_namespaces, store=store
    )
    syncing = asyncio.create_task(book.run(sync_seconds), name="archfit-evidence-sync")
    try:
        yield book
    finally:
        syncing.cancel()
        await asyncio.gather(syncing, return_exceptions=True)
        await book.aclose()
