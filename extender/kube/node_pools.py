"""Karpenter NodePools (karpenter.sh/v1), list-watched: which platforms each may launch.

Each NodePool is decoded to its name, its template's requirements and labels, and turned into
an offer at once (extender.core.capacity.node_pool_offer); the rest of it never becomes a
Python object. A cluster without Karpenter answers 404: then there are no NodePools, said once
in the log, and the list is tried again now and then (Karpenter may be installed later).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from extender.core.capacity import NodePoolOffer, node_pool_offer
from extender.kube.client.api import KubeApi
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError
from extender.kube.client.watching import LIST_PAGE, REQUEST_TIMEOUT, Expired, ListPage, ListWatch

log = structlog.get_logger("archfit.capacity")

KARPENTER_API = "/apis/karpenter.sh/v1"
"""Karpenter's API group version: its discovery document answers 404 where Karpenter is not
installed, and any authenticated identity may read it (system:discovery)."""
NODE_POOLS = f"{KARPENTER_API}/nodepools"
ABSENT_RETRY_SECONDS = 60.0
"""How long a cluster without the NodePool API waits before it is asked again."""


class _Requirement(msgspec.Struct, frozen=True):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class _TemplateSpec(msgspec.Struct, frozen=True):
    requirements: list[_Requirement] | None = None


class _TemplateMeta(msgspec.Struct, frozen=True):
    labels: dict[str, str] | None = None


class _Template(msgspec.Struct, frozen=True):
    metadata: _TemplateMeta = _TemplateMeta()
    spec: _TemplateSpec = _TemplateSpec()


class _Spec(msgspec.Struct, frozen=True):
    template: _Template = _Template()


class _Meta(msgspec.Struct, rename="camel", frozen=True):
    name: str = ""
    resource_version: str = ""


class _NodePool(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    spec: _Spec = _Spec()

    def offer(self) -> NodePoolOffer:
        template = self.spec.template
        requirements: list[dict[str, Any]] = [
            {"key": r.key, "operator": r.operator, "values": r.values}
            for r in template.spec.requirements or ()
        ]
        return node_pool_offer(self.metadata.name, requirements, template.metadata.labels or {})


_decode_page = msgspec.json.Decoder(ListPage[_NodePool]).decode
_decode_pool = msgspec.json.Decoder(_NodePool).decode


class NodePoolWatch:
    """NodePool name → what it offers, published as one immutable tuple (sorted by name)."""

    def __init__(self, api: KubeApi, on_change: Callable[[], None] | None = None) -> None:
        self._api = api
        self._on_change = on_change
        self._pools: dict[str, NodePoolOffer] = {}
        self._offers: tuple[NodePoolOffer, ...] = ()
        self._synced = threading.Event()
        self._absent = False
        self._watch = ListWatch(
            "archfit-node-pools",
            self._list,
            self._watch_from,
            log,
            ("node_pool_watch_expired", "node_pool_watch_error"),
        )

    @property
    def synced(self) -> bool:
        """Whether the first list answered (an absent API counts: there are none)."""
        return self._synced.is_set()

    async def wait_synced(self, seconds: float) -> bool:
        """Wait up to `seconds` for the first list; True when synced."""
        if self.synced:
            return True
        return await blocking(self._synced.wait, seconds)

    def offers(self) -> tuple[NodePoolOffer, ...]:
        return self._offers

    def start(self) -> None:
        self._watch.start()

    async def stop(self) -> None:
        await self._watch.stop()

    def _list(self) -> str:
        pools: dict[str, NodePoolOffer] = {}
        token = ""
        while True:
            try:
                page = _decode_page(
                    self._api.request(
                        "GET",
                        NODE_POOLS,
                        query={"limit": LIST_PAGE, "continue": token or None},
                        timeout=REQUEST_TIMEOUT,
                    )
                )
            except ApiError as error:
                if error.status == 410:
                    raise Expired from error
                if error.status != 404:
                    raise
                return self._none_served()
            for item in page.items or ():
                if item.metadata.name:
                    pools[item.metadata.name] = item.offer()
            token = page.metadata.next
            if not token:
                break
        if self._absent:
            log.info("node_pools_served")
        self._absent = False
        self._publish(pools)
        log.info("node_pools_listed", node_pools=[str(offer) for offer in self._offers])
        return page.metadata.resource_version

    def _none_served(self) -> str:
        """No NodePool API: there are none, said once; the version "" makes the watch wait
        and list again."""
        if not self._absent:
            log.info("node_pools_absent", reason=f"{NODE_POOLS} answered 404: no Karpenter")
        self._absent = True
        self._publish({})
        return ""

    def _watch_from(self, version: str) -> str:
        if not version:  # no API: ask again later, never busy-loop on a 404
            self._watch.stop_event.wait(ABSENT_RETRY_SECONDS)
            raise Expired
        return self._watch.follow(self._api, NODE_POOLS, version, self._apply)

    def _apply(self, kind: str, raw: msgspec.Raw, version: str) -> str:
        pool = _decode_pool(raw)
        name = pool.metadata.name
        if kind in ("ADDED", "MODIFIED", "DELETED") and name:
            pools = dict(self._pools)
            if kind == "DELETED":
                pools.pop(name, None)
            else:
                pools[name] = pool.offer()
            if pools != self._pools:
                self._publish(pools)
        return pool.metadata.resource_version or version

    def _publish(self, pools: dict[str, NodePoolOffer]) -> None:
        self._pools = pools
        self._offers = tuple(pools[name] for name in sorted(pools))
        self._synced.set()
        if self._on_change is not None:
            self._on_change()
