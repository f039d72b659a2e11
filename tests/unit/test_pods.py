"""Extracting images, pull secrets and annotations from a v1.Pod."""

import pytest

from extender.core.pods import PodError, PullSecretsRef, facts
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
