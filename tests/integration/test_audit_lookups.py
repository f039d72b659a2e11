"""The audit's image lookups against a real registry: one lookup per image, failures unknown."""

from __future__ import annotations

import io

import pytest

from extender.audit.distinct_images import distinct_pairs, resolve_pairs
from extender.audit.pure.options import AuditOptions
from extender.audit.pure.workloads import Workload, WorkloadKey
from extender.audit.registry_answers import CheckedIndexes, resolve_with
from extender.config.settings import Settings
from extender.core.platforms import Unknown
from extender.core.pods import PullSecretsRef
from extender.metrics import Metrics
from tests.integration.conftest import ResolverFactory, local_settings
from tests.support.fixtures import PublishedRegistry
from tests.support.images import Pusher

pytestmark = pytest.mark.integration


def _workload(n: int, *images: str) -> Workload:
    namespace = f"team-{n % 20}"  # other namespaces: other credentials to look up with
    return Workload(WorkloadKey("Deployment", namespace, f"w{n}"), f"uid-{n}", images,
                    PullSecretsRef(namespace), 1, 100, 1 << 20)  # fmt: skip


async def test_an_image_shared_by_200_workloads_in_20_namespaces_costs_one_lookup(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """One GET of the tag, however many workloads and namespaces share it."""
    registry = public_registry.registry
    image = public_registry.catalog.manifest_list.reference
    resolver = await make_resolver(local_settings(registry.host))
    mark = registry.mark()
    pairs = distinct_pairs(_workload(n, image) for n in range(200))
    lookups = await resolve_pairs(resolver, pairs, per_host=8)
    seen = registry.count_since(mark)
    answers = {frozenset(str(p) for p in outcome) for outcome in lookups.values()}
    expected = (
        20,
        {frozenset({"linux/amd64", "linux/arm64"})},
        {("GET", "manifests"): 1},
    )
    assert expected == (len(lookups), answers, dict(seen))


async def test_a_bad_name_and_a_missing_image_are_unknown_with_a_reason_not_an_error(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """Nothing an image does stops the audit; every pair gets an answer."""
    registry = public_registry.registry
    resolver = await make_resolver(local_settings(registry.host))
    missing = f"{registry.host}/archfit/nothing-here:1"
    lookups = await resolve_pairs(resolver, distinct_pairs([_workload(0, "Bad/Name", missing)]), 8)
    assert [True, True] == [
        isinstance(outcome, Unknown) and bool(outcome.reason) for outcome in lookups.values()
    ]


async def test_audit_verify_believes_the_config_and_names_the_lying_entry(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """An index that calls its amd64 build arm64: the lookup says amd64, the entry is named."""
    registry = public_registry.registry
    liar, (child,) = Pusher(registry.url).index(
        "archfit/audit-liar", "1.0", ["linux/amd64"], claims={"linux/amd64": "linux/arm64"}
    )
    honest = public_registry.catalog.manifest_list.reference
    checked = CheckedIndexes(await make_resolver(local_settings(registry.host)))
    lookups = await resolve_pairs(
        checked, distinct_pairs([_workload(0, liar.reference, honest)]), 8
    )
    answers = [sorted(str(p) for p in outcome) for outcome in lookups.values()]  # type: ignore[union-attr]
    expected = (
        [["linux/amd64"], ["linux/amd64", "linux/arm64"]],
        [(liar.reference, child.digest, "index says linux/arm64; its config says linux/amd64")],
    )
    assert expected == (answers, [(d.image, d.digest, d.problem) for d in checked.disagreements])


async def test_audit_lookups_with_verify_carry_the_disagreements_for_the_report(
    public_registry: PublishedRegistry, make_resolver: ResolverFactory
) -> None:
    """`audit --verify` (single cluster or fleet) goes through CheckedIndexes; without it, not."""
    registry = public_registry.registry
    liar, _ = Pusher(registry.url).index(
        "archfit/audit-liar-2", "1.0", ["linux/amd64"], claims={"linux/amd64": "linux/arm64"}
    )
    resolver = await make_resolver(local_settings(registry.host))
    pairs = distinct_pairs([_workload(0, liar.reference)])
    found = []
    for verify in (True, False):
        options = AuditOptions(namespace=None, newer_tags=0, verify=verify)
        resolution = await resolve_with(
            resolver, Metrics(), Settings(), pairs, lambda: None, options, io.StringIO()
        )
        found.append(
            (
                [sorted(str(p) for p in o) for o in resolution.lookups.values()],  # type: ignore[union-attr]
                [d.image for d in resolution.disagreements or ()],
            )
        )
    expected = [([["linux/amd64"]], [liar.reference]), ([["linux/arm64"]], [])]
    assert expected == found
