"""The node index: list-watches Nodes so NodeNames-only requests know each node's platform.

The `kubernetes` client is synchronous, so the list/watch loop runs in one
thread and publishes an immutable snapshot that the event loop reads without locks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
import structlog
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from extender.platforms import Platform, Rule
from extender.runtimes import node_facts

log = structlog.get_logger("archfit.nodes")

# A server-side watch timeout bounds how long the thread can block in a read,
# so stop() takes effect within this many seconds.
_WATCH_SECONDS = 30
_BACKOFF_SECONDS = (0.5, 1, 2, 5, 10)


_Facts = tuple[Platform | None, Rule]
"""A node's platform (None when it names no architecture) and its runtime's matching rule."""
_UNKNOWN: _Facts = (None, Rule.STRICT)
"""What a name the index has not seen gets: no platform, so the failure policy decides."""


class NodeIndex:
    """Node name → platform and runtime rule, one shared tuple per distinct pair."""

    def __init__(
        self,
        api: client.ApiClient,
        on_change: Callable[[int], None] | None = None,
    ) -> None:
        self._core = client.CoreV1Api(api)
        self._on_change = on_change
        self._nodes: Mapping[str, _Facts] = {}
        # Thousands of nodes share a handful of (platform, rule) pairs: keep one copy of each.
        self._shared: dict[_Facts, _Facts] = {}
        self._platforms: frozenset[Platform] = frozenset()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None
        self.relists = 0
        """How many full lists were made (the first one included); tests read it."""

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def snapshot(self) -> Mapping[str, _Facts]:
        """Node name → shared (platform, rule) facts: the current immutable map."""
        return self._nodes

    def platforms(self, names: Sequence[str]) -> list[Platform | None]:
        """Platforms of many nodes at once (None for unknown ones): one snapshot, no locks."""
        nodes = self._nodes
        return [nodes.get(name, _UNKNOWN)[0] for name in names]

    def known_platforms(self) -> frozenset[Platform]:
        """The distinct platforms of the indexed nodes (the webhook's cluster platforms)."""
        return self._platforms

    def __len__(self) -> int:
        return len(self._nodes)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="archfit-node-index", daemon=True)
        self._thread.start()

    async def wait_synced(self, seconds: float) -> bool:
        """Wait up to `seconds` for the first list; True when synced."""
        if self.synced:
            return True
        return await asyncio.to_thread(self._synced.wait, seconds)

    async def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        # Daemon thread: don't hold shutdown hostage to a read in progress.
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 1.0)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                version = self._list()
                failures = 0
                while not self._stop.is_set():
                    version = self._watch_from(version)
            except _Expired:
                log.info("node_watch_expired", action="relist")
            except Exception as error:  # the thread must survive any API hiccup
                if self._stop.is_set():
                    break  # the connection was cut because we are stopping
                delay = _BACKOFF_SECONDS[min(failures, len(_BACKOFF_SECONDS) - 1)]
                failures += 1
                log.warning("node_index_error", error=_short(error), retry_in_s=delay)
                self._stop.wait(delay)

    def _list(self) -> str:
        # Raw JSON: orjson is far faster than the client's model deserialisation.
        response: Any = self._core.list_node(_preload_content=False, _request_timeout=(5, 60))
        body = orjson.loads(response.data)
        nodes = {
            name: self._facts_of(item)
            for item in body.get("items") or ()
            if (name := (item.get("metadata") or {}).get("name"))
        }
        self._publish(nodes)
        self.relists += 1
        self._synced.set()
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        log.info("node_index_listed", nodes=len(nodes), resource_version=version)
        return version

    def _watch_from(self, version: str) -> str:
        self._watch = watch.Watch()
        try:
            for event in self._watch.stream(
                self._core.list_node,
                resource_version=version,
                timeout_seconds=_WATCH_SECONDS,
                allow_watch_bookmarks=True,
                _request_timeout=(5, _WATCH_SECONDS + 10),
            ):
                version = self._apply(event, version)
                if self._stop.is_set():
                    break
        except ApiException as error:
            if error.status == 410:
                raise _Expired from error
            raise
        finally:
            self._watch.stop()
        return version

    def _apply(self, event: Mapping[str, Any], version: str) -> str:
        kind = event.get("type")
        raw = event.get("raw_object") or {}
        if kind == "ERROR":
            if raw.get("code") == 410:
                raise _Expired
            raise RuntimeError(f"watch error: {raw.get('message', raw)}")
        metadata = raw.get("metadata") or {}
        new_version = str(metadata.get("resourceVersion") or version)
        if kind == "BOOKMARK":
            return new_version
        name = metadata.get("name")
        if not name:
            return new_version
        facts = self._facts_of(raw)
        if kind != "DELETED" and name in self._nodes and self._nodes[name] == facts:
            return new_version  # most updates are status heartbeats: nothing to copy
        nodes = dict(self._nodes)
        if kind == "DELETED":
            nodes.pop(name, None)
        else:
            nodes[name] = facts
        self._publish(nodes)
        return new_version

    def _facts_of(self, node: Mapping[str, Any]) -> _Facts:
        labels = (node.get("metadata") or {}).get("labels") or {}
        info = (node.get("status") or {}).get("nodeInfo") or {}
        facts = node_facts(labels, info)
        return self._shared.setdefault(facts, facts)

    def _publish(self, nodes: dict[str, _Facts]) -> None:
        self._nodes = nodes  # one reference swap: readers see old or new, never half
        self._platforms = frozenset(p for p, _ in nodes.values() if p is not None)
        if self._on_change is not None:
            self._on_change(len(nodes))


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 300 else text[:297] + "..."
