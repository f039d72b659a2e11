"""The admission policy's parameter: which images it lists, in what order, with what values,
under what bound; and the pods that make an image in use."""

from __future__ import annotations

import random
from typing import Any

import orjson

from extender.core.image_table import (
    ImageTable,
    Rendered,
    Switches,
    fair_order,
    parameter_spec,
    preferred_terms,
)
from extender.core.image_uses import ImageUses, PodUse
from extender.core.mutation import MutationRules, TaintRule, decide_mutation, fits_of
from extender.core.parameter import TIME_EPOCH, PublishedTable, read_spec
from extender.core.platforms import Platform, Rule, parse
from extender.core.pods import PullSecretsRef, read_pod
from tests.support.clock import FakeClock

AMD = frozenset({parse("linux/amd64")})
ARM = frozenset({parse("linux/arm64")})
ARMV7 = frozenset({parse("linux/arm/v7")})
CLUSTER = AMD | ARM
PULL = PullSecretsRef("shop")
WHEN = TIME_EPOCH + 1_000_000.0
SWITCHES = Switches(
    enforce=True,
    hold=True,
    steering=True,
    excluded_namespaces=("kube-system",),
    never_hold=("kube-system", "archfit-system"),
)
DIGEST = "sha256:" + "d" * 64


def rules(**overrides: Any) -> MutationRules:
    base: dict[str, Any] = {"platforms": CLUSTER, "arch_preference": {"arm64": 10, "amd64": 0}}
    return MutationRules(**{**base, **overrides})


def rendered(platforms: frozenset[Platform], when: float = WHEN) -> Rendered:
    return Rendered(platforms, when)


def bits(spec: dict[str, Any]) -> dict[str, int]:
    """Each image's supported bits, as the policy reads them."""
    mask = (1 << len(spec["platforms"])) - 1
    return {key: value & mask for key, value in spec["images"].items()}


def test_each_image_holds_the_bits_of_the_cluster_platforms_it_runs_on() -> None:
    """amd64 is bit 1 and arm64 bit 2 (sorted): amd64-only 1, arm64-only 2, both 3."""
    images = [("a:1", AMD), ("b:1", ARM), ("c:1", CLUSTER), ("d:1", ARMV7)]
    spec = parameter_spec([(i, rendered(p)) for i, p in images], rules(), SWITCHES, 100_000).spec
    assert [("linux", "amd64", 1, 4), ("linux", "arm64", 2, 8)] == [
        (p["os"], p["architecture"], p["bit"], p["nativeBit"]) for p in spec["platforms"]
    ]
    assert {"a:1": 1, "b:1": 2, "c:1": 3, "d:1": 0} == bits(spec)


def test_a_32_bit_arm_build_under_pull_rule_runs_on_arm64_but_not_natively() -> None:
    """With policy.arm32OnArm64: pull-rule an arm/v7 image admits arm64 (bit 2) and earns it
    no preference: its native bits hold amd64 alone."""
    spec = parameter_spec(
        [("v7:1", rendered(ARMV7 | AMD))], rules(aarch32=True), SWITCHES, 100_000
    ).spec
    value = spec["images"]["v7:1"]
    native = [p["architecture"] for p in spec["platforms"] if value // p["nativeBit"] % 2]
    assert (3, ["amd64"]) == (bits(spec)["v7:1"], native)


def test_what_the_policy_reads_of_each_value_is_what_the_webhook_decides_on() -> None:
    """CEL's reading of a value (`(v / bit) % 2`, `(v / nativeBit) % 2`) gives, for random
    platform sets under each rule, exactly `fits_of`'s supported and native platforms; and a
    replica reads the exact set back."""
    texts = "linux/amd64 linux/arm64 linux/arm/v7 linux/arm/v6 linux/386 linux/amd64/v3 linux/s390x"
    pool = [parse(text) for text in texts.split()]
    rng = random.Random(3)
    for rule in Rule:
        for aarch32 in (False, True):
            made = rules(rule=rule, aarch32=aarch32)
            images = [
                (f"img-{n}:1", rendered(frozenset(rng.sample(pool, rng.randint(0, 4)))))
                for n in range(200)
            ]
            spec = parameter_spec(images, made, SWITCHES, 1_000_000).spec
            table = PublishedTable.of(read_spec(spec))
            frozen = frozenset(sorted(made.platforms))
            for key, entry in images:
                assert entry.platforms is not None
                fits = fits_of(frozenset({entry.platforms}), frozen, made.rule, made.aarch32)
                value = spec["images"][key]
                read = [
                    (bool(value // p["bit"] % 2), bool(value // p["nativeBit"] % 2))
                    for p in spec["platforms"]
                ]
                expected = [
                    (platform in fits.supported, platform in fits.native)
                    for platform in sorted(made.platforms)
                ]
                assert expected == read
                assert entry.platforms == table.platforms_of(key)


def test_the_preferred_terms_weigh_what_the_webhook_writes() -> None:
    """The policy's preferred terms are the webhook's (extender.core.mutation), best first."""
    preference = {"arm64": 10, "amd64": 5, "s390x": 0}
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "m:1"}]}}
    written = decide_mutation(
        read_pod(pod), ["m:1"], {"m:1": CLUSTER}, rules(arch_preference=preference)
    )
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


