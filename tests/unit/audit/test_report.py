"""Verdicts per workload, blockers ranked, vCPU shares and the saving estimate."""

import pytest

from extender.audit.pure.options import Pricing
from extender.audit.pure.report import (
    BLOCKED,
    READY,
    UNKNOWN,
    Blocker,
    RankedBlocker,
    RankedUnknown,
    build,
    document,
    judge,
)
from extender.core.platforms import Unknown, parse
from extender.core.pods import PullSecretsRef
from tests.support.audit_objects import workload

MULTI = frozenset({parse("linux/amd64"), parse("linux/arm64")})
AMD64 = frozenset({parse("linux/amd64")})
ARM64 = frozenset({parse("linux/arm64/v8")})
ARMV7 = frozenset({parse("linux/arm/v7")})
PULL = PullSecretsRef("shop")


def lookups(**images):
    """(image, credentials) → outcome, with the default credentials of `workload()`."""
    return {(image.replace("_", "/"), PULL): outcome for image, outcome in images.items()}


@pytest.mark.parametrize(
    ("outcomes", "verdict", "runs_on"),
    [
        ({"multi": MULTI, "arm": ARM64}, READY, ("arm64",)),
        ({"multi": MULTI, "amd": AMD64}, BLOCKED, ("amd64",)),
        ({"multi": MULTI, "down": Unknown("connection refused")}, UNKNOWN, ("arm64", "amd64")),
        ({"amd": AMD64, "down": Unknown("401")}, BLOCKED, ("amd64",)),
        ({"armv7": ARMV7}, BLOCKED, ()),  # Graviton runs no 32-bit code
        ({"artifact": frozenset()}, BLOCKED, ()),
    ],
)
def test_a_workload_is_ready_only_when_every_image_has_an_arm64_entry(outcomes, verdict, runs_on):
    """One amd64-only image blocks; an unknown image is neither a blocker nor ready."""
    w = workload("api", *outcomes)
    report = judge(w, lookups(**outcomes), {})
    assert (verdict, runs_on) == (report.verdict, report.runs_on)


def test_blockers_name_the_image_and_the_platforms_it_does_have():
    """What an operator needs to ask the image's owner for."""
    report = judge(workload("db", "init", "main"), lookups(init=AMD64, main=MULTI), {})
    assert (Blocker("init", ("linux/amd64",)),) == report.blockers["arm64"]


def test_lookups_with_other_credentials_are_not_mixed_up():
    """The same image under another pod's pull secrets is a different lookup."""
    private = PullSecretsRef("shop", ("regcred",))
    w = workload("cron", "private", pull=private)
    answers = {("private", PULL): Unknown("401 Unauthorized"), ("private", private): ARM64}
    assert READY == judge(w, answers, {}).verdict


def test_images_that_block_the_most_workloads_are_ranked_first():
    """Fixing one image unblocks many; ties go to the one holding more vCPU."""
    fleet = [
        workload("a", "legacy", cpu_millis=500),
        workload("b", "legacy", "old", cpu_millis=500),
        workload("c", "old", cpu_millis=2000, replicas=2),
        workload("d", "gone"),
        workload("e", "legacy", "gone"),
    ]
    answers = lookups(legacy=AMD64, old=AMD64, gone=Unknown("no such host"))
    report = build(fleet, answers, {}, [], Pricing())
    expected = (
        (
            RankedBlocker("legacy", ("linux/amd64",), 3, 2000),
            RankedBlocker("old", ("linux/amd64",), 2, 4500),
        ),
        (RankedUnknown("gone", "no such host", 2),),
    )
    assert expected == (report.blockers, report.unknown_images)


def test_one_image_spelled_three_ways_is_one_blocker_of_three_workloads():
    """Blockers and unknowns group by the normalised reference and show the commonest spelling."""
    hub = ("legacy-app:2", "docker.io/library/legacy-app:2", "index.docker.io/library/legacy-app:2")
    down = ("registry.acme.test/gone:1", "registry.acme.test/gone:1", "REGISTRY.acme.test/gone:1")
    fleet = [
        workload(f"w{i}", image, f"down-{i}", cpu_millis=1000) for i, image in enumerate(hub)
    ] + [workload("w3", "legacy-app:2", cpu_millis=1000)]
    answers = {(image, PULL): AMD64 for image in hub}
    answers |= {(f"down-{i}", PULL): Unknown("no such host") for i in range(3)}
    fleet += [workload(f"u{i}", image) for i, image in enumerate(down)]
    answers |= {(image, PULL): Unknown("no such host") for image in down}
    report = build(fleet, answers, {}, [], Pricing())
    assert (
        (RankedBlocker("legacy-app:2", ("linux/amd64",), 4, 4000),),
        [("registry.acme.test/gone:1", 2), ("REGISTRY.acme.test/gone:1", 1)],
    ) == (
        report.blockers,
        [(u.image, u.workloads) for u in report.unknown_images if "gone" in u.image],
    )


def test_the_summary_counts_verdicts_and_the_share_of_requested_vcpu():
    """vCPU is per-pod requests times replicas; unknown counts in the total, not as ready."""
    fleet = [
        workload("ready", "multi", cpu_millis=500, replicas=4),
        workload("blocked", "amd", cpu_millis=1000, replicas=3),
        workload("unknown", "down", cpu_millis=1000, replicas=1),
    ]
    answers = lookups(multi=MULTI, amd=AMD64, down=Unknown("timeout"))
    s = build(fleet, answers, {}, [], Pricing()).summary
    expected = (3, 1, 1, 1, 6000, 2000, 1 / 3, 1 / 3)
    actual = (s.workloads, s.ready, s.blocked, s.unknown, s.cpu_millis, s.ready_cpu_millis)
    assert expected == (*actual, s.ready_share, s.ready_cpu_share)


def test_the_saving_counts_ready_vcpu_not_yet_on_arm64_at_the_price_and_discount():
    """4 pods of 0.5 vCPU, one already on arm64: 1.5 vCPU * $0.04 * 730 h * 20%."""
    fleet = [workload("web", "multi", cpu_millis=500, replicas=4), workload("old", "amd")]
    running = {fleet[0].key: {"arm64": 1, "amd64": 3}}
    pricing = Pricing(price_per_vcpu_hour=0.04, arm64_discount=0.20)
    s = build(fleet, lookups(multi=MULTI, amd=AMD64), running, [], pricing).summary
    assert (1500, 8.76) == (s.movable_cpu_millis, s.monthly_saving)


def test_without_a_price_the_saving_is_not_estimated():
    """The vCPU that could move is still reported."""
    s = build([workload("web", "multi")], lookups(multi=MULTI), {}, [], Pricing()).summary
    assert (1000, None) == (s.movable_cpu_millis, s.monthly_saving)


def test_an_empty_fleet_has_no_shares_rather_than_a_division_by_zero():
    """Nothing to audit is a report, not a crash."""
    document_ = document(build([], {}, {}, [], Pricing()))
    assert (0, None, None) == (
        document_["summary"]["workloads"],
        document_["summary"]["readyShare"],
        document_["summary"]["readyVcpuShare"],
    )
