"""One slow-registry case on the autoscaled cluster, measured: shared by tests and bench/gate.py.

A case pushes a fresh amd64-only image, makes the delaying proxy misbehave (`first`: the
first answer late, `each`: every answer late, `503`: 503 for a while), creates one pod and
waits until it binds, through a Karpenter launch.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from tests.e2e import cluster
from tests.e2e.archfit import merge
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.webhook import WebhookArchfit
from tests.support.delaying_proxy import DelayingProxy
from tests.support.images import Pusher

RELEASED = "archfit.io/released"

FAULTS = [
    ("first", 0.0),
    ("first", 1.0),
    ("first", 2.5),
    ("first", 5.0),
    ("first", 30.0),
    ("each", 1.0),
    ("503", 10.0),
]
"""(fault, seconds) of the issue's table: the first answer late, every answer late, 503s."""


@dataclass(frozen=True)
class CaseResult:
    """What one case measured."""

    created_s: float
    """How long the pod CREATE took (the webhook's part of it)."""
    held: bool
    """Whether archfit's gate held the pod."""
    bound_s: float
    """From CREATE to bound."""
    answer_to_bind_s: float | None
    """From the registry's first manifest answer to bound (None: no answer was relayed)."""
    launches: list[tuple[str, str]]
    """(arch, NodePool) of each node Karpenter launched."""
    node_arch: str
    """The architecture of the node the pod is bound to."""

    @property
    def wrong_launches(self) -> int:
        return sum(1 for arch, _ in self.launches if arch != "amd64")


def logged(hook: WebhookArchfit, event: str) -> list[dict[str, Any]]:
    """archfit's structured lines of one event, oldest first (libraries may write plain lines)."""
    lines = hook.log_path.read_text().splitlines()
    return [j for j in (json.loads(raw) for raw in lines if raw.startswith("{"))
            if j.get("event") == event]  # fmt: skip


def logged_at(line: dict[str, Any]) -> float:
    """A structured line's timestamp, as time.time()."""
    return datetime.datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")).timestamp()


def gate_settings(base: dict[str, Any], proxy: DelayingProxy, **gate: Any) -> dict[str, Any]:
    """archfit's settings for a gate case: the proxy as a plain-HTTP loopback registry, the
    gate on (or `unknown_images="admit"`), and a Lease of the case's own (a killed archfit's
    Lease must not hold up the next one)."""
    return merge(
        base,
        {
            "registry": {"hosts": {proxy.host: {"plainHttp": True}}},
            "logging": {"level": "info", "format": "json"},
            "webhook": {
                "unknownImages": gate.pop("unknown_images", "gate"),
                "gate": {
                    "maxWaitSeconds": 90,
                    "retrySeconds": 0.5,
                    "leaseName": f"archfit-releaser-{uuid.uuid4().hex[:8]}",
                    **gate,
                },
            },
        },
    )


def fresh_amd64_image(registry_url: str, proxy: DelayingProxy) -> str:
    """Push a new amd64-only image to the registry; its name through the proxy."""
    tag = uuid.uuid4().hex[:10]
    Pusher(registry_url).single(f"e2e/gate-{tag}", tag, "linux/amd64")
    return f"{proxy.host}/e2e/gate-{tag}:{tag}"


def run_case(
    autoscaled: AutoscaledCluster,
    namespace: str,
    proxy: DelayingProxy,
    reference: str,
    fault: str,
    seconds: float,
    name: str = "slow",
) -> CaseResult:
    """Make the proxy misbehave, create the pod, wait until it binds, and measure."""
    {"first": proxy.delay_first, "each": proxy.delay_each, "503": proxy.fail_for}[fault](seconds)
    started = time.monotonic()
    cluster.create_pod(autoscaled.core, namespace, cluster.pod_manifest(name, [reference]))
    created = time.monotonic() - started
    node = autoscaled.wait_scheduled(namespace, name)
    bound_at = time.time()
    bound = time.monotonic() - started
    pod = autoscaled.core.read_namespaced_pod(name, namespace)
    answered = proxy.first_answer()
    launches = [(launch.arch, launch.nodepool) for launch in autoscaled.launches()]
    arch = {launch.name: launch.arch for launch in autoscaled.launches()}.get(node, "?")
    return CaseResult(
        created_s=created,
        held=RELEASED in (pod.metadata.annotations or {}),
        bound_s=bound,
        answer_to_bind_s=None if answered is None else bound_at - answered,
        launches=sorted(set(launches)),
        node_arch=arch,
    )
