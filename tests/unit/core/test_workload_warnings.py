"""Warnings on workloads (extender.core.workload_warnings): what a template's images mean for it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.mutation import MutationRules
from extender.core.platforms import Unknown, parse
from extender.core.workload_warnings import template, template_changed, warnings

AMD64, ARM64 = parse("linux/amd64"), parse("linux/arm64")
BOTH = frozenset({AMD64, ARM64})
RULES = MutationRules(platforms=BOTH, arch_preference={})
MIXED = {AMD64: 3, ARM64: 4}
AGENT, PROXY, APP = "ghcr.io/acme/agent:2.1", "docker.io/acme/proxy:1.0", "docker.io/acme/app:3"
RESOLVED = {AGENT: frozenset({AMD64}), PROXY: frozenset({AMD64}), APP: BOTH}


def workload(kind: str, *images: str, **spec: Any) -> dict[str, Any]:
    """A workload of `kind` whose pod template runs `images`, one container each."""
    pod = {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)], **spec}
    template_ = {"metadata": {"labels": {"app": "x"}}, "spec": pod}
    body: dict[str, Any] = {"template": template_}
    if kind == "CronJob":
        body = {"schedule": "* * * * *", "jobTemplate": {"spec": body}}
    return {"metadata": {"name": "x", "namespace": "shop"}, "spec": body}


def warned(kind: str, *images: str, nodes: Any = MIXED, **spec: Any) -> list[str]:
    return warnings(template(kind, workload(kind, *images, **spec), "shop"), RESOLVED, RULES, nodes)


def test_a_daemonset_with_an_amd64_only_image_is_told_how_many_arm64_nodes_it_fails_on() -> None:
    """The issue's example, word for word."""
    expected = [
        "archfit: image ghcr.io/acme/agent:2.1 has no linux/arm64; this DaemonSet will run on"
        " 4 arm64 nodes and fail there; add nodeAffinity kubernetes.io/arch In [amd64]"
    ]
    assert expected == warned("DaemonSet", AGENT)


def test_a_deployment_with_an_amd64_only_sidecar_is_told_it_cannot_use_arm64() -> None:
    """The multi-arch app is fine; the sidecar is named as what keeps it off arm64."""
    expected = [
        "archfit: sidecar docker.io/acme/proxy:1.0 is amd64-only, so this Deployment cannot use"
        " arm64 nodes"
    ]
    assert expected == warned("Deployment", APP, PROXY)


@pytest.mark.parametrize(
    ("kind", "images", "spec", "nodes"),
    [
        ("DaemonSet", (AGENT,), {"nodeSelector": {"kubernetes.io/arch": "amd64"}}, MIXED),
        ("DaemonSet", (AGENT,), {}, {AMD64: 5}),
        ("Deployment", (APP,), {}, MIXED),
        ("StatefulSet", ("unknown.example/x:1",), {}, MIXED),
    ],
    ids=["pinned-to-amd64", "no-arm64-node", "multi-arch", "unknown-image"],
)
def test_nothing_is_said_when_nothing_will_go_wrong_or_nothing_is_known(
    kind: str, images: tuple[str, ...], spec: dict[str, Any], nodes: Any
) -> None:
    """Constrained already, no such node, every platform covered, or the image is unknown."""
    resolved = {**RESOLVED, "unknown.example/x:1": Unknown("timeout")}
    found = warnings(
        template(kind, workload(kind, *images, **spec), "shop"), resolved, RULES, nodes
    )
    assert [] == found


def test_a_deployment_that_requires_arm64_with_an_amd64_only_image_can_run_nowhere() -> None:
    """Its own selector and its image exclude each other: its pods can never start."""
    text = "has no linux/arm64; this Deployment's pods can run nowhere"
    expected = [f"archfit: image {AGENT} {text}"]
    assert expected == warned("Deployment", AGENT, nodeSelector={"kubernetes.io/arch": "arm64"})


def test_a_daemonset_without_a_node_index_is_warned_without_a_count() -> None:
    """No node index: the arm64 nodes are not counted, but the platform is still named."""
    (found,) = warned("DaemonSet", AGENT, nodes=None)
    assert "this DaemonSet will run on arm64 nodes and fail there" in found


