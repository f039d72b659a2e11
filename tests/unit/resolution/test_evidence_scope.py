"""Learned evidence no tenant can forge (extender.core.mismatch.provenance,
extender.resolution.evidence_book): a finding teaches its own workload, and counts in every
namespace only when corroborated."""

from __future__ import annotations

import orjson
import pytest

from extender.config.registry_settings import CacheSettings
from extender.core.mismatch import SERVICE_ACCOUNT_MOUNT, Evidence, Launch, provenance
from extender.core.node_facts import NodeFacts
from extender.core.platforms import Platform, Rule, normalize
from extender.core.pods import PullSecretsRef, WorkloadId, controller_of, facts
from extender.metrics import Metrics
from extender.resolution.evidence_book import EvidenceBook, _decode
from extender.resolution.learned_resolver import LearnedResolver, runs_on_some_node
from extender.resolution.within_deadline import Resolution
from tests.support.clock import FakeClock
from tests.support.fakes import AnsweringRegistry

DIGEST = "sha256:" + "cd" * 32
IMAGE = "registry.example/public/app:1"
ARM64 = normalize("linux", "arm64")
AMD64 = normalize("linux", "amd64")
BOTH = frozenset({AMD64, ARM64})
NOW = 5000.0


def _learned(
    namespace: str = "tenant-a",
    workload: str = "ReplicaSet/app-5d9c",
    *,
    platform: Platform = ARM64,
    why_not: str = "",
    corroboration: str = "",
) -> Evidence:
    return Evidence(
        DIGEST,
        platform,
        IMAGE,
        "start",
        NOW,
        NOW + 3600,
        namespace=namespace,
        workload=workload,
        pod=f"{workload.split('/')[1]}-x1",
        said="exec format error",
        provenance=why_not,
        corroboration=corroboration,
    )


def _book() -> EvidenceBook:
    return EvidenceBook(CacheSettings(), wall=FakeClock(NOW))


def _nodes(*platforms: Platform) -> list[NodeFacts]:
    return [(platform, Rule.STRICT, False) for platform in platforms]


@pytest.mark.parametrize(
    ("reason", "launch", "why"),
    [
        ("run", Launch(), "only the container's log says so"),
        ("start", None, "the container is not in the pod's spec"),
        ("start", Launch(overrides_command=True), "the pod sets the container's command or args"),
        ("start", Launch(working_dir=True), "the pod sets the container's workingDir"),
        ("start", Launch(sets_path=True), "the pod can set the container's PATH"),
        ("start", Launch(mounts=("/work",)), "the container mounts a volume at /work"),
        (
            "start",
            Launch(mounts=(SERVICE_ACCOUNT_MOUNT, "/scripts")),
            "the container mounts a volume at /scripts",
        ),
        ("start", Launch(mounts=(SERVICE_ACCOUNT_MOUNT,)), ""),
        ("start", Launch(), ""),
    ],
)
def test_only_a_start_error_of_the_images_own_entrypoint_says_something_of_the_image(
    reason: str, launch: Launch | None, why: str
) -> None:
    """Logs, command, args, workingDir, PATH and volumes are the tenant's: findings they could
    have caused are marked, and never count toward every namespace."""
    assert why == provenance(reason, launch)  # type: ignore[arg-type]


def test_a_pods_workload_is_its_controller_in_its_namespace_or_the_pod_itself() -> None:
    """ownerReferences' controller names the workload; a bare or malformed one is the pod."""
    owned = {
        "metadata": {
            "name": "web-5d9c-x1",
            "namespace": "shop",
            "ownerReferences": [
                {"kind": "Node", "name": "n1"},
                {"kind": "ReplicaSet", "name": "web-5d9c", "controller": True},
            ],
        },
        "spec": {"containers": [{"name": "c", "image": IMAGE}]},
    }
    bare = {"metadata": {"name": "lone", "ownerReferences": "junk"}, "spec": {"containers": []}}
    assert (WorkloadId("shop", "ReplicaSet/web-5d9c"), WorkloadId("default", "Pod/lone")) == (
        facts(owned).workload,
        facts(bare).workload,
    )
    assert None is controller_of([{"kind": 3, "name": "x", "controller": True}])


async def test_what_one_workload_taught_narrows_that_workload_only() -> None:
    """tenant-a's finding takes arm64 from tenant-a's workload; the same image elsewhere,
    in its namespace or another, keeps both platforms."""
    book = _book()
    learned = LearnedResolver(AnsweringRegistry({}, default=(DIGEST, BOTH)), book)
    resolution = Resolution(learned, evidence=learned)
    assert _learned() == await book.learn(_learned())
    pull = PullSecretsRef("tenant-a")
    own = await resolution.resolve(
        [IMAGE], pull, 1.0, workload=WorkloadId("tenant-a", "ReplicaSet/app-5d9c")
    )
    sibling = await resolution.resolve(
        [IMAGE], pull, 1.0, workload=WorkloadId("tenant-a", "ReplicaSet/other")
    )
    elsewhere = await resolution.resolve(
        [IMAGE],
        PullSecretsRef("tenant-b"),
        1.0,
        workload=WorkloadId("tenant-b", "ReplicaSet/app-5d9c"),
    )
    assert ({AMD64}, BOTH, BOTH) == (own[IMAGE], sibling[IMAGE], elsewhere[IMAGE])
    assert frozenset() == book.failing(DIGEST)


