"""The publisher of the admission policy's parameter: pods in, the object out, with a store
in memory and the real learned resolver over a registry stand-in (no cluster)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from structlog.testing import capture_logs

from extender.config.registry_settings import CacheSettings
from extender.config.settings import AdmissionPolicySettings
from extender.controllers.publisher import Publisher
from extender.core.image_table import Switches
from extender.core.mismatch import Evidence
from extender.core.mutation import MutationRules
from extender.core.parameter import TIME_EPOCH, PublishedTable, read_spec
from extender.core.platforms import Platform, parse
from extender.metrics import Metrics
from extender.resolution.evidence_book import EvidenceBook
from extender.resolution.learned_resolver import LearnedResolver
from tests.support.clock import FakeClock
from tests.support.fakes import AnsweringRegistry, ListedPod, MemoryStore
from tests.support.waiting import wait_for_async

AMD = frozenset({parse("linux/amd64")})
ARM = frozenset({parse("linux/arm64")})
CLUSTER = AMD | ARM
RULES = MutationRules(platforms=CLUSTER, arch_preference={"arm64": 10})
SWITCHES = Switches(True, True, True, ("excluded",), ("kube-system", "archfit-system"))
START = TIME_EPOCH + 5_000_000.0


@dataclasses.dataclass
class Made:
    publisher: Publisher
    store: MemoryStore
    registry: AnsweringRegistry
    book: EvidenceBook
    metrics: Metrics
    clock: FakeClock
    wall: FakeClock


def made(
    answers: dict[str, tuple[str, frozenset[Platform]]],
    store: MemoryStore | None = None,
    *,
    workers: int = 4,
    **settings: Any,
) -> Made:
    clock, wall = FakeClock(), FakeClock(START)
    registry = AnsweringRegistry(answers)
    book = EvidenceBook(CacheSettings(), wall=wall)
    learned = LearnedResolver(registry, book)
    metrics = Metrics()
    values = {"enabled": True, "refresh_seconds": 60, "unused_seconds": 600, **settings}
    store = store or MemoryStore()
    publisher = Publisher(
        AdmissionPolicySettings(**values),
        learned,
        book,
        lambda: RULES,
        SWITCHES,
        store,
        metrics,
        wall_clock=wall,
        clock=clock,
        workers=workers,
    )
    return Made(publisher, store, registry, book, metrics, clock, wall)


async def seen(made: Made, *pods: ListedPod) -> None:
    """List `pods` as a (re)list does, and wait until every image they name is answered or
    has failed once."""
    publisher = made.publisher
    publisher.on_pod("LISTING", ListedPod(""))
    for pod in pods:
        publisher.on_pod("ADDED", pod)
    publisher.on_pod("SYNCED", ListedPod(""))
    await settled(made)


async def settled(made: Made) -> None:
    publisher = made.publisher

    def done() -> bool:
        return not publisher._new and not publisher._due and not publisher._busy

    await wait_for_async(done, "the publisher's lookups")


def listed(made: Made) -> dict[str, frozenset[Platform] | None]:
    assert made.store.spec is not None
    table = PublishedTable.of(read_spec(made.store.spec))
    return {key: table.platforms_of(key) for key in table.images}


@pytest.fixture
async def started() -> Any:
    makers: list[Made] = []

    def start(*args: Any, **kwargs: Any) -> Made:
        found = made(*args, **kwargs)
        found.publisher.start()
        makers.append(found)
        return found

    yield start
    for found in makers:
        await found.publisher.aclose()


async def test_a_pods_image_is_published_once_resolved_and_not_rewritten_unchanged(
    started: Any,
) -> None:
    """Every image a pod names reaches the object with its exact set; a round with nothing
    new writes nothing."""
    m = started({"web:1": ("sha256:w", CLUSTER), "init:1": ("sha256:i", AMD)})
    await seen(m, ListedPod("a", images=("init:1", "web:1")))
    await m.publisher.publish_once()
    await m.publisher.publish_once()
    assert ({"init:1": AMD, "web:1": CLUSTER}, 1) == (listed(m), m.store.writes)
    assert (2.0, 2, 1) == (
        m.metrics.policy_images._value.get(),
        m.store.status["inUse"],
        m.store.status["pods"],
    )


async def test_a_running_pods_image_stays_past_unused_seconds_and_leaves_after_its_last_pod(
    started: Any,
) -> None:
    """Use is the pod's existence, not its CREATE: the image stays while the pod runs, and
    leaves unusedSeconds after the pod is gone."""
    m = started({"web:1": ("sha256:w", AMD)})
    await seen(m, ListedPod("a"))
    await m.publisher.publish_once()
    m.clock.advance(10_000)
    m.wall.advance(10_000)
    await m.publisher.publish_once()
    assert ["web:1"] == list(listed(m))
    m.publisher.on_pod("DELETED", ListedPod("a"))
    m.clock.advance(599)
    await m.publisher.publish_once()
    assert ["web:1"] == list(listed(m))
    m.clock.advance(2)
    await m.publisher.publish_once()
    assert {} == listed(m)


async def test_finished_pods_and_pods_of_excluded_namespaces_name_nothing(started: Any) -> None:
    """A Succeeded pod and a pod of policy.excludedNamespaces (or of a never-held one) are
    not looked up and not listed."""
    m = started({"a:1": ("sha256:a", AMD), "b:1": ("sha256:b", AMD), "c:1": ("sha256:c", AMD)})
    await seen(
        m,
        ListedPod("done", images=("a:1",), finished=True),
        ListedPod("x", namespace="excluded", images=("b:1",)),
        ListedPod("k", namespace="kube-system", images=("c:1",)),
    )
    await m.publisher.publish_once()
    assert ({}, []) == (listed(m), m.registry.asked)


async def test_a_lookup_failing_with_one_namespaces_credentials_tries_anothers(
    started: Any,
) -> None:
    """Keyed by reference alone, an image is resolved with the credentials of another
    namespace that names it when the first cannot read it."""
    m = started({"private:1": ("sha256:p", ARM)})
    m.registry.refuse.add(("private:1", "aaa"))
    await seen(
        m,
        ListedPod("a", namespace="aaa", images=("private:1",)),
        ListedPod("b", namespace="bbb", images=("private:1",)),
    )
    await m.publisher.publish_once()
    assert ({"private:1": ARM}, [("private:1", "aaa"), ("private:1", "bbb")]) == (
        {k: v for k, v in listed(m).items() if k == "private:1"},
        [asked for asked in m.registry.asked if asked[0] == "private:1"],
    )


async def test_a_new_leader_keeps_carried_times_and_resolves_the_oldest_first(
    started: Any,
) -> None:
    """Entries taken over keep the resolved-at time their former leader published, and are
    resolved again oldest first once due."""
    answers = {f"img-{n}:1": (f"sha256:{n}", AMD) for n in range(3)}
    first = started(answers)
    pods: list[ListedPod] = []
    for n in (2, 0, 1):  # img-2 resolved first, then img-0, then img-1
        pods.append(ListedPod(f"p{n}", images=(f"img-{n}:1",)))
        await seen(first, *pods)
        await first.publisher.publish_once()
        first.wall.advance(1)
    assert first.store.spec is not None
    carried = PublishedTable.of(read_spec(first.store.spec))
    times = {key: carried.unpacked(key).resolved_at for key in carried.images}  # type: ignore[union-attr]
    assert [START, START + 1, START + 2] == [times["img-2:1"], times["img-0:1"], times["img-1:1"]]

    successor = made(answers, MemoryStore(first.store.spec), workers=1)
    successor.wall.now = START + 100  # past refreshSeconds for every entry
    successor.publisher.carry(successor.store.spec)
    kept = successor.publisher.table
    assert times == {key: kept.get(key).resolved_at for key in times}  # type: ignore[union-attr]
    successor.publisher.start()
    try:
        await seen(successor, *(ListedPod(f"p{k}", images=(f"img-{k}:1",)) for k in range(3)))
        await successor.publisher.publish_once()
        await settled(successor)
    finally:
        await successor.publisher.aclose()
    assert ["img-2:1", "img-0:1", "img-1:1"] == [image for image, _ in successor.registry.asked]


async def test_a_conflict_is_counted_and_the_next_round_writes(started: Any) -> None:
    """A 409 counts as a failure (cause conflict); the next round writes the object."""
    m = started({"web:1": ("sha256:w", AMD)})
    m.store.conflicts = 1
    await seen(m, ListedPod("a"))
    assert await m.publisher.publish_once() is None
    assert await m.publisher.publish_once() is not None
    failures = m.metrics.policy_publish_failures.labels("conflict")._value.get()
    assert (1.0, 1) == (failures, m.store.writes)


async def test_a_refresh_that_changes_only_times_is_written_once_per_refresh_seconds(
    started: Any,
) -> None:
    """Refreshed entries move their resolved-at time; that alone waits until refreshSeconds
    after the last write (a time published late only makes a successor refresh sooner), a
    moved tag is written at once."""
    m = started({"a:1": ("sha256:a", AMD), "b:1": ("sha256:b", AMD)})

    async def round_at(seconds: float) -> None:
        m.wall.now = START + seconds
        await m.publisher.publish_once()
        await settled(m)

    await seen(m, ListedPod("a", images=("a:1",)))
    await round_at(0)  # write 1
    await seen(m, ListedPod("a", images=("a:1",)), ListedPod("b", images=("b:1",)))
    await round_at(30)  # write 2: b:1 is new
    await round_at(61)  # a:1 refreshed: only its time moved, 31 s after the last write
    await round_at(62)
    assert 2 == m.store.writes
    await round_at(91)  # 61 s after the last write: the new times go out
    assert 3 == m.store.writes
    m.registry.answers["a:1"] = ("sha256:moved", ARM)
    await round_at(152)
    await round_at(153)
    assert (ARM, 4) == (listed(m)["a:1"], m.store.writes)


def evidence(workload: str = "", corroboration: str = "") -> Evidence:
    return Evidence(
        digest="sha256:multi",
        platform=parse("linux/arm64"),
        image="multi:1",
        reason="start",
        learned=START,
        expires=START + 10_000,
        namespace="shop",
        workload=workload,
        corroboration=corroboration,
    )


async def test_workload_evidence_is_published_for_that_workload_and_cluster_wide_for_all(
    started: Any,
) -> None:
    """The value is the answer after cluster-wide evidence; a workload's own evidence is
    published under `workloads` for its pods only."""
    m = started({"multi:1": ("sha256:multi", CLUSTER)})
    await m.book.learn(evidence(workload="ReplicaSet/web-1"))
    await seen(
        m,
        ListedPod("a", images=("multi:1",)),
        ListedPod("b", namespace="other", images=("multi:1",)),
    )
    await m.publisher.publish_once()
    assert m.store.spec is not None
    table = PublishedTable.of(read_spec(m.store.spec))
    assert (CLUSTER, AMD) == (
        table.platforms_of("multi:1"),
        table.workload_platforms("shop/ReplicaSet/web-1", "multi:1"),
    )
    await m.book.learn(evidence(corroboration="confirmed by an operator"))
    await m.publisher.publish_once()
    assert {"multi:1": AMD} == listed(m)


async def test_when_full_the_namespaces_left_out_are_counted_logged_and_in_the_status(
    started: Any,
) -> None:
    """Under a bound that does not fit every namespace's images, each namespace keeps its
    first; the object's status, a metric and one log line name who had images left out."""
    answers = {f"registry.example/{ns}/app-{n:03d}:1.0": (f"sha256:{ns}{n}", AMD)
               for ns in ("big", "small") for n in range(400)}  # fmt: skip
    m = started(answers, max_bytes=10_000)
    pods = [ListedPod(f"{ns}-{n}", namespace=ns, images=(f"registry.example/{ns}/app-{n:03d}:1.0",))
            for ns in ("big", "small") for n in range(400 if ns == "big" else 3)]  # fmt: skip
    await seen(m, *pods)
    with capture_logs() as logs:
        await m.publisher.publish_once()
    assert {f"registry.example/small/app-{n:03d}:1.0" for n in range(3)} <= set(listed(m))
    line = next(e for e in logs if e["event"] == "policy_images_left_out")
    left_out = m.store.status["leftOut"]
    assert ["big"] == list(left_out) == list(line["most"])
    assert (1.0, left_out["big"]) == (
        m.metrics.policy_left_out_namespaces._value.get(),
        m.store.status["evicted"],
    )


async def test_a_round_with_nothing_changed_renders_nothing_new(started: Any) -> None:
    """Rounds reuse the last rendering until a pod, an answer or the evidence changes (and
    render again at least once a minute)."""
    m = started({"a:1": ("sha256:a", AMD), "b:1": ("sha256:b", AMD)})
    renders: list[int] = []
    render = m.publisher.render

    def counted(*args: Any) -> Any:
        renders.append(1)
        return render(*args)

    m.publisher.render = counted  # type: ignore[method-assign]
    await seen(m, ListedPod("a", images=("a:1",)))
    for _ in range(3):
        await m.publisher.publish_once()
    assert 1 == len(renders)
    m.publisher.on_pod("ADDED", ListedPod("b", images=("b:1",)))
    await settled(m)
    await m.publisher.publish_once()
    m.clock.advance(61)
    await m.publisher.publish_once()
    assert (3, {"a:1": AMD, "b:1": AMD}) == (len(renders), listed(m))
