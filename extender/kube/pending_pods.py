"""Every pod no node has taken yet, list-watched for the capacity check: its images, its
platform constraints (nodeSelector, required node affinity), its gates and its owner.

The pod watch's shape (extender.kube.pod_watch) with another field selector and a few more
fields decoded; a pod leaves the watch (DELETED) once bound, as a field-selected watch tells.
"""

from __future__ import annotations

from typing import Any

import msgspec

from extender.kube.client.api import KubeApi
from extender.kube.client.watching import ListPage
from extender.kube.pod_watch import PodListWatch, PodMeta, PodSpec, WatchedPod

PENDING = "spec.nodeName=,status.phase=Pending"
"""The pods the capacity check is sent: not bound, not finished."""


class _Gate(msgspec.Struct, frozen=True):
    name: str = ""


class _Affinity(msgspec.Struct, rename="camel", frozen=True):
    node_affinity: dict[str, Any] | None = None


class _PendingMeta(PodMeta, frozen=True):
    annotations: dict[str, str] | None = None


class _PendingSpec(PodSpec, frozen=True):
    node_selector: dict[str, str] | None = None
    affinity: _Affinity = _Affinity()
    scheduling_gates: list[_Gate] | None = None


class PendingPod(WatchedPod, frozen=True):
    """What the capacity check reads of an unbound v1.Pod."""

    metadata: _PendingMeta = _PendingMeta()
    spec: _PendingSpec = _PendingSpec()

    @property
    def gated(self) -> bool:
        """Whether a scheduling gate holds it: nothing tries to place it yet."""
        return bool(self.spec.scheduling_gates)

    def annotation(self, key: str) -> str:
        return (self.metadata.annotations or {}).get(key, "")

    def placement(self) -> dict[str, Any]:
        """Its spec's platform constraints, shaped as the pod's own JSON (for the core)."""
        spec = self.spec
        return {
            "nodeSelector": spec.node_selector,
            "affinity": {"nodeAffinity": spec.affinity.node_affinity},
        }


decode_pending_page = msgspec.json.Decoder(ListPage[PendingPod]).decode
decode_pending = msgspec.json.Decoder(PendingPod).decode


class PendingPodWatch(PodListWatch[PendingPod]):
    """List-watch of every pending pod not bound to a node, decoded into PendingPods."""

    def __init__(self, api: KubeApi, page_size: int = 500) -> None:
        super().__init__(
            api,
            PENDING,
            (decode_pending_page, decode_pending, PendingPod()),
            page_size,
            "archfit-pending-pods",
            ("pending_pod_watch_expired", "pending_pod_watch_error"),
        )
