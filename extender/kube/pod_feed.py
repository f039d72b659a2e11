"""One list-watch of pods for every reader in the process: the mismatch watcher (pods bound to
a node) and the admission policy's publisher (every pod).

Each used to run its own list-watch, so a replica leading both had kube-apiserver encode, and
read and decoded itself, every pod twice, in two threads contending for the GIL with the event
loop (docs/benchmarks.md, "How cost grows with the cluster"). The feed lists with the narrowest
field selector its readers allow (pods bound to a node while only the watcher reads; every pod
once the publisher does), decodes each pod once into a WatchedPod, and tells each reader the
pods it asked for, as a field-selected watch of its own would: a bound-only reader is never
told of a pod no node has taken.

A reader joins when its controller starts leading and leaves when it stops. Either changes
what the feed lists, so the feed lists again: every reader is told LISTING, every pod, then
SYNCED, which is what a relist tells them (and what a reader that just joined needs).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from extender.kube.client.api import KubeApi
from extender.kube.pod_watch import BOUND, OnPod, PodListWatch, WatchedPod, pod_list_watch

_EVERY_POD = ""
_ALWAYS_TOLD = ("LISTING", "SYNCED")


@dataclass(frozen=True, eq=False)
class _Reader:
    on_pod: OnPod[WatchedPod]
    bound_only: bool


class PodFeed:
    """The shared list-watch of pods: `join` to be told pods, `leave` to stop (both in the
    event loop); `stop` ends it for every reader."""

    def __init__(self, api: KubeApi, page_size: int = 500) -> None:
        self._api = api
        self._page_size = page_size
        self._readers: list[_Reader] = []
        self._watch: PodListWatch[WatchedPod] | None = None
        self._changing = asyncio.Lock()
        self.selector: str | None = None
        """The field selector of the list-watch running now (None: none runs)."""

    async def join(self, on_pod: OnPod[WatchedPod], *, bound_only: bool) -> _Reader:
        """Tell `on_pod` every pod from a new list on (only those bound to a node when
        `bound_only`); returns the handle `leave` takes."""
        reader = _Reader(on_pod, bound_only)
        self._readers.append(reader)
        await self._restart()
        return reader

    async def leave(self, reader: _Reader) -> None:
        """Tell `reader` nothing more; the feed lists again for the readers left, or stops."""
        if reader in self._readers:
            self._readers.remove(reader)
            await self._restart()

    async def stop(self) -> None:
        self._readers.clear()
        await self._restart()

    @property
    def lists(self) -> int:
        """Lists the running list-watch started (benchmarks and tests read it)."""
        return self._watch.lists if self._watch is not None else 0

    async def _restart(self) -> None:
        async with self._changing:
            if self._watch is not None:
                await self._watch.stop()
                self._watch, self.selector = None, None
            if not self._readers:
                return
            selector = BOUND if all(r.bound_only for r in self._readers) else _EVERY_POD
            watch = pod_list_watch(self._api, selector, self._page_size)
            watch.start(self._dispatch(tuple(self._readers), selector == BOUND))
            self._watch, self.selector = watch, selector

    @staticmethod
    def _dispatch(readers: tuple[_Reader, ...], all_bound: bool) -> OnPod[WatchedPod]:
        """What the list-watch tells: each pod to each reader that asked for it."""
        if len(readers) == 1 and (all_bound or not readers[0].bound_only):
            return readers[0].on_pod  # the selector already is the reader's

        def tell(kind: str, pod: WatchedPod) -> None:
            bound = bool(pod.spec.node_name) or kind in _ALWAYS_TOLD
            for reader in readers:
                if bound or not reader.bound_only:
                    reader.on_pod(kind, pod)

        return tell
