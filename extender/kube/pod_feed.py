"""One list-watch of pods for every reader in the process: the mismatch watcher (pods bound to
a node) and the admission policy's publisher (every pod).

Each used to run its own list-watch, so a replica leading both had kube-apiserver encode, and
read and decoded itself, every pod twice, in two threads contending for the GIL with the event
loop (bench/scale.py measures it). The feed lists with the narrowest field selector its
readers allow (pods bound to a node while only the watcher reads; every pod once the
publisher does), decodes each pod once into a WatchedPod, and tells each reader the
pods it asked for, as a field-selected watch of its own would: a bound-only reader is never
told of a pod no node has taken.

A reader joins when its controller starts leading and leaves when it stops. A reader that
joins needs a list, so the feed lists again once the joins settle: every reader is told
LISTING, every pod, then SYNCED, which is what a relist tells them.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from extender.kube.client.api import KubeApi
from extender.kube.pod_watch import BOUND, OnPod, PodListWatch, WatchedPod, pod_list_watch

_EVERY_POD = ""
_ALWAYS_TOLD = ("LISTING", "SYNCED")
JOIN_SETTLE_SECONDS = 0.5
"""How long the feed waits after a reader joins or leaves before it lists again: the readers'
Leases are taken (and lost, when kube-apiserver restarts) within moments of each other, and
one list serves them all."""


@dataclass(frozen=True, eq=False)
class Reader:
    """A reader of the feed (`join` returns it, `leave` takes it)."""

    on_pod: OnPod[WatchedPod]
    bound_only: bool


class PodFeed:
    """The shared list-watch of pods: `join` to be told pods, `leave` to stop (both in the
    event loop); `stop` ends it for every reader.

    A reader is told from the moment it joins; the list it needs follows within
    JOIN_SETTLE_SECONDS, as a LISTING, every pod and SYNCED that every reader is told. A reader
    that leaves is told nothing more, and the others keep the running watch: when the
    publisher leaves, the watcher goes on reading every pod (told only the bound ones) until a
    reader next joins, rather than listing again at once.
    """

    def __init__(
        self, api: KubeApi, page_size: int = 500, *, settle_seconds: float = JOIN_SETTLE_SECONDS
    ) -> None:
        self._api = api
        self._page_size = page_size
        self._settle = settle_seconds
        self._readers: list[Reader] = []
        self._watch: PodListWatch[WatchedPod] | None = None
        self._unlisted = False
        """A reader joined since the running list-watch last listed."""
        self._due = False
        self._reconciling: asyncio.Task[None] | None = None
        self.selector: str | None = None
        """The field selector of the list-watch running now (None: none runs)."""

    async def join(self, on_pod: OnPod[WatchedPod], *, bound_only: bool) -> Reader:
        """Tell `on_pod` pods from now on, then every pod of a new list (only those bound to a
        node when `bound_only`); returns the handle `leave` takes."""
        reader = Reader(on_pod, bound_only)
        self._readers.append(reader)
        self._unlisted = True
        self._schedule()
        return reader

    async def leave(self, reader: Reader) -> None:
        """Tell `reader` nothing more; the list-watch stops once no reader is left."""
        if reader in self._readers:
            self._readers.remove(reader)
            self._schedule()

    async def stop(self) -> None:
        self._readers.clear()
        if self._reconciling is not None:
            self._reconciling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconciling
        await self._apply()

    def _schedule(self) -> None:
        self._due = True
        if self._reconciling is None or self._reconciling.done():
            self._reconciling = asyncio.get_running_loop().create_task(self._reconcile())

    async def _reconcile(self) -> None:
        while self._due:
            await asyncio.sleep(self._settle)
            self._due = False
            await self._apply()

    async def _apply(self) -> None:
        """Start, restart or stop the list-watch for the readers there are now."""
        if not self._readers:
            await self._stop_watch()
            return
        selector = BOUND if all(r.bound_only for r in self._readers) else _EVERY_POD
        wider = self.selector == BOUND and selector == _EVERY_POD
        if self._watch is not None and not (self._unlisted or wider):
            return
        self._unlisted = False
        await self._stop_watch()
        watch = pod_list_watch(self._api, selector, self._page_size)
        watch.start(self._tell)
        self._watch, self.selector = watch, selector

    async def _stop_watch(self) -> None:
        if self._watch is not None:
            watch, self._watch = self._watch, None
            try:
                await watch.stop()
            finally:  # None once its thread asks nothing more
                self.selector = None

    def _tell(self, kind: str, pod: WatchedPod) -> None:
        """Each pod to each reader that asked for it (in the event loop)."""
        bound = bool(pod.spec.node_name) or kind in _ALWAYS_TOLD
        for reader in tuple(self._readers):
            if bound or not reader.bound_only:
                reader.on_pod(kind, pod)
