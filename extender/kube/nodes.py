"""The node index: list-watches Nodes so NodeNames-only requests know each node's platform.

What it keeps is node name → one shared NodeFacts tuple, and what it reads is kept as small:
- The list comes in pages of `_PAGE` nodes (`limit`/`continue`), so the peak holds one page
  of bytes, not the whole NodeList (5000 nodes are ~35 MB of JSON).
- Each page and each watch event is decoded by msgspec into extender.core.node_parts' Structs,
  the same ones full-Node requests use, which hold only the fields node_facts.node_facts
  reads: the name, four labels, the resourceVersion and three fields of status.nodeInfo.
  Conditions, images, capacity and the other labels (nearly all of a Node's bytes) are
  skipped by the decoder and never become Python objects, so nothing of them is left
  behind in the heap either.
- The watch is read as raw lines, one event each, and no model object is ever built.

The API client (extender.kube.client.api) is synchronous, so the list/watch loop runs in one thread
and publishes an immutable snapshot that the event loop reads without locks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from functools import partial

import msgspec
import structlog

from extender.config.registry_settings import RegistrySettings
from extender.core.node_facts import NodeFacts
from extender.core.node_parts import FactsOf, NodeParts, decode_node
from extender.core.platforms import Platform
from extender.kube.client.api import KubeApi, Query
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError
from extender.kube.client.watching import Expired, ListMeta, ListWatch, ReflectorBackoff

log = structlog.get_logger("archfit.nodes")

_PAGE = 100
"""Nodes per list request. The allocator keeps about one page body's worth of memory after
the list (one realistic Node is ~7 KB of JSON), so smaller pages leave less behind: with
5000 nodes, ~0.25 KB of RSS per node at 100 against ~0.9 KB at 500, for 50 requests
instead of 10 (measured against a real kube-apiserver; bench/memory.py measures the process)."""


class _NodeList(msgspec.Struct, frozen=True):
    metadata: ListMeta = ListMeta()
    items: list[NodeParts] | None = None


_decode_page = msgspec.json.Decoder(_NodeList).decode


class NodeIndex:
    """Node name → platform and runtime rule, one shared tuple per distinct pair."""

    def __init__(
        self,
        api: KubeApi,
        on_change: Callable[[int], None] | None = None,
        *,
        page_size: int = _PAGE,
        backoff: ReflectorBackoff | None = None,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        """`backoff` and `wait` replace the reflector's back-off and the wait between attempts
        (tests count attempts with them instead of waiting them out)."""
        self._api = api
        self._on_change = on_change
        self._page_size = page_size
        self._nodes: Mapping[str, NodeFacts] = {}
        # Thousands of nodes share a handful of (platform, rule) pairs: keep one copy of each,
        # which also lets the extender group candidates by identity (extender.core.placement).
        self._facts_of = FactsOf()
        self._platforms: frozenset[Platform] = frozenset()
        self._synced = threading.Event()
        self._watch = ListWatch(
            "archfit-node-index",
            self._list,
            self._watch_from,
            log,
            ("node_watch_expired", "node_index_error"),
            backoff=backoff,
            wait=wait,
        )
        self.relists = 0
        """How many full lists were made (the first one included); tests read it."""
        self.pages = 0
        """How many list pages were read in all; tests read it."""

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    @property
    def problem(self) -> str | None:
        """Why the index cannot stay current (its watch keeps failing: it is as fresh as its
        last list), or None."""
        return self._watch.problem

    def snapshot(self) -> Mapping[str, NodeFacts]:
        """Node name → shared (platform, rule) facts: the current immutable map."""
        return self._nodes

    def known_platforms(self) -> frozenset[Platform]:
        """The distinct platforms of the indexed nodes (the webhook's cluster platforms)."""
        return self._platforms

    def __len__(self) -> int:
        return len(self._nodes)

    def start(self) -> None:
        self._watch.start()

    async def wait_synced(self, seconds: float) -> bool:
        """Wait up to `seconds` for the first list; True when synced."""
        if self.synced:
            return True
        return await blocking(self._synced.wait, seconds)

    async def stop(self) -> None:
        await self._watch.stop()

    def _list(self) -> str:
        """List every node, a page at a time, and publish them at once; returns the version."""
        nodes: dict[str, NodeFacts] = {}
        token = ""
        while True:
            page = _decode_page(self._get({"limit": self._page_size, "continue": token or None}))
            self.pages += 1
            for item in page.items or ():
                if item.name:
                    nodes[item.name] = self._facts_of(item)
            token = page.metadata.next
            if not token:
                break
        self._publish(nodes)
        self.relists += 1
        self._synced.set()
        version = page.metadata.resource_version
        log.info("node_index_listed", nodes=len(nodes), resource_version=version)
        return version

    def _get(self, query: Query) -> bytes:
        try:
            return self._api.request("GET", "/api/v1/nodes", query=query, timeout=(5, 60))
        except ApiError as error:
            if error.status == 410:  # the continue token outlived etcd's compaction
                raise Expired from error
            raise

    def _watch_from(self, version: str) -> str:
        """Apply watch events from `version` until the server ends the watch; returns the
        version to resume from."""
        return self._watch.follow(self._api, "/api/v1/nodes", version, self._apply)

    def _apply(self, kind: str, raw: msgspec.Raw, version: str) -> str:
        obj = decode_node(raw)
        new_version = obj.resource_version or version
        name = obj.name
        if kind == "BOOKMARK" or not name:
            return new_version
        if kind == "DELETED":
            if name not in self._nodes:
                return new_version
            nodes = dict(self._nodes)
            del nodes[name]
        else:
            facts = self._facts_of(obj)
            if self._nodes.get(name) is facts:
                return new_version  # most updates are status heartbeats: nothing to copy
            nodes = dict(self._nodes)
            nodes[name] = facts
        self._publish(nodes)
        return new_version

    def _publish(self, nodes: dict[str, NodeFacts]) -> None:
        self._nodes = nodes  # one reference swap: readers see old or new, never half
        self._platforms = frozenset(p for p, _, _ in nodes.values() if p is not None)
        if self._on_change is not None:
            self._on_change(len(nodes))


class _ImageEntry(msgspec.Struct, frozen=True):
    names: list[str] | None = None


class _ImageStatus(msgspec.Struct, frozen=True):
    images: list[_ImageEntry] | None = None


class _ImagesNode(msgspec.Struct, frozen=True):
    status: _ImageStatus = _ImageStatus()


class _ImagesNodeList(msgspec.Struct, frozen=True):
    items: list[_ImagesNode] | None = None


_decode_images_page = msgspec.json.Decoder(_ImagesNodeList).decode


def node_images(api: KubeApi, limit: int = 100) -> list[str]:
    """The image names the first `limit` nodes report in `status.images`: what the cluster
    runs (a one-off read at start; the node index keeps none of it)."""
    page = _decode_images_page(
        api.request("GET", "/api/v1/nodes", query={"limit": limit}, timeout=(5, 10))
    )
    return [
        name
        for item in page.items or ()
        for image in item.status.images or ()
        for name in image.names or ()
    ]


async def check_registries_served(api: KubeApi, registry: RegistrySettings) -> None:
    """Warn, once at start, when the images the nodes run come from a cloud registry no
    credential source serves (extender.registry.cloud_check), off the event loop."""
    from extender.registry.cloud_check import warn_unserved_registries

    await blocking(warn_unserved_registries, partial(node_images, api), registry)
