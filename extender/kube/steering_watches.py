"""The two small watches behind namespace preferences and the arm64 share.

- Namespaces, decoded to their name and the two archfit annotations only, so the webhook
  reads a namespace's preference from memory, never with an API call per pod.
- Pods labelled `archfit.io/arch-choice` (only those the share placed), decoded to uid,
  namespace, controller, label, phase and deletion mark: each owner's split.

Like the node index, each watch runs the shared list-watch loop in its own thread; the
namespace map is swapped whole, and pod changes reach the pure ShareTally in the event
loop (`call_soon_threadsafe`), which is the only thread that reads or writes it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import structlog

from extender.core.pods import PREFER_ARCH_ANNOTATION
from extender.core.steering import (
    CHOICE_LABEL,
    SHARE_ANNOTATION,
    OwnerKey,
    ShareTally,
    Steering,
    owner_of,
    preference_order,
    steer,
)
from extender.kube.client.api import KubeApi, Query
from extender.kube.client.watching import (
    LIST_PAGE,
    ListMeta,
    ListWatch,
)

log = structlog.get_logger("archfit.steering")

_KEPT = (SHARE_ANNOTATION, PREFER_ARCH_ANNOTATION)
_FINISHED = frozenset({"Succeeded", "Failed"})


class _Meta(msgspec.Struct, rename="camel", frozen=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    deletion_timestamp: str | None = None


class _Status(msgspec.Struct, frozen=True):
    phase: str = ""


class _Object(msgspec.Struct, frozen=True):
    """A Namespace or a Pod, with only what steering reads (the rest is skipped unparsed)."""

    metadata: _Meta = _Meta()
    status: _Status = _Status()


class _List(msgspec.Struct, frozen=True):
    metadata: ListMeta = ListMeta()
    items: list[_Object] | None = None


_decode_list = msgspec.json.Decoder(_List).decode
_decode_object = msgspec.json.Decoder(_Object).decode


class _Watch:
    """One list-watch thread over a collection, handing each page and event to callbacks."""

    def __init__(
        self,
        name: str,
        api: KubeApi,
        path: str,
        on_list: Callable[[list[_Object]], None],
        on_event: Callable[[str, _Object], None],
        query: Query | None = None,
    ) -> None:
        self._name = name
        self._api = api
        self._path = path
        self._on_list = on_list
        self._on_event = on_event
        self._query = query
        self.synced = threading.Event()
        self._watch = ListWatch(
            f"archfit-{name}",
            self._list,
            self._watch_from,
            log,
            (f"{name}_watch_expired", f"{name}_watch_error"),
        )

    def start(self) -> None:
        self._watch.start()

    async def stop(self) -> None:
        await self._watch.stop()

    def _list(self) -> str:
        items: list[_Object] = []
        token = ""
        while True:
            query = {**(self._query or {}), "limit": LIST_PAGE, "continue": token or None}
            page = _decode_list(self._api.request("GET", self._path, query=query, timeout=(5, 60)))
            items += page.items or ()
            token = page.metadata.next
            if not token:
                break
        self._on_list(items)
        self.synced.set()
        log.info(f"{self._name}_listed", count=len(items))
        return page.metadata.resource_version

    def _watch_from(self, version: str) -> str:
        return self._watch.follow(self._api, self._path, version, self._apply, self._query)

    def _apply(self, kind: str, raw: msgspec.Raw, version: str) -> str:
        obj = _decode_object(raw)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._on_event(kind, obj)
        return obj.metadata.resource_version or version


class FleetSteering:
    """Namespace annotations and per-owner splits, kept by two watches; `steer` reads them."""

    def __init__(self, api: KubeApi, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._namespaces: Mapping[str, Mapping[str, str]] = {}
        self._tally = ShareTally()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._namespace_watch = _Watch(
            "namespaces",
            api,
            "/api/v1/namespaces",
            self._namespaces_listed,
            self._namespace_changed,
        )
        self._pod_watch = _Watch(
            "chosen_pods",
            api,
            "/api/v1/pods",
            lambda pods: self._in_loop(self._pods_listed, pods),
            lambda kind, pod: self._in_loop(self._pod_changed, kind, pod),
            {"labelSelector": CHOICE_LABEL},
        )

    def start(self) -> None:
        """Start both watches; pod changes reach the tally in this event loop."""
        self._loop = asyncio.get_running_loop()
        self._namespace_watch.start()
        self._pod_watch.start()

    async def stop(self) -> None:
        await self._namespace_watch.stop()
        await self._pod_watch.stop()

    @property
    def synced(self) -> bool:
        return self._namespace_watch.synced.is_set() and self._pod_watch.synced.is_set()

    def steer(self, pod: Mapping[str, Any], preference: Mapping[str, int]) -> Steering:
        """What the pod's namespace, workload and own annotations say (extender.core.steering)."""
        metadata = pod.get("metadata")
        namespace = metadata.get("namespace", "") if isinstance(metadata, Mapping) else ""
        now = self._clock()
        return steer(
            pod,
            self._namespaces.get(namespace) or {},
            preference,
            lambda owner: self._tally.split(owner, now),
            lambda owner, name: self._tally.remembered(owner, name, now),
        )

    def preference_order(self, pod: Mapping[str, Any]) -> tuple[str, ...]:
        """The prefer-arch order of the level that decides for `pod` (extender.core.steering)."""
        metadata = pod.get("metadata")
        if not isinstance(metadata, Mapping):
            return ()
        annotations = metadata.get("annotations")
        return preference_order(
            annotations if isinstance(annotations, Mapping) else {},
            self._namespaces.get(str(metadata.get("namespace") or "")) or {},
        )

    def chosen(self, steering: Steering, applied: str) -> None:
        """A pod was admitted requiring `applied` ("" when the share left it alone): a new
        choice counts in its owner's split until the pod watch shows the pod."""
        if applied and not steering.kept:
            self._tally.chosen(steering.owner, applied, self._clock(), steering.pod)

    # --- the watches' side (namespaces: the watch thread; pods: the event loop) ------------

    def _namespaces_listed(self, items: list[_Object]) -> None:
        self._namespaces = {
            item.metadata.name: kept for item in items if (kept := _kept(item.metadata))
        }

    def _namespace_changed(self, kind: str, item: _Object) -> None:
        name, kept = item.metadata.name, _kept(item.metadata)
        if kind != "DELETED" and self._namespaces.get(name, {}) == kept:
            return
        namespaces = dict(self._namespaces)
        if kind == "DELETED" or not kept:
            namespaces.pop(name, None)
        else:
            namespaces[name] = kept
        self._namespaces = namespaces  # one reference swap: readers see old or new

    def _in_loop(self, call: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(call, *args)

    def _pods_listed(self, items: list[_Object]) -> None:
        self._tally.replace(
            (pod.metadata.uid, _owner(pod), _side(pod)) for pod in items if _live(pod)
        )

    def _pod_changed(self, kind: str, pod: _Object) -> None:
        if kind == "DELETED" or not _live(pod):
            self._tally.gone(pod.metadata.uid)
        else:
            self._tally.seen(pod.metadata.uid, _owner(pod), _side(pod))


def _kept(metadata: _Meta) -> dict[str, str]:
    annotations = metadata.annotations or {}
    return {key: annotations[key] for key in _KEPT if key in annotations}


def _owner(pod: _Object) -> OwnerKey:
    meta = pod.metadata
    return owner_of({"ownerReferences": meta.owner_references}, meta.namespace)


def _side(pod: _Object) -> str:
    return (pod.metadata.labels or {}).get(CHOICE_LABEL, "")


def _live(pod: _Object) -> bool:
    """Counts in its owner's split: not finished, not being deleted."""
    return pod.status.phase not in _FINISHED and pod.metadata.deletion_timestamp is None
