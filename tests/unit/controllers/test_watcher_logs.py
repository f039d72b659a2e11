"""The watcher's previous-log reads (extender.controllers.watcher): one queued read per
crash-looping container, its latest restart, dropped when the pod goes, counted in a gauge."""

from __future__ import annotations

from typing import Any

import orjson

from extender.config.settings import WatcherSettings
from extender.controllers.watcher import Watcher
from extender.kube.pod_watch import WatchedPod, decode_pod
from extender.metrics import Metrics
from extender.resolution.within_deadline import Resolution
from tests.support.fakes import FunctionResolver, RecordingPodCalls

IMAGE = "registry.example/app:1"


async def _nothing(image: str, pull: Any) -> Any:
    raise AssertionError("the log queue resolves nothing")


def _looping(index: int, restarts: int) -> WatchedPod:
    """A pod whose container crash-loops with no platform message (its log must tell)."""
    status = {
        "name": "c0",
        "image": IMAGE,
        "restartCount": restarts,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
    }
    raw = {
        "metadata": {"name": f"p{index}", "namespace": "ns", "uid": f"uid-{index}"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c0", "image": IMAGE}]},
        "status": {"containerStatuses": [status]},
    }
    return decode_pod(orjson.dumps(raw))


def _watcher(calls: RecordingPodCalls, metrics: Metrics) -> Watcher:
    settings = WatcherSettings(logs_per_second=1e9, events_per_second=1e9)
    return Watcher(settings, metrics, calls, Resolution(FunctionResolver(_nothing)), None, None)


async def test_a_thousand_crash_loops_queue_one_read_each_and_read_only_the_latest_restart() -> (
    None
):
    """1,000 containers restarting three times each wait as 1,000 reads, not 3,000; a deleted
    pod's read leaves the queue; each read is of the latest restart."""
    calls, metrics = RecordingPodCalls(), Metrics()
    watcher = _watcher(calls, metrics)
    for restarts in (1, 2, 3):
        for index in range(1_000):
            watcher.on_pod("MODIFIED", _looping(index, restarts))
    queued = metrics.watcher_log_queue._value.get()
    for index in range(10):
        watcher.on_pod("DELETED", _looping(index, 3))
    after_deletes = metrics.watcher_log_queue._value.get()
    await watcher.drain()
    assert (1_000.0, 990.0, 0.0) == (queued, after_deletes, metrics.watcher_log_queue._value.get())
    assert 990 == len(calls.log_reads)
    assert {3} == {restarts for _, _, restarts in calls.log_reads}


async def test_a_genuine_exec_format_error_is_found_behind_a_thousand_unrelated_crash_loops() -> (
    None
):
    """The one container whose log says exec format error is read once and reported."""
    calls, metrics = RecordingPodCalls(), Metrics()
    watcher = _watcher(calls, metrics)
    for restarts in (1, 2, 3):
        for index in range(1_000):
            watcher.on_pod("MODIFIED", _looping(index, restarts))
    genuine = _looping(5_000, 1)
    calls.logs[(genuine.uid, "c0")] = (
        "/entrypoint.sh: line 4: /app: cannot execute binary file: Exec format error"
    )
    watcher.on_pod("ADDED", genuine)
    await watcher.drain()
    assert [genuine.uid] == [uid for uid, _, _ in calls.log_reads if uid == genuine.uid]
    assert 1 == watcher.findings
