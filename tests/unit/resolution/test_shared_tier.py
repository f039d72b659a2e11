"""The shared table's narrowing of a workload's answers: what the table publishes for a
workload stands in for the digest this replica never resolved."""

from __future__ import annotations

from typing import Any

from extender.config.registry_settings import CacheSettings
from extender.core.image_table import Rendered, Switches, parameter_spec
from extender.core.mismatch import Evidence
from extender.core.mutation import MutationRules
from extender.core.parameter import TIME_EPOCH, PublishedTable, read_spec
from extender.core.platforms import parse
from extender.core.pods import PullSecretsRef
from extender.resolution.evidence_book import EvidenceBook
from extender.resolution.learned_resolver import LearnedResolver
from extender.resolution.shared_tier import SharedTier
from tests.support.clock import FakeClock
from tests.support.fakes import AnsweringRegistry

AMD = frozenset({parse("linux/amd64")})
CLUSTER = AMD | frozenset({parse("linux/arm64")})
PULL = PullSecretsRef("shop")
NOW = TIME_EPOCH + 1_000.0


def table_with_workload() -> PublishedTable:
    spec: dict[str, Any] = parameter_spec(
        [("multi:1", Rendered(CLUSTER, NOW))],
        MutationRules(platforms=CLUSTER, arch_preference={}),
        Switches(True, True, False, (), ()),
        100_000,
        workloads={"shop/ReplicaSet/web-1": {"multi:1": AMD}},
    ).spec
    return PublishedTable.of(read_spec(spec))


def learned() -> tuple[LearnedResolver, EvidenceBook]:
    book = EvidenceBook(CacheSettings(), wall=FakeClock(NOW))
    return LearnedResolver(AnsweringRegistry({"multi:1": ("sha256:m", CLUSTER)}), book), book


def test_a_workloads_image_answered_by_the_table_takes_the_tables_narrowing() -> None:
    """This replica never resolved the image (no digest): the workload's pods get the set
    the leader published for them; other workloads keep the cluster-wide answer."""
    resolver, _ = learned()
    tier = SharedTier(resolver, resolver)
    tier.update(table_with_workload())
    answers = {"multi:1": CLUSTER}
    assert {"multi:1": AMD} == tier.narrow(answers, PULL, "shop", "ReplicaSet/web-1")
    assert answers is tier.narrow(answers, PULL, "shop", "ReplicaSet/other")


def test_a_workloads_narrowing_applies_only_to_a_pod_naming_the_images_it_was_judged_with() -> None:
    """Judged with [multi:1], the evidence does not narrow a pod of the workload that names
    another image besides (the webhook judges it anew; the policy leaves it generic)."""
    resolver, _ = learned()
    tier = SharedTier(resolver, resolver)
    tier.update(table_with_workload())
    answers = {"multi:1": CLUSTER, "other:1": AMD}
    assert answers is tier.narrow(answers, PULL, "shop", "ReplicaSet/web-1")


async def test_a_digest_this_replica_resolved_is_judged_by_its_own_evidence() -> None:
    """Where this replica knows the digest, its own book decides (here: nothing learned, so
    the table's stale narrowing does not apply)."""
    resolver, _ = learned()
    await resolver.resolve("multi:1", PULL)
    tier = SharedTier(resolver, resolver)
    tier.update(table_with_workload())
    answers = {"multi:1": CLUSTER}
    assert answers is tier.narrow(answers, PULL, "shop", "ReplicaSet/web-1")


async def test_with_evidence_of_its_own_the_replica_narrows_as_the_table_does() -> None:
    """The same evidence in this replica's book gives the same set the table publishes."""
    resolver, book = learned()
    await resolver.resolve("multi:1", PULL)
    await book.learn(
        Evidence("sha256:m", parse("linux/arm64"), "multi:1", "start", NOW, NOW + 600,
                 namespace="shop", workload="ReplicaSet/web-1")
    )  # fmt: skip
    tier = SharedTier(resolver, resolver)
    tier.update(table_with_workload())
    assert {"multi:1": AMD} == tier.narrow({"multi:1": CLUSTER}, PULL, "shop", "ReplicaSet/web-1")
