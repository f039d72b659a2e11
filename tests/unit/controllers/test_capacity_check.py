"""The capacity check (extender.controllers.capacity) fed pending pods as their watch decodes
them, its API calls recorded by tests.support.fakes.RecordingPodCalls: what it tells, where, how
often, and what it leaves alone. The real apiserver and Karpenter are in
tests/e2e/test_capacity.py."""

from __future__ import annotations

from typing import Any

import orjson

from extender.config.loading import from_mapping
from extender.config.rules import mutation_rules_of
from extender.controllers.capacity import SHORTFALL_REASON, CapacityCheck
from extender.core.capacity import Capacity, NodePoolOffer
from extender.core.platforms import Platform, parse
from extender.core.pods import PullSecretsRef
from extender.kube.pending_pods import PendingPod, decode_pending
from extender.metrics import Metrics
from extender.resolution.within_deadline import Resolution
from tests.support.clock import FakeClock
from tests.support.fakes import FunctionResolver, RecordingPodCalls

API = "docker.io/acme/api:1.2"
OWNER = ("ReplicaSet", "api-7d9c6b5f4")
GRAVITON = NodePoolOffer("graviton", frozenset({parse("linux/arm64")}))
GENERAL = NodePoolOffer("general", frozenset({parse("linux/amd64")}))


def pending(
    name: str,
    *,
    image: str = API,
    owner: tuple[str, str] | None = OWNER,
    gated: bool = False,
    namespace: str = "shop",
    annotations: dict[str, str] | None = None,
) -> PendingPod:
    """An unbound pod whose one container runs `image`, the webhook's arch In [amd64] on it."""
    owners = [{"kind": owner[0], "name": owner[1], "controller": True}] if owner else []
    term = {
        "matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    }
    raw: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "ownerReferences": owners,
            "annotations": annotations or {},
        },
        "spec": {
            "containers": [{"name": "api", "image": image}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            },
            "schedulingGates": [{"name": "archfit.io/platforms-unknown"}] if gated else [],
        },
    }
    return decode_pending(orjson.dumps(raw))


async def _amd64_only(image: str, pull: PullSecretsRef) -> frozenset[Platform]:
    if image != API:
        raise LookupError(f"{image}: not found")
    return frozenset({parse("linux/amd64")})


class Cluster:
    """A capacity the test changes."""

    def __init__(self, *pools: NodePoolOffer) -> None:
        self.now = Capacity(frozenset(), pools)

    def __call__(self) -> Capacity:
        return self.now


def check(calls: RecordingPodCalls, metrics: Metrics, cluster: Cluster) -> CapacityCheck:
    settings = from_mapping({"capacity": {"eventsPerSecond": 1e9}})
    return CapacityCheck(
        settings,
        mutation_rules_of(settings),
        metrics,
        calls,
        Resolution(FunctionResolver(_amd64_only)),
        cluster,
        clock=FakeClock(),
    )


def value(metric: Any, *labels: str) -> float:
    return float((metric.labels(*labels) if labels else metric)._value.get())


async def test_a_pod_no_capacity_runs_is_told_once_on_itself_and_its_controller():
    """One Warning Event on the pod and one on its controller, in the extender's words,
    however often the pod is told again; the gauge counts it."""
    calls, metrics = RecordingPodCalls(), Metrics()
    subject = check(calls, metrics, Cluster(GRAVITON))
    for kind in ("ADDED", "MODIFIED", "MODIFIED"):
        subject.on_pod(kind, pending("api-1"))
    await subject.drain()
    message = (
        "no node or NodePool offers linux/amd64 for docker.io/acme/api:1.2; NodePools: "
        "graviton (arm64)"
    )
    assert [
        ("shop", ("v1", "Pod", "api-1"), SHORTFALL_REASON, message),
        ("shop", ("apps/v1", *OWNER), SHORTFALL_REASON, message),
    ] == calls.events
    assert (1.0, 1.0, 1.0) == (
        value(metrics.capacity_short_pods),
        value(metrics.capacity_events, "pod"),
        value(metrics.capacity_events, "controller"),
    )


async def test_the_replicas_of_one_controller_tell_it_once():
    """Fifty pods of one ReplicaSet: fifty pod Events, one on the controller."""
    calls, metrics = RecordingPodCalls(), Metrics()
    subject = check(calls, metrics, Cluster(GRAVITON))
    for index in range(50):
        subject.on_pod("ADDED", pending(f"api-{index}"))
    await subject.drain()
    kinds = [regarding[1] for _, regarding, _, _ in calls.events]
    assert (50, 1) == (kinds.count("Pod"), kinds.count(OWNER[0]))
    assert 50.0 == value(metrics.capacity_short_pods)


async def test_pods_archfit_does_not_speak_of_are_left_alone():
    """Gated (nothing places it yet), skipped, in an excluded namespace, a DaemonSet's, or
    with an image whose platforms are unknown: no Event, not counted."""
    calls, metrics = RecordingPodCalls(), Metrics()
    subject = check(calls, metrics, Cluster(GRAVITON))
    for pod in (
        pending("gated", gated=True),
        pending("skipped", annotations={"archfit.io/skip": "true"}),
        pending("system", namespace="kube-system"),
        pending("daemon", owner=("DaemonSet", "agent")),
        pending("unknown", image="docker.io/acme/gone:1"),
    ):
        subject.on_pod("ADDED", pod)
    await subject.drain()
    assert ([], 0.0) == (calls.events, value(metrics.capacity_short_pods))


async def test_new_capacity_clears_the_count_and_lost_capacity_tells_again():
    """An amd64 NodePool added: no pod is short any more. Taken away again: the pod is told
    again (an unchanged capacity judges nothing again)."""
    calls, metrics = RecordingPodCalls(), Metrics()
    cluster = Cluster(GRAVITON)
    subject = check(calls, metrics, cluster)
    subject.on_pod("ADDED", pending("api-1", owner=None))
    await subject.drain()
    counts = [value(metrics.capacity_short_pods)]
    cluster.now = Capacity(frozenset(), (GRAVITON, GENERAL))
    subject.recheck()
    await subject.drain()
    counts.append(value(metrics.capacity_short_pods))
    subject.recheck()  # unchanged: nothing judged again
    cluster.now = Capacity(frozenset(), (GRAVITON,))
    subject.recheck()
    await subject.drain()
    counts.append(value(metrics.capacity_short_pods))
    assert [1.0, 0.0, 1.0] == counts
    assert 2 == len(calls.events)


async def test_a_pod_bound_deleted_or_left_out_of_a_relist_is_forgotten():
    """DELETED (bound pods leave the field-selected watch so) and a relist that does not tell
    it before SYNCED both forget a pod."""
    calls, metrics = RecordingPodCalls(), Metrics()
    subject = check(calls, metrics, Cluster(GRAVITON))
    for name in ("api-1", "api-2", "api-3"):
        subject.on_pod("ADDED", pending(name))
    subject.on_pod("SYNCED", PendingPod())
    await subject.drain()
    counts = [value(metrics.capacity_short_pods)]
    subject.on_pod("DELETED", pending("api-1"))
    counts.append(value(metrics.capacity_short_pods))
    subject.on_pod("ADDED", pending("api-2"))  # the relist tells api-2 only
    subject.on_pod("SYNCED", PendingPod())
    await subject.drain()
    counts.append(value(metrics.capacity_short_pods))
    assert [3.0, 2.0, 1.0] == counts
    assert {"uid-api-2"} == set(subject.short)
