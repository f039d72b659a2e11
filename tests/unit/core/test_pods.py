"""Extracting images, pull secrets and annotations from a v1.Pod."""

from types import MappingProxyType

import pytest

from extender.core.pods import (
    REQUIRED_TERMS,
    PodError,
    PullSecretsRef,
    ShapeError,
    facts,
    read_mapping,
    read_mapping_at,
    read_pod,
)
from tests.objects import pod


def test_images_are_init_containers_then_containers_without_duplicates():
    """Every image pulled before the pod runs counts once, init containers first."""
    p = pod("app:1", "sidecar:2", "app:1", init_images=("migrate:1", "app:1"))
    assert ("migrate:1", "app:1", "sidecar:2") == facts(p).images


def test_pull_secrets_keep_the_pod_order_and_service_account():
    """Credentials are looked up in the order kubelet uses."""
    p = pod("app:1", pull_secrets=("b", "a"), service_account="builder", namespace="ci")
    assert PullSecretsRef("ci", ("b", "a"), "builder") == facts(p).pull


@pytest.mark.parametrize(
    ("annotations", "skip", "prefer"),
    [
        (None, False, ()),
        ({"archfit.io/skip": "true"}, True, ()),
        ({"archfit.io/skip": "True "}, True, ()),
        ({"archfit.io/skip": "false"}, False, ()),
        ({"archfit.io/prefer-arch": "amd64"}, False, ("amd64",)),
        ({"archfit.io/prefer-arch": "x86_64, aarch64"}, False, ("amd64", "arm64")),
    ],
)
def test_annotations_set_skip_and_preferred_architecture(annotations, skip, prefer):
    """The opt-out and prefer-arch annotations are read leniently."""
    f = facts(pod("app:1", annotations=annotations))
    assert (skip, prefer) == (f.skip, f.prefer_arch)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.update(spec=[]), "Pod.spec must be an object"),
        (lambda p: p["spec"].update(containers={}), "Pod.spec.containers must be a list"),
        (lambda p: p["spec"]["containers"][0].update(image=7), r"containers\[0\].image must be"),
        (lambda p: p["spec"]["containers"][0].update(image=" "), r"containers\[0\].image is empty"),
        (lambda p: p["metadata"].update(namespace=1), "metadata.namespace must be a string"),
        (lambda p: p["spec"].update(imagePullSecrets="x"), "imagePullSecrets must be a list"),
    ],
)
def test_wrongly_typed_pods_raise_an_error_naming_the_field(mutate, message):
    """A malformed pod is a PodError that says where."""
    p = pod("app:1")
    mutate(p)
    with pytest.raises(PodError, match=message):
        facts(p)


def test_a_pods_view_holds_the_parts_a_decision_reads_as_the_pod_has_them():
    """read_pod reads each part once; the view's mappings are the pod's own, not copies."""
    p = pod("app:1", annotations={"archfit.io/prefer-arch": "arm64"})
    p["metadata"]["labels"] = {"app": "web"}
    p["spec"]["nodeSelector"] = {"kubernetes.io/os": "linux"}
    p["spec"]["affinity"] = AFFINITY
    view = read_pod(p)
    assert (
        p["metadata"],
        p["metadata"]["labels"],
        p["metadata"]["annotations"],
        p["spec"],
        p["spec"]["nodeSelector"],
        AFFINITY["nodeAffinity"],
        facts(p),
    ) == (
        view.metadata,
        view.labels,
        view.annotations,
        view.spec,
        view.placement.node_selector,
        view.placement.node_affinity,
        view.facts,
    )
    assert view.spec is p["spec"]


