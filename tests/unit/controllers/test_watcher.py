"""The mismatch watcher (extender.controllers.watcher) fed pods as the pod watch decodes them,
its API calls recorded by tests.support.fakes.RecordingPodCalls: what it reports, where, how
often, what it forgets, and what it evicts. The real apiserver's side is in
tests/e2e/test_mismatch.py."""

from __future__ import annotations

from typing import Any

import orjson

from extender.config.settings import WatcherSettings
from extender.controllers.watcher import EVICTED_REASON, FINDING_REASON, Watcher
from extender.core.platforms import Platform, parse
from extender.core.pods import PullSecretsRef
from extender.kube.pod_watch import WatchedPod, decode_pod
from extender.metrics import Metrics
from extender.resolution.within_deadline import Resolution
from tests.objects import node
from tests.support.clock import FakeClock
from tests.support.fakes import FunctionResolver, RecordingPodCalls, StaticNodes

IMAGE = "registry.example/web:1"
NO_ARM64 = "no matching manifest for linux/arm64 in the manifest list entries"
AMD64_ONLY = frozenset({parse("linux/amd64")})
OWNER = ("ReplicaSet", "web-7d9c6b5f4")


def watched(
    name: str,
    *,
    waiting: tuple[str, str] = ("ErrImagePull", NO_ARM64),
    ready: bool = False,
    owner: tuple[str, str] | None = OWNER,
) -> WatchedPod:
    """A pod on the arm64 node whose one container waits for `waiting` (reason, message)."""
    reason, message = waiting
    owners = [{"kind": owner[0], "name": owner[1], "controller": True}] if owner else []
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}"}
        | ({"ownerReferences": owners} if owners else {}),
        "spec": {"nodeName": "arm-1", "containers": [{"name": "web", "image": IMAGE}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [
                {
                    "name": "web",
                    "image": IMAGE,
                    "state": {"waiting": {"reason": reason, "message": message}},
                }
            ],
        },
    }
    return decode_pod(orjson.dumps(raw))


async def _amd64_only(image: str, pull: PullSecretsRef) -> frozenset[Platform]:
    return AMD64_ONLY


def watcher(calls: RecordingPodCalls, metrics: Metrics, *, remediate: bool = False) -> Watcher:
    settings = WatcherSettings(
        remediate=remediate, events_per_second=1e9, logs_per_second=1e9, evictions_per_minute=1e9
    )
    return Watcher(
        settings,
        metrics,
        calls,
        Resolution(FunctionResolver(_amd64_only)),
        StaticNodes(node("arm-1", "arm64"), node("amd-1", "amd64")),
        None,
        clock=FakeClock(),
    )


def value(metric: Any, *labels: str) -> float:
    return float((metric.labels(*labels) if labels else metric)._value.get())


async def test_a_pull_without_an_arm64_manifest_is_reported_once_on_the_pod_and_its_controller():
    """One Warning Event on the pod and one on its controller, however often the pod is
    told again; counted, and the pod counts as failing on its platform."""
    calls, metrics = RecordingPodCalls(), Metrics()
    subject = watcher(calls, metrics)
    for kind in ("ADDED", "MODIFIED", "MODIFIED"):
        subject.on_pod(kind, watched("web-1"))
    await subject.drain()
    assert [
        ("shop", ("v1", "Pod", "web-1"), FINDING_REASON),
        ("shop", ("apps/v1", *OWNER), FINDING_REASON),
    ] == [(namespace, regarding, reason) for namespace, regarding, reason, _ in calls.events]
    assert 1 == len({message for _, _, _, message in calls.events})
    assert (1.0, 1.0, 1) == (
        value(metrics.mismatch_findings, "pull"),
        value(metrics.mismatch_pods),
        subject.findings,
    )


async def test_a_pod_deleted_or_left_out_of_a_relist_is_forgotten_and_reported_anew():
    """DELETED forgets a pod; so does a relist that does not tell it before SYNCED. A pod
    forgotten and seen failing again is a new finding."""
    calls, metrics = RecordingPodCalls(), Metrics()
    subject = watcher(calls, metrics)
    for name in ("web-1", "web-2", "web-3"):
        subject.on_pod("ADDED", watched(name))
    subject.on_pod("SYNCED", WatchedPod())
    failing = [value(metrics.mismatch_pods)]
    subject.on_pod("DELETED", watched("web-1"))
    failing.append(value(metrics.mismatch_pods))
    subject.on_pod("ADDED", watched("web-2"))  # the relist tells web-2 only
    subject.on_pod("SYNCED", WatchedPod())
    failing.append(value(metrics.mismatch_pods))
    subject.on_pod("ADDED", watched("web-3"))
    await subject.drain()
    assert [3.0, 2.0, 1.0] == failing
    assert 4 == subject.findings


async def test_with_remediate_a_failing_pod_whose_image_lacks_its_nodes_platform_is_evicted():
    """Not Ready, failing, owned by a controller, on an arm64 node, its image amd64-only:
    evicted once, with an Event that says why. A Ready pod and a bare pod are left alone."""
    calls, metrics = RecordingPodCalls(), Metrics()
    subject = watcher(calls, metrics, remediate=True)
    crash = ("CrashLoopBackOff", "back-off restarting failed container")
    subject.on_pod("ADDED", watched("stuck", waiting=crash))
    subject.on_pod("MODIFIED", watched("stuck", waiting=crash))
    subject.on_pod("ADDED", watched("serving", waiting=crash, ready=True))
    subject.on_pod("ADDED", watched("bare", waiting=crash, owner=None))
    await subject.drain()
    assert ["stuck"] == [pod.metadata.name for pod in calls.evicted]
    ((regarding, reason, message),) = [(r, why, m) for _, r, why, m in calls.events]
    assert (("v1", "Pod", "stuck"), EVICTED_REASON) == (regarding, reason)
    assert f"{IMAGE} cannot run on linux/arm64" in message
    assert 1.0 == value(metrics.mismatch_evictions, "evicted")


async def test_without_remediate_nothing_is_evicted():
    """The same stuck pod, with watcher.remediate off: reported where it applies, never
    evicted."""
    calls, metrics = RecordingPodCalls(), Metrics()
    subject = watcher(calls, metrics)
    subject.on_pod("ADDED", watched("stuck", waiting=("CrashLoopBackOff", "back-off")))
    await subject.drain()
    assert ([], 0.0) == (calls.evicted, value(metrics.mismatch_evictions, "evicted"))