def test_past_the_byte_bound_the_last_images_in_order_are_left_out() -> None:
    """The spec stays under max_bytes; the images left out are the last of the order, and
    each namespace that uses one counts it."""
    images = [(f"registry.example/team/app-{i:04d}:1.0", rendered(AMD)) for i in range(2_000)]
    namespaces = {key: [f"ns-{i % 7}"] for i, (key, _) in enumerate(images)}
    published = parameter_spec(images, rules(), SWITCHES, 20_000, namespaces_of=namespaces.get)
    listed = list(published.spec["images"])
    assert published.bytes <= 20_000
    assert published.bytes == len(orjson.dumps(published.spec))
    assert 2_000 == published.images + published.evicted
    assert [i for i, _ in images[: published.images]] == listed
    assert published.evicted == sum(published.left_out_by_namespace.values())


def test_past_max_entries_the_rest_are_left_out_too() -> None:
    """maxEntries bounds the entries beside the bytes."""
    images = [(f"app-{i}:1", rendered(AMD)) for i in range(10)]
    published = parameter_spec(images, rules(), SWITCHES, 100_000, max_entries=4)
    assert (4, 6) == (published.images, published.evicted)


def test_fairness_lists_the_kth_image_of_every_namespace_before_the_next_of_any() -> None:
    """Round-robin across namespaces, each by recency of use (in use first); an image two
    namespaces use takes its better rank."""
    lanes = [
        # a namespace with many images, all in use, the most recent last
        *((f"big-{i}", "big", True, float(i)) for i in range(50)),
        ("small-0", "small", True, 1.0),
        ("small-1", "small", False, 99.0),  # unused: after every image in use
        ("shared", "small", True, 0.5),
        ("shared", "big", True, -1.0),
    ]
    order = fair_order(lanes, ["carried"])
    rank = {key: order.index(key) for key in order}
    assert ["big-49", "small-0"] == sorted(order[:2])  # each namespace's first
    assert rank["shared"] < 4  # second in small, last in big: it takes second
    assert rank["small-1"] < 6  # small's third, before big's fourth
    assert "carried" == order[-1]


def test_one_namespace_with_many_images_cannot_push_another_namespaces_images_out() -> None:
    """A namespace that names 5,000 images, newer than everything, under a bound that fits
    300: the other namespace's 100 images all stay, the big one's newest fill the rest."""
    lanes = [(f"victim/app-{i:03d}:1", "victim", True, float(i)) for i in range(100)]
    lanes += [(f"attacker/x-{i:04d}:1", "attacker", True, 1e6 + i) for i in range(5_000)]
    order = fair_order(lanes)
    entries = [(key, rendered(AMD)) for key in order]
    namespaces = {key: [namespace] for key, namespace, _, _ in lanes}
    published = parameter_spec(entries, rules(), SWITCHES, 30_000, namespaces_of=namespaces.get)
    listed = set(published.spec["images"])
    assert {f"victim/app-{i:03d}:1" for i in range(100)} <= listed
    assert {"attacker": published.evicted} == published.left_out_by_namespace


def test_every_tag_spelling_of_one_digest_is_one_entry() -> None:
    """Pods naming one digest under 100 spellings cost one key; the sources keep a
    reference to resolve it with."""
    seen: list[str] = []
    uses = ImageUses(FakeClock(), seen.append)
    for n in range(100):
        image = f"registry.example/r{n}:{'t' * 100}{n}@{DIGEST}"
        uses.add(f"uid-{n}", PodUse("tenant", (image,), PULL, f"Pod/p{n}"))
    assert [f"@{DIGEST}"] == seen == list(uses.followed())
    assert 1 == len(uses.sources(f"@{DIGEST}"))