def test_a_view_of_a_pod_without_labels_selector_or_affinity_reads_them_empty():
    """Absent or null parts are empty mappings, as read_mapping reads them."""
    p = pod("app:1")
    p["metadata"]["labels"] = None
    view = read_pod(p)
    assert ({}, {}, {}) == (
        view.labels,
        view.placement.node_selector,
        view.placement.node_affinity,
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p["metadata"].update(labels=["a"]), "metadata.labels must be an object"),
        (lambda p: p["spec"].update(nodeSelector="x"), "spec.nodeSelector must be an object"),
        (lambda p: p["spec"].update(affinity=[]), "spec.affinity must be an object"),
        (
            lambda p: p["spec"].update(
                affinity={"nodeAffinity": {REQUIRED_TERMS: {"nodeSelectorTerms": {}}}}
            ),
            "nodeSelectorTerms must be a list",
        ),
        (
            lambda p: p["spec"].update(
                affinity={"nodeAffinity": {REQUIRED_TERMS: {"nodeSelectorTerms": [1]}}}
            ),
            r"nodeSelectorTerms\[0\] must be an object",
        ),
    ],
)
def test_a_view_of_a_pod_the_api_would_refuse_names_the_field(mutate, message):
    """A placement or labels shaped as no API pod is a ShapeError that says where."""
    p = pod("app:1")
    mutate(p)
    with pytest.raises(ShapeError, match=message):
        read_pod(p)


class _Refused(Exception):
    """The error a caller names (ShapeError, WorkloadError): the reader raises that one."""


def _node_affinity_read_level_by_level(spec):
    """What mutation._node_affinity read before read_mapping_at, one read_mapping per level."""
    affinity = read_mapping(spec.get("affinity"), "spec.affinity", _Refused)
    return read_mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity", _Refused)


AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}


@pytest.mark.parametrize(
    ("obj", "path", "expected"),
    [
        ({"spec": {"affinity": AFFINITY}}, "spec.affinity.nodeAffinity", AFFINITY["nodeAffinity"]),
        ({"spec": {"affinity": AFFINITY}}, "spec", {"affinity": AFFINITY}),
        ({}, "spec.affinity.nodeAffinity", {}),
        ({"spec": None}, "spec.affinity.nodeAffinity", {}),
        ({"spec": {"affinity": None}}, "spec.affinity.nodeAffinity", {}),
        ({"spec": {"affinity": {}}}, "spec.affinity.nodeAffinity", {}),
        # Another Mapping than a dict (what JSON decodes to) takes the reader's other path.
        (
            {"spec": MappingProxyType({"affinity": AFFINITY})},
            "spec.affinity.nodeAffinity",
            AFFINITY["nodeAffinity"],
        ),
        ({"spec": MappingProxyType({})}, "spec.affinity.nodeAffinity", {}),
    ],
)
def test_a_path_reads_the_object_at_its_end_or_nothing_once_a_level_is_missing(obj, path, expected):
    """Absent and null levels read as {} all the way down, as read_mapping reads one."""
    assert expected == read_mapping_at(obj, path)


@pytest.mark.parametrize(
    ("obj", "path", "message"),
    [
        ({"spec": {"affinity": []}}, "spec.affinity.nodeAffinity", "spec.affinity must be"),
        ({"spec": "x"}, "spec.affinity.nodeAffinity", "spec must be"),
        ({"spec": {"affinity": {"nodeAffinity": 7}}}, "spec.affinity.nodeAffinity", "nodeAffinity"),
        (
            {"spec": MappingProxyType({"affinity": []})},
            "spec.affinity.nodeAffinity",
            "^spec.affinity must be",
        ),
    ],
)
def test_a_level_that_is_not_an_object_is_refused_by_its_path(obj, path, message):
    """The first level that is not an object is named, in the error the caller asked for."""
    with pytest.raises(_Refused, match=message):
        read_mapping_at(obj, path, _Refused)


@pytest.mark.parametrize(
    "spec",
    [
        {"affinity": AFFINITY},
        {"affinity": None},
        {"affinity": ["in", "the", "middle"]},
        {"affinity": {"nodeAffinity": "at the end"}},
        {"affinity": {"nodeAffinity": None}},
        {},
    ],
)
def test_a_path_answers_what_reading_each_level_in_turn_answered(spec):
    """The same object, or the same error and text, as the level-by-level reads it replaces."""

    def outcome(read):
        try:
            return read()
        except _Refused as error:
            return f"refused: {error}"

    assert outcome(lambda: _node_affinity_read_level_by_level(spec)) == outcome(
        lambda: read_mapping_at(spec, "affinity.nodeAffinity", _Refused, within="spec")
    )
