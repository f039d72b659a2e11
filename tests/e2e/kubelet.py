"""A stand-in for the kubelets of the Nodes Karpenter launches: it makes them Ready.

Karpenter's kwok provider only creates Node objects (with capacity, allocatable and
Karpenter's `karpenter.sh/unregistered` taint). A kubelet would then report Ready, and
the node lifecycle controller would lift the `node.kubernetes.io/not-ready` taint that
admission put on the new Node. Neither runs here, so a thread does both, and records
every Node it sees as a launch. The unregistered taint stays Karpenter's to remove.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kubernetes import client

from extender.core.platforms import ARCH_LABEL, OS_LABEL
from tests.e2e import cluster
from tests.e2e.karpenter import INSTANCE_TYPE_LABEL, KWOK_NODE_ANNOTATION, NODEPOOL_LABEL

NOT_READY_TAINT = "node.kubernetes.io/not-ready"


@dataclass(frozen=True)
class Launch:
    """One Node Karpenter launched."""

    name: str
    arch: str
    nodepool: str
    instance_type: str

    def __str__(self) -> str:
        return f"{self.name}: {self.arch} from {self.nodepool} ({self.instance_type})"


def launch_of(node: client.V1Node) -> Launch:
    """What Karpenter launched, read from the labels it put on the Node."""
    labels = node.metadata.labels or {}
    return Launch(
        name=str(node.metadata.name),
        arch=labels.get(ARCH_LABEL, "?"),
        nodepool=labels.get(NODEPOOL_LABEL, "?"),
        instance_type=labels.get(INSTANCE_TYPE_LABEL, "?"),
    )


def is_launched(node: client.V1Node) -> bool:
    """Whether the Node came from Karpenter's kwok provider."""
    key, value = KWOK_NODE_ANNOTATION
    return bool((node.metadata.annotations or {}).get(key) == value)


def is_ready(node: client.V1Node) -> bool:
    """Whether the Node reports the Ready condition True."""
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


class StandInKubelet:
    """Polls the Nodes; makes each launched one Ready and lifts its not-ready taint."""

    def __init__(self, api_client: client.ApiClient, interval: float = 0.2) -> None:
        self._core = client.CoreV1Api(api_client)
        self._interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stand-in-kubelet", daemon=True)
        self._lock = threading.Lock()
        self._launches: dict[str, Launch] = {}
        self.last_error: BaseException | None = None

    def start(self) -> StandInKubelet:
        """Start polling in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling and wait for the thread to end."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def launches(self) -> list[Launch]:
        """Every launched Node seen since the last forget(), in the order they appeared."""
        with self._lock:
            return list(self._launches.values())

    def forget(self) -> None:
        """Start a fresh record of launches."""
        with self._lock:
            self._launches.clear()

    def sync(self) -> None:
        """One pass over the Nodes: record launches, report Ready, lift not-ready."""
        for node in self._core.list_node().items:
            if not is_launched(node):
                continue
            with self._lock:
                self._launches.setdefault(str(node.metadata.name), launch_of(node))
            # Taints first: that patch is conditional on the version just read.
            self._lift_not_ready(node)
            if not is_ready(node):
                labels = node.metadata.labels or {}
                status = cluster.ready_status(labels.get(ARCH_LABEL, ""), labels.get(OS_LABEL, ""))
                self._core.patch_node_status(node.metadata.name, {"status": status})

    def _lift_not_ready(self, node: client.V1Node) -> None:
        taints = node.spec.taints or []
        serialize = self._core.api_client.sanitize_for_serialization
        kept = [serialize(t) for t in taints if t.key != NOT_READY_TAINT]
        if len(kept) == len(taints):
            return
        # Karpenter edits the same taint list (it lifts karpenter.sh/unregistered), so
        # write only over the version read; a conflict is retried on the next pass.
        self._core.patch_node(
            node.metadata.name,
            {
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": kept},
            },
        )

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                self.sync()
            except Exception as error:
                # A conflict or a hiccup is retried on the next pass; one that persists
                # is kept for a failing scenario's message.
                self.last_error = error
            else:
                self.last_error = None
