"""The shared pod feed (extender.kube.pod_feed) and what the publisher reads of each pod
(extender.kube.pod_watch.WatchedPod.use): images, namespace, credentials, workload; nothing
for pods the policy never reads again."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from email.message import Message
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from bench.pod_watch import pod as realistic_pod
from extender.core.image_uses import PodUse
from extender.core.pods import PullSecretsRef
from extender.kube.client.api import connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.pod_feed import PodFeed
from extender.kube.pod_watch import BOUND, Handoff, decode_pod
from tests.support.json_server import json_server
from tests.support.waiting import wait_for_async


def test_a_realistic_pod_names_its_images_credentials_and_workload() -> None:
    """A Deployment's pod as kube-apiserver returns it (5 KB): only what the table needs."""
    raw = realistic_pod(1, nodes=10, version=3)
    raw["spec"]["initContainers"] = [{"name": "init", "image": "busybox:1.36"}]
    raw["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    use = decode_pod(orjson.dumps(raw)).use()
    image = raw["spec"]["containers"][0]["image"]
    assert (
        PodUse("ns-1", ("busybox:1.36", image), PullSecretsRef("ns-1", ("regcred",), "default"),
               "ReplicaSet/app-1-7d9f8c6b5")
        == use
    )  # fmt: skip


def test_finished_and_daemonset_pods_name_nothing() -> None:
    """A Succeeded or Failed pod will not be replaced by itself; a DaemonSet's pods the
    policy leaves alone: neither counts."""
    finished = realistic_pod(2, nodes=10, version=3)
    finished["status"]["phase"] = "Succeeded"
    daemon = realistic_pod(3, nodes=10, version=3)
    daemon["metadata"]["ownerReferences"][0]["kind"] = "DaemonSet"
    assert [None, None] == [decode_pod(orjson.dumps(p)).use() for p in (finished, daemon)]


def _unbound(index: int) -> dict[str, Any]:
    pod = realistic_pod(index, 10, 1)
    pod["spec"].pop("nodeName", None)
    pod["metadata"]["name"] = f"pending-{index}"
    return pod


class _Server:
    """A kube-apiserver stand-in over HTTP: lists `pods` (honouring the bound selector) and
    ends each watch at once; keeps every query."""

    def __init__(self) -> None:
        self.asked: list[dict[str, list[str]]] = []
        self.pods = [realistic_pod(4, 10, 1), _unbound(5)]

    def answer(self, path: str, _headers: Message) -> Any:
        query = parse_qs(urlsplit(path).query)
        self.asked.append(query)
        if "watch" in query:
            return b""
        bound_only = query.get("fieldSelector") == [BOUND]
        items = [p for p in self.pods if p["spec"].get("nodeName") or not bound_only]
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    def lists(self) -> list[list[str] | None]:
        return [q.get("fieldSelector") for q in self.asked if "watch" not in q]


async def test_one_list_serves_both_readers_and_the_watcher_is_told_only_bound_pods() -> None:
    """The watcher alone lists bound pods; once the publisher joins, the feed lists every pod
    once for both (a pending pod names images too) and the watcher is still never told of a
    pod no node has taken; each reader sees LISTING first and SYNCED last."""
    server = _Server()
    watcher: list[tuple[str, str]] = []
    publisher: list[tuple[str, str]] = []
    with json_server(server.answer) as url:
        feed = PodFeed(connect(RestConfig(host=url)))
        try:
            await feed.join(lambda k, p: watcher.append((k, p.metadata.name)), bound_only=True)
            await wait_for_async(lambda: ("SYNCED", "") in watcher, "the watcher's list")
            assert [[BOUND]] == server.lists()
            watcher.clear()
            await feed.join(lambda k, p: publisher.append((k, p.metadata.name)), bound_only=False)
            await wait_for_async(lambda: ("SYNCED", "") in publisher, "the shared list")
            assert [[BOUND], None] == server.lists()[:2]
            assert feed.selector == ""
        finally:
            await feed.stop()
    bound = realistic_pod(4, 10, 1)["metadata"]["name"]
    assert [("LISTING", ""), ("ADDED", bound), ("SYNCED", "")] == watcher[:3]
    assert [("LISTING", ""), ("ADDED", bound), ("ADDED", "pending-5"), ("SYNCED", "")] == (
        publisher[:4]
    )
    assert feed.selector is None


async def test_the_last_reader_to_leave_stops_the_list_watch() -> None:
    """A replica that stops leading lists no pods: nothing is asked after the last leaves."""
    server = _Server()
    told: list[str] = []
    with json_server(server.answer) as url:
        feed = PodFeed(connect(RestConfig(host=url)))
        reader = await feed.join(lambda kind, _pod: told.append(kind), bound_only=False)
        await wait_for_async(lambda: "SYNCED" in told, "a list")
        await feed.leave(reader)
        told.clear()
        await wait_for_async(lambda: feed.selector is None, "the list-watch stopped")
        asked = len(server.asked)
        await asyncio.sleep(0.3)
    assert (asked, []) == (len(server.asked), told)


async def test_readers_that_join_together_share_one_list_and_one_leaving_lists_nothing() -> None:
    """The watcher's and the publisher's Leases are taken within moments of each other (and
    again after kube-apiserver restarts): one list for both; the publisher leaving leaves the
    watcher its watch, without a list."""
    server = _Server()
    watcher: list[str] = []
    with json_server(server.answer) as url:
        feed = PodFeed(connect(RestConfig(host=url)), settle_seconds=0.2)
        try:
            await feed.join(lambda kind, _pod: watcher.append(kind), bound_only=True)
            publisher = await feed.join(lambda _kind, _pod: None, bound_only=False)
            await wait_for_async(lambda: "SYNCED" in watcher, "the list")
            await feed.leave(publisher)
            await asyncio.sleep(0.4)
            lists = server.lists()
        finally:
            await feed.stop()
    assert [None] == lists
    assert 1 == watcher.count("LISTING")


@contextlib.contextmanager
def counted_wakeups(loop: asyncio.AbstractEventLoop) -> Iterator[list[int]]:
    """Counts the loop's `call_soon_threadsafe` calls (each a self-pipe write and a wake-up)
    in the list's one item while the block runs."""
    count = [0]
    real = loop.call_soon_threadsafe

    def counted(*args: Any) -> Any:
        count[0] += 1
        return real(*args)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        del loop.call_soon_threadsafe


async def test_the_loop_is_woken_once_per_batch_and_tells_a_slice_at_a_time() -> None:
    """Pods queued by the thread while no drain is due cost one wake-up; the loop tells them in
    slices (a clock that moves 1 s per look ends each slice at its first look), in order."""
    loop = asyncio.get_running_loop()
    told: list[int] = []
    slices: list[int] = []
    ticks = iter(float(i) for i in range(10_000))
    handoff: Handoff[Any] = Handoff(
        loop, lambda _kind, pod: told.append(pod), slice_seconds=0.5, clock=lambda: next(ticks)
    )
    with counted_wakeups(loop) as wakeups:
        stop = threading.Event()
        thread = threading.Thread(
            target=lambda: [handoff.put("ADDED", i, stop) for i in range(100)]
        )
        thread.start()
        thread.join()
        assert [1] == wakeups
        while len(told) < 100:
            slices.append(len(told))
            await asyncio.sleep(0)
    assert list(range(100)) == told
    assert len(slices) >= 3  # 32 pods a slice: the loop ran other work between them


async def test_pods_that_trickle_in_within_the_linger_wake_the_loop_once() -> None:
    """A watch's events come one at a time: after the first wake-up the loop looks again on
    its own timer, so 19 more pods queued within the linger cost no wake-up of their own,
    and all are told, in order."""
    loop = asyncio.get_running_loop()
    told: list[int] = []
    handoff: Handoff[Any] = Handoff(loop, lambda _kind, pod: told.append(pod), linger_seconds=2)

    def trickle() -> None:
        stop = threading.Event()
        handoff.put("ADDED", 0, stop)
        while not told:  # the loop took the first one, and lingers
            time.sleep(0.001)
        for i in range(1, 20):
            time.sleep(0.001)  # time enough for the loop to take each one alone
            handoff.put("ADDED", i, stop)

    with counted_wakeups(loop) as wakeups:
        await asyncio.to_thread(trickle)
        await wait_for_async(lambda: len(told) == 20, "every pod told")
    assert list(range(20)) == told
    assert 2 >= wakeups[0]  # the first pod's, and asyncio.to_thread's own


def _holding_the_loop_until(done: Callable[[], bool], then: list[int]) -> int:
    """Block the calling thread (the event loop, on purpose: nothing is told meanwhile) until
    `done`, a moment more, then say how long `then` is."""
    deadline = time.monotonic() + 30
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # a thread that did not wait would have gone on meanwhile
    return len(then)


async def test_a_full_queue_makes_the_thread_wait_for_the_loop() -> None:
    """A relist is decoded no faster than the loop takes it: with room for 10, the thread has
    queued 10 (and waits) before the loop has told any."""
    loop = asyncio.get_running_loop()
    told: list[int] = []
    handoff: Handoff[Any] = Handoff(loop, lambda _kind, pod: told.append(pod), limit=10)
    stop = threading.Event()
    put: list[int] = []

    def produce() -> None:
        for i in range(50):
            handoff.put("ADDED", i, stop)
            put.append(i)

    thread = threading.Thread(target=produce)
    thread.start()
    waiting = _holding_the_loop_until(lambda: len(put) >= 9, then=put)
    await wait_for_async(lambda: len(told) == 50, "every pod told")
    thread.join()
    assert 9 == waiting  # the tenth is queued, and its put waits for room
    assert list(range(50)) == told