def test_an_init_container_and_a_cronjob_template_are_read() -> None:
    """A CronJob's job template is its pod template; an init container is named so."""
    obj = workload("CronJob", APP)
    obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "init", "image": PROXY}
    ]
    found = warnings(template("CronJob", obj, "shop"), RESOLVED, RULES, MIXED)
    assert ["archfit: init container docker.io/acme/proxy:1.0 is amd64-only, so this CronJob"
            " cannot use arm64 nodes"] == found  # fmt: skip


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["template"]["spec"]


def _changed(kind: str, edit: Any) -> bool:
    old = workload(kind, APP, nodeSelector={"disk": "ssd"})
    new = copy.deepcopy(old)
    edit(new["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else new["spec"])
    return template_changed(kind, old, new)


@pytest.mark.parametrize(
    ("kind", "edit", "expected"),
    [
        ("Deployment", lambda s: s.update(replicas=5), False),
        ("Deployment", lambda s: s["template"]["metadata"].update(labels={"v": "2"}), False),
        ("Deployment", lambda s: s["template"]["spec"]["containers"][0].update(env=[]), False),
        ("Deployment", lambda s: s["template"]["spec"]["containers"][0].update(image="a:2"), True),
        ("Deployment", lambda s: _pod(s).update(initContainers=[{"image": "i"}]), True),
        ("DaemonSet", lambda s: _pod(s).update(nodeSelector={}), True),
        ("DaemonSet", lambda s: _pod(s).update(tolerations=[{"operator": "Exists"}]), True),
        ("StatefulSet", lambda s: _pod(s).update(affinity={"nodeAffinity": {}}), True),
        ("CronJob", lambda s: s["template"]["spec"]["containers"][0].update(image="a:2"), True),
        ("CronJob", lambda s: s.update(parallelism=2), False),
    ],
    ids=["replicas", "labels", "env", "image", "init-container", "node-selector", "tolerations",
         "affinity", "cronjob-image", "cronjob-parallelism"],
)  # fmt: skip
def test_an_update_needs_a_lookup_only_when_images_or_platform_constraints_change(
    kind: str, edit: Any, expected: bool
) -> None:
    """Scaling, relabelling or new env vars look nothing up; images and constraints do."""
    assert expected == _changed(kind, edit)


def test_a_replicaset_made_by_a_deployment_is_owned_so_its_owner_is_warned_instead() -> None:
    """The client applied the Deployment; its ReplicaSet's warnings would reach a controller."""
    obj = workload("ReplicaSet", AGENT)
    obj["metadata"]["ownerReferences"] = [{"kind": "Deployment", "controller": True, "uid": "u"}]
    assert (True, False) == (
        template("ReplicaSet", obj, "shop").owned,
        template("Deployment", workload("Deployment", AGENT), "shop").owned,
    )


def test_a_long_image_name_is_cut_so_the_warning_stays_under_256_characters() -> None:
    """The API may cut warnings above 256 characters; the image is what gives way."""
    long_name = "registry.example/" + "a" * 400 + ":1"
    found = warnings(
        template("DaemonSet", workload("DaemonSet", long_name), "shop"),
        {long_name: frozenset({AMD64})},
        RULES,
        {ARM64: 1},
    )
    assert [True] == [len(text) <= 256 and text.endswith("In [amd64]") for text in found]


def test_skip_on_the_pod_template_or_the_workload_silences_it() -> None:
    """archfit.io/skip: "true" where its pods carry it, or on the object itself."""
    on_template = workload("DaemonSet", AGENT)
    on_template["spec"]["template"]["metadata"]["annotations"] = {"archfit.io/skip": "true"}
    on_object = workload("DaemonSet", AGENT)
    on_object["metadata"]["annotations"] = {"archfit.io/skip": "true"}
    assert [True, True, False] == [
        template("DaemonSet", obj, "shop").skip
        for obj in (on_template, on_object, workload("DaemonSet", AGENT))
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"nodeSelector": {"kubernetes.io/os": "linux"}}, "will run on 4 arm64 nodes"),
        ({"nodeSelector": {"role": "edge"}}, "will run on up to 4 arm64 nodes"),
        (
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "pool", "operator": "In", "values": ["x"]}]}]}}}},
            "will run on up to 4 arm64 nodes",
        ),
    ],
    ids=["os-only", "other-label", "other-affinity-key"],
)  # fmt: skip
def test_a_daemonset_that_selects_by_other_labels_is_told_the_count_is_a_bound(
    spec: dict[str, Any], expected: str
) -> None:
    """The node index knows platforms only: other selectors make the count "up to"."""
    (found,) = warned("DaemonSet", AGENT, **spec)
    assert expected in found
