"""Stand-ins for archfit's own Protocols, for unit tests of what drives them (as
`structlog.testing` is for structlog): each subclasses the Protocol it stands for (mypy checks
this module as strictly as the package), records what it was asked and answers from what the
test gave it. Fakes live here and nowhere else: not in the package, not in a test module."""

from __future__ import annotations

import asyncio
import copy
from typing import TYPE_CHECKING, Any

from extender.controllers.watcher import Calls
from extender.kube.lease import LeaseRecords, LostRace, Spec

if TYPE_CHECKING:
    from extender.kube.pod_watch import WatchedPod


class RecordingPodCalls(Calls):
    """The watcher's API calls (controllers.watcher.Calls): previous logs from `logs`, every
    call recorded, every eviction granted."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, str], str] = {}
        """(pod uid, container) → what its previous run printed."""
        self.log_reads: list[tuple[str, str, int]] = []
        """(pod uid, container, restart count of the pod as the read saw it), in order."""
        self.events: list[tuple[str, tuple[str, str, str], str, str]] = []
        """(namespace, (apiVersion, kind, name), reason, message), in order."""
        self.evicted: list[WatchedPod] = []

    async def previous_log(self, pod: WatchedPod, container: str, limit_bytes: int) -> str:
        restarts = next((s.restart_count for s in pod.states() if s.name == container), 0)
        self.log_reads.append((pod.uid, container, restarts))
        return self.logs.get((pod.uid, container), "")

    async def controller(self, namespace: str, kind: str, name: str) -> tuple[str, str, str]:
        return "apps/v1", kind, name

    async def event(
        self, namespace: str, regarding: tuple[str, str, str], reason: str, message: str
    ) -> None:
        self.events.append((namespace, regarding, reason, message))

    async def evict(self, pod: WatchedPod) -> str:
        self.evicted.append(pod)
        return "evicted"


class MemoryLeases(LeaseRecords):
    """One Lease kept in memory as the apiserver keeps it (kube.lease.LeaseRecords): every
    write bumps its resourceVersion, and a create or write that another writer beat raises
    LostRace. Contenders sharing one MemoryLeases contend for one Lease; each call yields to
    the event loop first, as a call to the API would."""

    def __init__(self, name: str = "archfit-test") -> None:
        self.name = name
        self.lease: dict[str, Any] | None = None
        """The Lease object, None until someone creates it."""
        self.unreachable = False
        """While True, every call fails as an API that does not answer."""
        self.writes = 0
        """Creates and writes that succeeded."""

    @property
    def spec(self) -> Spec:
        """The Lease's spec as stored now ({} before it is created)."""
        return dict((self.lease or {}).get("spec") or {})

    async def read(self, timeout_seconds: float) -> dict[str, Any] | None:
        await self._reach()
        return copy.deepcopy(self.lease)

    async def create(self, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        await self._reach()
        if self.lease is not None:
            raise LostRace(f"lease {self.name} already exists")
        return self._store(spec)

    async def write(self, version: str, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        await self._reach()
        if self.lease is None:
            raise LookupError(f"lease {self.name} not found")
        if version != self.lease["metadata"]["resourceVersion"]:
            raise LostRace(f"lease {self.name} changed since version {version}")
        return self._store(spec)

    def overwrite(self, **spec: Any) -> None:
        """Another writer (kubectl, another archfit) sets these spec fields, as a patch would."""
        self._store({**self.spec, **spec})

    async def _reach(self) -> None:
        await asyncio.sleep(0)
        if self.unreachable:
            raise ConnectionError("the API server does not answer")

    def _store(self, spec: Spec) -> dict[str, Any]:
        self.writes += 1
        metadata = {"name": self.name, "resourceVersion": str(self.writes)}
        self.lease = {"metadata": metadata, "spec": dict(spec)}
        return copy.deepcopy(self.lease)