async def test_the_same_start_failure_in_enough_namespaces_counts_everywhere() -> None:
    """A start error of the image's own entrypoint in three namespaces is corroboration; the
    third finding adds the cluster-wide entry, and every pod then loses arm64."""
    book = _book()
    first = await book.learn(_learned("ns-1"))
    second = await book.learn(_learned("ns-2"))
    third = await book.learn(_learned("ns-3"))
    scopes = [entry.scope if entry is not None else None for entry in (first, second, third)]
    assert ["workload", "workload", "cluster"] == scopes
    assert third is not None
    assert "failed alike in 3 namespaces: ns-1, ns-2, ns-3" == third.corroboration
    assert frozenset({ARM64}) == book.failing(DIGEST)


async def test_one_tenant_cannot_reach_the_threshold_alone_or_with_forgeable_findings() -> None:
    """Many workloads in one namespace count once; findings a pod could have caused (log,
    command, volume) never count, in any number of namespaces."""
    book = _book()
    for index in range(10):
        await book.learn(_learned("tenant-a", f"ReplicaSet/w{index}"))
    for index in range(10):
        await book.learn(_learned(f"other-{index}", why_not="only the container's log says so"))
    assert frozenset() == book.failing(DIGEST)
    assert {"workload"} == {entry.scope for entry in book.entries()}


async def test_an_operator_confirms_a_digest_for_every_namespace() -> None:
    """`archfit evidence confirm --digest D` makes D's workload entries count everywhere."""
    book = _book()
    await book.learn(_learned(why_not="only the container's log says so"))
    before = book.failing(DIGEST)
    confirmed = await book.confirm(DIGEST, ARM64)
    assert (frozenset(), 1, frozenset({ARM64})) == (before, confirmed, book.failing(DIGEST))
    assert "confirmed by an operator" == book.covering(_learned()).corroboration


async def test_evidence_that_would_leave_an_image_no_platform_is_ignored_and_counted() -> None:
    """An image crash-looping everywhere for its own reasons loses nothing: the index stands."""
    metrics = Metrics()
    book = _book()
    learned = LearnedResolver(AnsweringRegistry({}, default=(DIGEST, BOTH)), book, metrics=metrics)
    for platform in (ARM64, AMD64):
        await book.learn(_learned(platform=platform, corroboration="confirmed by an operator"))
    found = await learned.platforms(IMAGE, PullSecretsRef("x"))
    ignored = metrics.evidence_ignored.labels("no_platform")._value.get()
    assert (BOTH, 1.0) == (found, ignored)


async def test_evidence_that_would_leave_a_pod_no_node_is_ignored() -> None:
    """In an arm64-only cluster, evidence against arm64 would strand every pod of the image:
    it is not believed; with an amd64 node too, it is."""
    nodes = _nodes(ARM64)
    book = _book()
    learned = LearnedResolver(
        AnsweringRegistry({}, default=(DIGEST, BOTH)),
        book,
        runnable=runs_on_some_node(lambda: nodes),
    )
    await book.learn(_learned(corroboration="confirmed by an operator"))
    arm64_only = await learned.platforms(IMAGE, PullSecretsRef("x"))
    nodes.extend(_nodes(AMD64))
    mixed = await learned.platforms(IMAGE, PullSecretsRef("x"))
    assert (BOTH, frozenset({AMD64})) == (arm64_only, mixed)


async def test_workload_evidence_that_leaves_the_pod_no_node_is_ignored_for_the_whole_pod() -> None:
    """Two images, each runnable somewhere, but not together once arm64 goes from one: the
    pod keeps what its index says."""
    arm64_only = "registry.example/public/arm-only:1"
    registry = AnsweringRegistry(
        {arm64_only: ("sha256:" + "ef" * 32, frozenset({ARM64}))}, default=(DIGEST, BOTH)
    )
    book = _book()
    learned = LearnedResolver(
        registry, book, runnable=runs_on_some_node(lambda: _nodes(ARM64, AMD64))
    )
    resolution = Resolution(learned, evidence=learned)
    await book.learn(_learned())
    workload = WorkloadId("tenant-a", "ReplicaSet/app-5d9c")
    alone = await resolution.resolve([IMAGE], PullSecretsRef("tenant-a"), 1.0, workload=workload)
    both = await resolution.resolve(
        [IMAGE, arm64_only], PullSecretsRef("tenant-a"), 1.0, workload=workload
    )
    assert ({AMD64}, BOTH) == (alone[IMAGE], both[IMAGE])


async def test_an_entry_written_before_evidence_had_a_scope_is_dropped() -> None:
    """An unscoped entry of an older archfit came from an uncorroborated finding: not kept."""
    old = orjson.dumps({"d": DIGEST, "p": "linux/arm64", "i": "x", "r": "start", "l": 1, "e": 9e12})
    assert None is _decode(old)
