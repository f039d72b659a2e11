"""The admission policy's parameter: which images it lists, with what bits, under what bound."""

from __future__ import annotations

from typing import Any

import orjson

from extender.core.image_table import ImageTable, Switches, parameter_spec, preferred_terms
from extender.core.mutation import MutationRules, TaintRule, decide_mutation
from extender.core.platforms import parse
from extender.core.pods import PullSecretsRef
from tests.support.clock import FakeClock

AMD = frozenset({parse("linux/amd64")})
ARM = frozenset({parse("linux/arm64")})
ARMV7 = frozenset({parse("linux/arm/v7")})
CLUSTER = AMD | ARM
PULL = PullSecretsRef("shop")
SWITCHES = Switches(
    enforce=True,
    hold=True,
    steering=True,
    excluded_namespaces=("kube-system",),
    never_hold=("kube-system", "archfit-system"),
)


def rules(**overrides: Any) -> MutationRules:
    base: dict[str, Any] = {"platforms": CLUSTER, "arch_preference": {"arm64": 10, "amd64": 0}}
    return MutationRules(**{**base, **overrides})


def test_each_image_sums_the_bits_of_the_cluster_platforms_it_runs_on() -> None:
    """amd64 is bit 1 and arm64 bit 2 (sorted): amd64-only 1, arm64-only 2, both 3."""
    images = [("a:1", AMD), ("b:1", ARM), ("c:1", CLUSTER), ("d:1", ARMV7)]
    spec = parameter_spec(images, rules(), SWITCHES, 100_000).spec
    assert [("linux", "amd64", 1), ("linux", "arm64", 2)] == [
        (p["os"], p["architecture"], p["bit"]) for p in spec["platforms"]
    ]
    assert {"a:1": 1, "b:1": 2, "c:1": 3, "d:1": 0} == spec["images"]
    assert {} == spec["nativeImages"]


def test_a_32_bit_arm_build_under_pull_rule_runs_on_arm64_but_not_natively() -> None:
    """With policy.arm32OnArm64: pull-rule an arm/v7 image admits arm64 (bit 2) and earns it
    no preference: its native bits (0) are listed apart."""
    spec = parameter_spec([("v7:1", ARMV7 | AMD)], rules(aarch32=True), SWITCHES, 100_000).spec
    assert ({"v7:1": 3}, {"v7:1": 1}) == (spec["images"], spec["nativeImages"])


def test_the_preferred_terms_weigh_what_the_webhook_writes() -> None:
    """The policy's preferred terms are the webhook's (extender.core.mutation), best first."""
    preference = {"arm64": 10, "amd64": 5, "s390x": 0}
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "m:1"}]}}
    written = decide_mutation(pod, ["m:1"], {"m:1": CLUSTER}, rules(arch_preference=preference))
    affinity = next(op["value"] for op in written.patch if op["path"] == "/spec/affinity")
    expected = [
        (t["preference"]["matchExpressions"][0]["values"][0], t["weight"])
        for t in affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    ]
    assert expected == [(t["architecture"], t["weight"]) for t in preferred_terms(preference)]


def test_identical_taints_give_one_toleration() -> None:
    """Two arch taints with the same key, value and effect are tolerated by one toleration."""
    taint = TaintRule("arm64", "kubernetes.io/arch", "arm64", "NoSchedule")
    spec = parameter_spec([], rules(taints=(taint, taint)), SWITCHES, 100_000).spec
    assert 1 == len(spec["taints"])


def test_past_the_byte_bound_the_least_recently_used_images_are_left_out() -> None:
    """The spec stays under max_bytes; the images left out are the least recently used."""
    images = [(f"registry.example/team/app-{i:04d}:1.0", AMD) for i in range(2_000)]
    published = parameter_spec(images, rules(), SWITCHES, 20_000)
    listed = list(published.spec["images"])
    assert published.bytes <= 20_000
    assert published.bytes == len(orjson.dumps(published.spec))
    assert 2_000 == published.images + published.evicted
    assert [i for i, _ in images[: published.images]] == listed


def test_the_table_forgets_images_no_pod_named_for_the_unused_time() -> None:
    """drop_unused removes what no pod named for that long; a refresh is not a use."""
    clock = FakeClock()
    table = ImageTable(100, clock)
    table.record("old:1", AMD, PULL)
    clock.advance(50)
    table.record("new:1", AMD, PULL)
    clock.advance(50)
    table.record("old:1", AMD, PULL, used=False)  # a refresh
    assert 1 == table.drop_unused(60)
    assert ["new:1"] == [image for image, _ in table.recent_first()]


def test_the_table_keeps_at_most_max_entries_most_recently_used() -> None:
    """Past max_entries the least recently used image goes."""
    table = ImageTable(2, FakeClock())
    for image in ("a:1", "b:1", "c:1"):
        table.record(image, AMD, PULL)
    table.record("b:1", AMD, PULL)
    assert ["b:1", "c:1"] == [image for image, _ in table.recent_first()]


def test_images_resolved_again_are_due_after_the_refresh_time() -> None:
    """due() names what was resolved longer ago than the refresh time, with its credentials."""
    clock = FakeClock()
    table = ImageTable(10, clock)
    table.record("a:1", AMD, PULL)
    clock.advance(30)
    table.record("b:1", ARM, PULL)
    assert [("a:1", PULL)] == table.due(20)


def test_carried_images_go_behind_every_image_the_table_has_seen() -> None:
    """A new leader takes over its predecessor's images as the least recently used."""
    table = ImageTable(10, FakeClock())
    table.record("mine:1", AMD, PULL)
    assert (True, False) == (table.carry("theirs:1", ARM), table.carry("mine:1", ARM))
    assert ["mine:1", "theirs:1"] == [image for image, _ in table.recent_first()]
