"""The pods archfit's gate holds: list-watched by label, released by patch, told by Event.

Only held pods carry `archfit.io/gated=true`, so the list and the watch stay small however
many pods the cluster runs. Like the node index, the synchronous API client runs in one thread
and hands each change to the event loop; patches and events go through
`extender.kube.client.calls.blocking`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import orjson
import structlog

from extender.core.gates import (
    GATED_SELECTOR,
    PodChanged,
    ReleaseRefused,
    is_gated,
    release_operations,
)
from extender.core.pods import Pod
from extender.core.text import MAX_API_MESSAGE, cut
from extender.kube.client.api import JSON_PATCH, KubeApi
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError
from extender.kube.client.watching import REQUEST_TIMEOUT, ListWatch
from extender.kube.pod_watch import write_event

log = structlog.get_logger("archfit.gates")


OnChange = Callable[[str, Pod], None]
"""Told `("ADDED" | "MODIFIED" | "DELETED", pod)` for each held pod, in the event loop;
a relist tells every pod again as ADDED, and those gone as DELETED."""


class GatedPods:
    """List-watch of held pods, and the writes that release them."""

    def __init__(self, api: KubeApi) -> None:
        self._api = api
        self._on_change: OnChange | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watch = ListWatch(
            "archfit-gated-pods",
            self._list,
            self._watch_from,
            log,
            ("gated_pods_watch_expired", "gated_pods_error"),
        )
        self._known: dict[str, Pod] = {}
        """uid → pod, as the thread last saw it (for DELETED on a relist)."""

    def start(self, on_change: OnChange) -> None:
        """List-watch held pods in a thread, telling `on_change` in this event loop."""
        self._on_change = on_change
        self._loop = asyncio.get_running_loop()
        self._watch.start()

    async def stop(self) -> None:
        await self._watch.stop()

    # --- writes -----------------------------------------------------------------------

    async def read(self, namespace: str, name: str) -> Pod | None:
        """The pod as the API has it now, or None if it is gone."""

        def get() -> Pod | None:
            try:
                pod: Pod = self._api.get(
                    f"/api/v1/namespaces/{namespace}/pods/{name}", timeout=REQUEST_TIMEOUT
                )
            except ApiError as error:
                if error.status == 404:
                    return None
                raise
            return pod

        return await blocking(get)

    async def patch(self, pod: Mapping[str, Any], operations: list[dict[str, Any]]) -> bool:
        """Apply a JSONPatch to the pod; False if the pod is gone.

        Raises PodChanged (409, or the patch did not apply: a failed `test`, a path gone) and
        ReleaseRefused (422 otherwise: the updated pod breaks the apiserver's rules).
        """
        metadata = pod["metadata"]

        def send() -> bool:
            try:
                self._api.request(
                    "PATCH",
                    f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}",
                    body=operations,
                    content_type=JSON_PATCH,
                    timeout=REQUEST_TIMEOUT,
                )
            except ApiError as error:
                if error.status == 404:
                    return False
                if error.status == 409 or (error.status == 422 and _patch_did_not_apply(error)):
                    raise PodChanged(_message(error)) from error
                if error.status == 422:
                    raise ReleaseRefused(_message(error)) from error
                raise
            return True

        return await blocking(send)

    async def event(
        self, pod: Mapping[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        """A core/v1 Event on the pod, where `kubectl describe pod` shows it."""
        metadata = pod["metadata"]
        involved = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "uid": metadata.get("uid"),
        }
        await write_event(
            self._api,
            metadata["namespace"],
            involved,
            reason,
            message,
            warning=warning,
            component="archfit.io/releaser",
        )

    # --- the list-watch thread ----------------------------------------------------------

    def _list(self) -> str:
        listed = self._api.get(
            "/api/v1/pods", query={"labelSelector": GATED_SELECTOR}, timeout=(5, 60)
        )
        pods = {p["metadata"]["uid"]: p for p in listed.get("items") or ()}
        for uid in set(self._known) - set(pods):
            self._tell("DELETED", self._known.pop(uid))
        for uid, pod in pods.items():
            self._known[uid] = pod
            self._tell("ADDED", pod)
        return str(listed.get("metadata", {}).get("resourceVersion") or "")

    def _watch_from(self, version: str) -> str:
        return self._watch.follow(
            self._api, "/api/v1/pods", version, self._apply, {"labelSelector": GATED_SELECTOR}
        )

    def _apply(self, kind: str, raw: msgspec.Raw, version: str) -> str:
        obj: Pod = orjson.loads(memoryview(raw))
        version = str(obj.get("metadata", {}).get("resourceVersion") or version)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            uid = obj["metadata"]["uid"]
            if kind == "DELETED":
                self._known.pop(uid, None)
            else:
                self._known[uid] = obj
            self._tell(kind, obj)
        return version

    def _tell(self, kind: str, pod: Pod) -> None:
        loop, on_change = self._loop, self._on_change
        if loop is not None and on_change is not None and not loop.is_closed():
            loop.call_soon_threadsafe(on_change, kind, pod)


async def release_all(api: KubeApi, namespace: str | None, released: str) -> list[tuple[str, str]]:
    """Remove archfit's gate from every pod it holds (in `namespace`, or all), unconstrained.

    For uninstalling, or when no archfit runs: each pod gets an Event that says so.
    Returns the (namespace, name) of each pod released.
    """
    pods = GatedPods(api)
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"

    def listed() -> list[Pod]:
        # Every pod, a page at a time, not only the labelled ones: a pod whose label was
        # removed by hand is still held, and this command is the way out.
        found: list[Pod] = []
        token = None
        while True:
            page = pods._api.get(path, query={"limit": 500, "continue": token}, timeout=(5, 60))
            found += [p for p in page.get("items") or () if is_gated(p)]
            token = page.get("metadata", {}).get("continue")
            if not token:
                return found

    done = []
    for pod in await blocking(listed):
        current: Pod | None = pod
        while current is not None and is_gated(current):
            try:
                if await pods.patch(current, release_operations(current, [], released)):
                    await pods.event(current, "ArchfitReleasedByCommand", f"archfit: {released}")
                    done.append((current["metadata"]["namespace"], current["metadata"]["name"]))
                break
            except PodChanged:
                meta = current["metadata"]
                current = await pods.read(meta["namespace"], meta["name"])
    return done


def _body(error: ApiError) -> bytes:
    body = error.body
    return body if isinstance(body, bytes) else str(body or "").encode()


def _patch_did_not_apply(error: ApiError) -> bool:
    """Whether a 422 says the JSONPatch could not be applied to the pod as it is now.

    The apiserver answers a failed `test` (or a `remove` of a path gone) with a bare 422 that
    names no kind and drops the patch library's text (k8s.io/apiserver `applyJSPatch` ->
    `NewGenericServerResponse`); a pod its validation refuses gets a 422 whose details name
    the kind (`NewInvalid`).
    """
    try:
        status = orjson.loads(_body(error))
    except orjson.JSONDecodeError:
        return False
    details = status.get("details") if isinstance(status, dict) else None
    return not (isinstance(details, dict) and (details.get("kind") or details.get("causes")))


def _message(error: ApiError) -> str:
    try:
        return cut(str(orjson.loads(_body(error)).get("message") or error.reason), MAX_API_MESSAGE)
    except orjson.JSONDecodeError:
        return f"{error.status} {error.reason}"
