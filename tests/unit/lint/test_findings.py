"""What `archfit lint` finds per workload and container (extender.lint.pure.findings): the trap
(error), migration readiness (warning), an unneeded pin (note), an image nobody could read
(error), and findings silenced on purpose."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from extender.core.mutation import TaintRule
from extender.core.platforms import Platform, Resolved, Unknown, parse
from extender.lint.pure.findings import IGNORE_ANNOTATION, Judging, Level, judge_workload, worst
from extender.lint.pure.manifests import WrittenWorkload, read_stream

API = "acme/api:1.2"
PROXY = "acme/proxy:3"
CLUSTER = Judging(frozenset({parse("linux/amd64"), parse("linux/arm64")}))


def platforms(*texts: str) -> frozenset[Platform]:
    return frozenset(parse(text) for text in texts)


RESOLVED: dict[str, Resolved] = {
    API: platforms("linux/amd64"),
    PROXY: platforms("linux/amd64", "linux/arm64"),
}


def deployment(
    *images: str, annotations: dict[str, str] | None = None, **spec: Any
) -> WrittenWorkload:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    obj = {
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop", "annotations": annotations or {}},
        "spec": {"template": {"spec": {"containers": containers, **spec}}},
    }
    workloads, _ = read_stream(yaml.safe_dump(obj))
    return workloads[0]


def found(workload: WrittenWorkload, judging: Judging = CLUSTER, hints: Any = None) -> list[tuple]:
    return [
        (f.rule.id, f.rule.level, f.container.name if f.container else None, f.silenced)
        for f in judge_workload(workload, RESOLVED, judging, hints)
    ]


ARM64_PIN = {"nodeSelector": {"kubernetes.io/arch": "arm64"}}
AMD64_PIN = {"nodeSelector": {"kubernetes.io/arch": "amd64"}}


def test_an_unpinned_template_with_an_amd64_only_image_is_the_trap():
    """Its pods may land on arm64, where the image cannot run: an error for that container."""
    assert [("platform-missing", Level.ERROR, "c0", False)] == found(deployment(API, PROXY))


def test_a_template_pinned_to_arm64_with_an_amd64_only_image_is_the_trap_too():
    assert [("platform-missing", Level.ERROR, "c0", False)] == found(deployment(API, **ARM64_PIN))


def test_an_amd64_pin_an_amd64_only_image_needs_is_a_warning_with_the_tag_that_has_arm64():
    """No trap: the pin keeps it on amd64; migration readiness says what to do."""
    results = judge_workload(deployment(API, **AMD64_PIN), RESOLVED, CLUSTER, {API: "1.4"})
    assert [("no-arm64", Level.WARNING)] == [(f.rule.id, f.rule.level) for f in results]
    assert "acme/api:1.2 has no linux/arm64; arm64 from tag 1.4" == results[0].message


def test_an_arch_pin_the_images_do_not_need_is_a_note():
    """Every image runs on arm64 too, but the template keeps the pods off it."""
    assert [("unneeded-arch-pin", Level.NOTE, None, False)] == found(deployment(PROXY, **AMD64_PIN))


def test_a_multi_arch_unpinned_template_has_nothing_to_say():
    assert [] == found(deployment(PROXY))


def test_an_image_whose_platforms_could_not_be_learned_is_an_error_of_its_own():
    """Never a silent pass: unknown platforms are a finding, and no pin is judged then."""
    results = judge_workload(
        deployment("acme/gone:1", PROXY, **AMD64_PIN),
        {**RESOLVED, "acme/gone:1": Unknown("registry down")},
        CLUSTER,
    )
    assert [("platforms-unknown", "acme/gone:1: registry down")] == [
        (f.rule.id, f.message) for f in results
    ]


def test_an_architecture_taint_the_template_does_not_tolerate_keeps_its_pods_off():
    """With arm64 nodes tainted (webhook.archTaints), an unpinned amd64-only image is no trap
    unless the template tolerates the taint."""
    taint = TaintRule("arm64", "kubernetes.io/arch", "arm64", "NoSchedule")
    tainted = Judging(CLUSTER.platforms, (taint,))
    toleration = {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64",
                  "effect": "NoSchedule"}  # fmt: skip
    assert ["no-arm64"] == [rule for rule, *_ in found(deployment(API), tainted)]
    assert ["platform-missing"] == [
        rule for rule, *_ in found(deployment(API, tolerations=[toleration]), tainted)
    ]


@pytest.mark.parametrize(
    ("ignore", "silenced"),
    [
        ("platform-missing", [True]),
        ("no-arm64, platform-missing", [True]),
        ("platform-missing:c0", [True]),
        ("platform-missing:c1", [False]),
        ("all", [True]),
        ("no-arm64", [False]),
    ],
)
def test_the_lint_ignore_annotation_silences_the_rules_it_names(ignore: str, silenced: list):
    """By rule, by rule and container, or all; a silenced finding fails nothing."""
    results = judge_workload(
        deployment(API, annotations={IGNORE_ANNOTATION: ignore}), RESOLVED, CLUSTER
    )
    assert silenced == [f.silenced for f in results]
    assert (None if all(silenced) else Level.ERROR) == worst(results)


def test_the_cluster_platforms_decide_what_a_template_allows():
    """In an amd64-only cluster an unpinned amd64-only image is only not ready for arm64."""
    amd64_cluster = Judging(platforms("linux/amd64"))
    assert [("no-arm64", Level.WARNING, "c0", False)] == found(deployment(API), amd64_cluster)
