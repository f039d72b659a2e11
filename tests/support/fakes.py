"""Stand-ins for archfit's own Protocols, for unit tests of what drives them (the watcher's
API calls): each records what it was asked and answers from what the test gave it."""

from __future__ import annotations

from extender.kube.pod_watch import WatchedPod


class RecordingPodCalls:
    """extender.controllers.watcher.Calls: previous logs from `logs`, every call recorded."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, str], str] = {}
        """(pod uid, container) → what its previous run printed."""
        self.log_reads: list[tuple[str, str, int]] = []
        """(pod uid, container, restart count of the pod as the read saw it), in order."""
        self.events: list[tuple[str, tuple[str, str, str], str, str]] = []
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
