"""Pods as the mismatch watcher and the policy's publisher read them, the list-watch that
decodes them, and the watcher's API calls: Events on a pod and its controller, a container's
previous log, an eviction.

Like the node index (extender.kube.nodes): the list comes in pages, and each page and watch
event is decoded by msgspec into Structs that hold only what the readers use (names, owners,
node, images, phase, readiness and the container statuses' reasons and messages); a pod's
other fields (nearly all of its bytes) never become Python objects. The Structs are
`gc=False` and their sequences tuples: decoded JSON holds no cycles, and a relist of 100,000
pods otherwise allocated millions of objects the cyclic collector walked again and again,
each pass slower as the index grew (bench/scale; 25 against 17 µs a pod with a large heap).
The synchronous API client runs in one thread and hands the pods to the event loop in batches
(`Handoff`); writes go through `extender.kube.client.calls.blocking`. The shared pod feed
(extender.kube.pod_feed) runs the list-watch for both readers.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import msgspec
import structlog

from extender.core.image_uses import PodUse
from extender.core.mismatch import ContainerState, Launch
from extender.core.pods import PullSecretsRef, WorkloadId, workload_of
from extender.core.text import error_text
from extender.kube.client.api import KubeApi, Query
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError
from extender.kube.client.watching import (
    REQUEST_TIMEOUT,
    Expired,
    ListPage,
    ListWatch,
)

log = structlog.get_logger("archfit.watcher")

BOUND = "spec.nodeName!="
"""The pods the watcher is sent: those bound to a node, the only ones with container
statuses to judge. Every pod's CREATE, and its updates until it is bound, would otherwise
be sent, decoded and handed to the event loop for nothing (bench/webhook_latency, whose
pods are never bound: a sixth of archfit's CPU per admitted pod)."""

_TOO_MANY_REQUESTS = 429
_FINISHED = ("Succeeded", "Failed")


class _Owner(msgspec.Struct, frozen=True, gc=False):
    kind: str = ""
    name: str = ""
    controller: bool = False


class PodMeta(msgspec.Struct, rename="camel", frozen=True, gc=False):
    """What the watches read of a pod's metadata."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    owner_references: tuple[_Owner, ...] | None = None
    deletion_timestamp: str | None = None


class NameRef(msgspec.Struct, frozen=True, gc=False):
    """Anything that is its name alone (a pull secret's reference, an env entry)."""

    name: str = ""


class _Mount(msgspec.Struct, rename="camel", frozen=True, gc=False):
    mount_path: str = ""


class _Container(msgspec.Struct, rename="camel", frozen=True, gc=False):
    name: str = ""
    image: str = ""
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None
    working_dir: str = ""
    env: tuple[NameRef, ...] | None = None
    env_from: tuple[msgspec.Raw, ...] | None = None
    volume_mounts: tuple[_Mount, ...] | None = None

    def launch(self) -> Launch:
        return Launch(
            overrides_command=bool(self.command or self.args),
            working_dir=bool(self.working_dir),
            sets_path=bool(self.env_from) or any(e.name == "PATH" for e in self.env or ()),
            mounts=tuple(m.mount_path for m in self.volume_mounts or ()),
        )


class PodSpec(msgspec.Struct, rename="camel", frozen=True, gc=False):
    """What the watches read of a pod's spec."""

    node_name: str = ""
    service_account_name: str = "default"
    image_pull_secrets: tuple[NameRef, ...] | None = None
    containers: tuple[_Container, ...] | None = None
    init_containers: tuple[_Container, ...] | None = None


class _Said(msgspec.Struct, frozen=True, gc=False):
    reason: str = ""
    message: str = ""


class _State(msgspec.Struct, frozen=True, gc=False):
    waiting: _Said | None = None
    terminated: _Said | None = None


class _ContainerStatus(msgspec.Struct, rename="camel", frozen=True, gc=False):
    name: str = ""
    image: str = ""
    image_i_d: str = msgspec.field(default="", name="imageID")
    restart_count: int = 0
    state: _State = _State()
    last_state: _State = _State()


class _Condition(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    status: str = ""


class _Status(msgspec.Struct, rename="camel", frozen=True, gc=False):
    phase: str = ""
    conditions: tuple[_Condition, ...] | None = None
    container_statuses: tuple[_ContainerStatus, ...] | None = None
    init_container_statuses: tuple[_ContainerStatus, ...] | None = None


class WatchedPod(msgspec.Struct, frozen=True, gc=False):
    """What the watcher and the policy's publisher read of a v1.Pod."""

    metadata: PodMeta = PodMeta()
    spec: PodSpec = PodSpec()
    status: _Status = _Status()

    @property
    def uid(self) -> str:
        return self.metadata.uid

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions or ())

    @property
    def failing(self) -> bool:
        """Whether kubelet reports a container waiting or ended (a pod it has not reported
        on yet, or whose containers all run, is not failing)."""
        status = self.status
        return any(
            c.state.waiting is not None or c.state.terminated is not None
            for c in (*(status.init_container_statuses or ()), *(status.container_statuses or ()))
        )

    def controller(self) -> tuple[str, str] | None:
        """(kind, name) of the owner with `controller: true`, or None (a bare pod)."""
        for owner in self.metadata.owner_references or ():
            if owner.controller:
                return owner.kind, owner.name
        return None

    def workload(self) -> WorkloadId:
        """Whose pods this is one of (learned evidence is scoped by it)."""
        return workload_of(self.metadata.namespace, self.metadata.name, self.controller())

    def launch(self, container: str) -> Launch | None:
        """How the spec starts `container` (a container or an init container), or None."""
        spec = self.spec
        found: list[_Container] = [*(spec.init_containers or ()), *(spec.containers or ())]
        return next((item.launch() for item in found if item.name == container), None)

    def images(self) -> tuple[str, ...]:
        """Every container and init container image, once each, in order."""
        spec = self.spec
        found = [c.image for c in (*(spec.init_containers or ()), *(spec.containers or ()))]
        return tuple(dict.fromkeys(i for i in found if i))

    def use(self) -> PodUse | None:
        """What the pod names for the admission policy's table, or None when it names
        nothing the policy would read again: it has finished, or a DaemonSet controls it
        (the policy leaves such pods alone)."""
        if self.status.phase in _FINISHED:
            return None
        controller = self.controller()
        if controller is not None and controller[0] == "DaemonSet":
            return None
        images = self.images()
        if not images:
            return None
        namespace = self.metadata.namespace
        workload = workload_of(namespace, self.metadata.name, controller).name
        return PodUse(namespace, images, self.pull(), workload)

    def pull(self) -> PullSecretsRef:
        """Where the pod's registry credentials come from."""
        names = tuple(s.name for s in self.spec.image_pull_secrets or () if s.name)
        spec = self.spec
        return PullSecretsRef(self.metadata.namespace, names, spec.service_account_name)

    def states(self) -> Iterator[ContainerState]:
        """Each container status as the classifier reads it."""
        status = self.status
        for item in (*(status.init_container_statuses or ()), *(status.container_statuses or ())):
            waiting = item.state.waiting or _Said()
            ended = item.state.terminated or item.last_state.terminated or _Said()
            yield ContainerState(
                item.name,
                item.image,
                item.image_i_d,
                waiting.reason,
                waiting.message,
                ended.reason,
                ended.message,
                item.restart_count,
            )


class Listed(Protocol):
    """What a list-watch reads of every pod it decodes: its metadata."""

    @property
    def metadata(self) -> PodMeta: ...


P = TypeVar("P", bound=Listed)


decode_pod_page = msgspec.json.Decoder(ListPage[WatchedPod]).decode
decode_pod = msgspec.json.Decoder(WatchedPod).decode

OnPod = Callable[[str, P], None]
"""Told ("LISTING" | "ADDED" | "MODIFIED" | "DELETED" | "SYNCED", pod) in the event loop; a
relist says "LISTING" (with the empty pod), tells every pod again, then "SYNCED" with the
empty pod, so the reader can drop the ones not told."""


HANDOFF_SLICE_SECONDS = 0.002
"""How long the event loop spends on queued pods before it serves anything else: a relist's
page of 500 pods, told at once, held up every request behind it (bench/scale's stalls)."""
HANDOFF_QUEUE = 1000
"""Pods queued for the loop at most: the thread waits while more are, so a relist is decoded
no faster than the loop takes it (the peak memory of a relist is two pages, not the list)."""
_HANDOFF_CHECK = 32
"""Pods told between two looks at the clock."""
HANDOFF_LINGER_SECONDS = 0.005
"""Once the loop has emptied the queue, how long the thread may go on queueing pods without
waking it (the loop looks again then). A watch's events come one at a time, and waking the
loop for each cost more than handling it: 28 µs of GIL time per event in
`call_soon_threadsafe` alone (bench/scale's events profile). A pod is told at most this much
later."""


class Handoff(Generic[P]):
    """Pods from a list-watch's thread to the event loop, in batches.

    The thread `put`s each pod in a queue and wakes the loop only when no drain is already
    due: one wake-up (a write to the loop's self-pipe, a GIL hand-over) per batch, where one
    per pod cost more than the pod's own handling. The loop tells the queued pods in order,
    for at most HANDOFF_SLICE_SECONDS at a time, then lets the rest wait its next turn; once
    the queue is empty it stays due for HANDOFF_LINGER_SECONDS and looks again, so pods that
    trickle in are taken by the loop's own timer, not by a wake-up each.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_pod: OnPod[P],
        *,
        slice_seconds: float = HANDOFF_SLICE_SECONDS,
        linger_seconds: float = HANDOFF_LINGER_SECONDS,
        limit: int = HANDOFF_QUEUE,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._loop = loop
        self._on_pod = on_pod
        self._slice = slice_seconds
        self._linger = linger_seconds
        self._limit = limit
        self._clock = clock
        self._queue: deque[tuple[str, P]] = deque()
        self._due = False
        """The loop will look at the queue again (a drain or the linger is scheduled): no
        wake-up needed."""
        self._room = threading.Event()
        self._closed = False

    def put(self, kind: str, pod: P, stop: threading.Event) -> None:
        """From the thread: queue one pod; wait while the queue is full (until `stop`)."""
        if self._closed:
            return
        queue = self._queue
        queue.append((kind, pod))
        if not self._due:
            self._due = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed: nobody reads any more
                self._closed = True
                return
        while len(queue) >= self._limit and not (self._closed or stop.is_set()):
            self._room.clear()
            if len(queue) >= self._limit:  # the loop may have taken some since
                self._room.wait(0.5)

    def close(self) -> None:
        """Tell nothing more (the watch stops, or its reader left)."""
        self._closed = True
        self._queue.clear()
        self._room.set()

    def _drain(self) -> None:
        """In the loop: tell queued pods for one slice; the rest next turn, or look again
        after the linger once the queue is empty."""
        queue, on_pod, clock = self._queue, self._on_pod, self._clock
        ends = clock() + self._slice
        told = 0
        while queue and not self._closed:
            kind, pod = queue.popleft()
            try:
                on_pod(kind, pod)
            except Exception:  # one pod's trouble is not the next one's
                log.exception("pod_handler_failed", kind=kind, pod=pod.metadata.name)
            told += 1
            if told % _HANDOFF_CHECK == 0:
                if len(queue) < self._limit and not self._room.is_set():
                    self._room.set()
                if clock() >= ends:
                    break
        if not self._room.is_set():  # the thread cleared it, and may wait for it
            self._room.set()
        if self._closed:
            self._due = False
        elif queue:
            self._loop.call_soon(self._drain)
        else:
            self._loop.call_later(self._linger, self._lingered)

    def _lingered(self) -> None:
        """The linger is over: tell what came meanwhile, or let the next pod wake the loop (a
        pod queued before `_due` reads False is seen below; one queued after wakes it)."""
        self._due = False
        if self._queue and not self._closed:
            self._due = True
            self._drain()


class PodListWatch(Generic[P]):
    """List-watch of the pods a field selector names, a page at a time, each decoded to what
    its reader needs (`decode_page`, `decode`; `empty` is the SYNCED event's pod)."""

    def __init__(
        self,
        api: KubeApi,
        selector: str,
        decoders: tuple[Callable[[bytes], ListPage[P]], Callable[[bytes], P], P],
        page_size: int,
        thread: str,
        events: tuple[str, str],
    ) -> None:
        self._api = api
        self._selector = selector
        self._decode_page, self._decode, self._empty = decoders
        self._page_size = page_size
        self._handoff: Handoff[P] | None = None
        self._watch = ListWatch(thread, self.list_all, self.watch_from, log, events)

    def start(self, on_pod: OnPod[P]) -> None:
        self._handoff = Handoff(asyncio.get_running_loop(), on_pod)
        self._watch.start()

    async def stop(self) -> None:
        """Stop the thread; a pod it reads after this is never told."""
        if self._handoff is not None:
            self._handoff.close()
        await self._watch.stop()

    def list_all(self) -> str:
        """Tell LISTING, every pod, page by page, then SYNCED; returns the list's
        resourceVersion."""
        token = ""
        self._tell("LISTING", self._empty)
        while True:
            query: Query = {
                "fieldSelector": self._selector,
                "limit": self._page_size,
                "continue": token or None,
            }
            try:
                data = self._api.request("GET", "/api/v1/pods", query=query, timeout=(5, 60))
            except ApiError as error:
                if error.status == 410:
                    raise Expired from error
                raise
            page = self._decode_page(data)
            for pod in page.items or ():
                self._tell("ADDED", pod)
            token = page.metadata.next
            if not token:
                break
        self._tell("SYNCED", self._empty)
        return page.metadata.resource_version

    def watch_from(self, version: str) -> str:
        """Tell each watched change until the server ends the watch; returns the version."""
        return self._watch.follow(
            self._api, "/api/v1/pods", version, self._apply, {"fieldSelector": self._selector}
        )

    def _apply(self, kind: str, raw: msgspec.Raw, version: str) -> str:
        pod = self._decode(raw)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._tell(kind, pod)
        return pod.metadata.resource_version or version

    def _tell(self, kind: str, pod: P) -> None:
        handoff = self._handoff
        if handoff is not None:
            handoff.put(kind, pod, self._watch.stop_event)


def pod_list_watch(api: KubeApi, selector: str, page_size: int = 500) -> PodListWatch[WatchedPod]:
    """The list-watch of the pods `selector` names (BOUND, or "" for every pod), decoded into
    WatchedPods: what the shared pod feed runs (extender.kube.pod_feed)."""
    return PodListWatch(
        api,
        selector,
        (decode_pod_page, decode_pod, WatchedPod()),
        page_size,
        "archfit-pod-feed",
        ("pod_watch_expired", "pod_watch_error"),
    )


class PodCalls:
    """The watcher's API calls, each in a thread; `component` names who reports the Events."""

    def __init__(self, api: KubeApi, component: str = "archfit.io/watcher") -> None:
        self._api = api
        self._component = component

    async def previous_log(self, pod: WatchedPod, container: str, limit_bytes: int) -> str:
        """The end of the container's previous run's log (`limitBytes` from its start)."""
        meta = pod.metadata

        def read() -> str:
            data = self._api.request(
                "GET",
                f"/api/v1/namespaces/{meta.namespace}/pods/{meta.name}/log",
                query={"container": container, "previous": True, "limitBytes": limit_bytes},
                timeout=REQUEST_TIMEOUT,
            )
            return data[:limit_bytes].decode("utf-8", "replace")

        return await blocking(read)

    async def controller(self, namespace: str, kind: str, name: str) -> tuple[str, str, str]:
        """The top controller (apiVersion, kind, name): a ReplicaSet's Deployment, a Job's
        CronJob; the owner itself when it has none or cannot be read."""
        collection = {
            "ReplicaSet": f"/apis/apps/v1/namespaces/{namespace}/replicasets",
            "Job": f"/apis/batch/v1/namespaces/{namespace}/jobs",
        }.get(kind)
        version = _API_VERSIONS.get(kind, "apps/v1")
        if collection is None:
            return version, kind, name

        def owner() -> tuple[str, str, str]:
            try:
                found = self._api.get(f"{collection}/{name}", timeout=REQUEST_TIMEOUT)
            except ApiError:
                return version, kind, name
            for ref in (found.get("metadata") or {}).get("ownerReferences") or ():
                if ref.get("controller"):
                    return str(ref.get("apiVersion")), str(ref.get("kind")), str(ref.get("name"))
            return version, kind, name

        return await blocking(owner)

    async def event(
        self, namespace: str, regarding: tuple[str, str, str], reason: str, message: str
    ) -> None:
        """A Warning core/v1 Event on (apiVersion, kind, name), for `kubectl describe`."""
        version, kind, name = regarding
        await write_event(
            self._api,
            namespace,
            {"apiVersion": version, "kind": kind, "name": name, "namespace": namespace},
            reason,
            message,
            warning=True,
            component=self._component,
        )

    async def evict(self, pod: WatchedPod) -> str:
        """Ask the Eviction API to evict the pod: evicted, refused (a PDB: 429), gone, error."""
        meta = pod.metadata
        body: Any = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta.name, "namespace": meta.namespace},
            "deleteOptions": {"preconditions": {"uid": meta.uid}},
        }

        def send() -> str:
            try:
                self._api.post(
                    f"/api/v1/namespaces/{meta.namespace}/pods/{meta.name}/eviction",
                    body,
                    timeout=REQUEST_TIMEOUT,
                )
            except ApiError as error:
                if error.status == _TOO_MANY_REQUESTS:
                    return "refused"
                if error.status in (404, 409):
                    return "gone"
                log.warning("eviction_failed", pod=meta.name, status=error.status)
                return "error"
            return "evicted"

        return await blocking(send)


_API_VERSIONS = {
    "ReplicaSet": "apps/v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
}


async def write_event(
    api: KubeApi,
    namespace: str,
    involved: dict[str, Any],
    reason: str,
    message: str,
    *,
    warning: bool,
    component: str,
) -> None:
    """A core/v1 Event on `involved`; a failure is logged, never raised (an Event explains)."""
    now = datetime.datetime.now(datetime.UTC).isoformat()
    body: Any = {
        "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": "archfit"},
        "reportingComponent": component,
        "reportingInstance": "archfit",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }

    def send() -> None:
        api.post(f"/api/v1/namespaces/{namespace}/events", body, timeout=REQUEST_TIMEOUT)

    try:
        await blocking(send)
    except Exception as error:
        log.warning("event_failed", name=involved["name"], error=error_text(error))