def test_an_image_stays_in_use_while_a_pod_names_it_and_leaves_unused_seconds_after() -> None:
    """The unused clock starts when the last pod goes, not at any pod's CREATE."""
    clock = FakeClock()
    uses = ImageUses(clock, lambda key: None)
    uses.add("a", PodUse("shop", ("web:1",), PULL, "ReplicaSet/web"))
    clock.advance(1_000)
    assert ([], True) == (uses.drop_unused(60), uses.in_use("web:1"))
    uses.add("b", PodUse("shop", ("web:1",), PULL, "ReplicaSet/web"))
    uses.remove("a")
    clock.advance(1_000)
    assert [] == uses.drop_unused(60)
    uses.remove("b")
    clock.advance(59)
    assert [] == uses.drop_unused(60)
    clock.advance(2)
    assert ["web:1"] == uses.drop_unused(60)


def test_a_relist_forgets_the_pods_it_did_not_tell() -> None:
    """After LISTING and SYNCED, a pod the list did not include is gone."""
    uses = ImageUses(FakeClock(), lambda key: None)
    uses.add("gone", PodUse("shop", ("old:1",), PULL, "Pod/gone"))
    uses.add("kept", PodUse("shop", ("new:1",), PULL, "Pod/kept"))
    uses.relisting()
    uses.add("kept", PodUse("shop", ("new:1",), PULL, "Pod/kept"))
    uses.resync()
    assert (False, True, 1) == (uses.in_use("old:1"), uses.in_use("new:1"), len(uses))


def test_the_pods_of_one_workload_share_one_kept_tuple() -> None:
    """100 pods of a ReplicaSet cost a dict entry each: their PodUse is one object."""
    uses = ImageUses(FakeClock(), lambda key: None)
    for n in range(100):
        images = tuple(f"{name}:{n % 1}" for name in ("web", "sidecar"))  # a tuple per pod
        uses.add(f"uid-{n}", PodUse("shop", images, PullSecretsRef("shop"), "ReplicaSet/web"))
    kept = {id(use) for use in uses._pods.values()}
    images_of = uses.workload_images("shop", "ReplicaSet/web")
    assert (1, [("web:0", "sidecar:0")]) == (len(kept), images_of)


def test_carried_entries_keep_their_resolved_at_and_the_oldest_are_due_first() -> None:
    """A takeover keeps each entry's own time; those resolved longest ago come first."""
    spec = parameter_spec(
        [("new:1", rendered(AMD, WHEN + 500)), ("old:1", rendered(ARM, WHEN)),
         ("older:1", rendered(CLUSTER, WHEN - 500))],
        rules(), SWITCHES, 100_000,
    ).spec  # fmt: skip
    table = ImageTable()
    table.answer("mine:1", AMD, "sha256:m", WHEN + 900)
    assert 3 == table.carry(PublishedTable.of(read_spec(spec)))
    assert WHEN - 500 == table.get("older:1").resolved_at  # type: ignore[union-attr]
    assert ["older:1", "old:1", "new:1"] == table.due(WHEN + 800, 100)
    assert CLUSTER == table.get("older:1").platforms  # type: ignore[union-attr]


def test_an_entry_carried_without_its_set_keeps_its_bits_until_resolved() -> None:
    """From an older archfit's spec (bits only): the same bits are published again, and the
    entry is due at once (its time is not known)."""
    old = {"platforms": [{"os": "linux", "architecture": "amd64", "bit": 1}], "images": {"a:1": 1}}
    table = ImageTable()
    table.carry(PublishedTable.of(read_spec(old)))
    answer = table.get("a:1")
    assert answer is not None
    assert (None, ["a:1"]) == (answer.platforms, table.due(WHEN, 100))
    spec = parameter_spec(
        [("a:1", Rendered(None, 0.0, answer.carried))], rules(), SWITCHES, 100_000
    ).spec
    assert {"a:1": 1} == bits(spec)


def test_a_workloads_narrowed_images_are_published_beside_the_cluster_wide_value() -> None:
    """workloads names, per `<namespace>/<Kind>/<name>`, each image of the list its evidence
    was judged with and its value for that workload's pods, with the exact set for
    replicas; a workload whose list names an image not listed is not published."""
    published = parameter_spec(
        [("multi:1", rendered(CLUSTER)), ("amd:1", rendered(AMD))],
        rules(),
        SWITCHES,
        100_000,
        workloads={
            "shop/ReplicaSet/web-1": {"multi:1": AMD, "amd:1": AMD},
            "shop/ReplicaSet/gone-1": {"multi:1": AMD, "gone:1": AMD},
        },
    ).spec
    values = published["workloads"]["shop/ReplicaSet/web-1"]
    table = PublishedTable.of(read_spec(published))
    assert (1, 3) == (values["multi:1"] & 3, published["images"]["multi:1"] & 3)
    assert AMD == table.workload_platforms("shop/ReplicaSet/web-1", "multi:1")
    assert ["shop/ReplicaSet/web-1"] == list(published["workloads"])
