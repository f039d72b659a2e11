"""The workload warnings path through the webhook's TLS listener, as kube-apiserver calls it."""

from __future__ import annotations

from typing import Any

import pytest

from extender.app_keys import METRICS
from extender.core.platforms import Platform
from extender.core.pods import PullSecretsRef
from tests.app import test_webhook
from tests.app.conftest import table_resolver
from tests.app.test_webhook import Start, Webhook
from tests.objects import node
from tests.support.fakes import FunctionResolver, StaticNodes

start = test_webhook.start  # the pod webhook's fixture: the app with its TLS listener
MIXED = StaticNodes(node("a1"), node("a2"), node("r1", "arm64"), node("r2", "arm64"))
DAEMONSET_WARNING = (
    "archfit: image acme/amd:1 has no linux/arm64; this DaemonSet will run on 2 arm64 nodes"
    " and fail there; add nodeAffinity kubernetes.io/arch In [amd64]"
)


def daemonset(image: str, **labels: str) -> dict[str, Any]:
    containers = [{"name": "agent", "image": image}]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "shop", "labels": labels},
        "spec": {"template": {"metadata": {}, "spec": {"containers": containers}}},
    }


def review(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """A workload AdmissionReview as kube-apiserver sends it to a validating webhook."""
    group, _, version = obj["apiVersion"].rpartition("/")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-9",
            "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "namespace": "shop",
            "operation": "CREATE" if old is None else "UPDATE",
            "object": obj,
            "oldObject": old,
        },
    }


async def warn(hook: Webhook, body: Any, status: int = 200) -> dict[str, Any]:
    return await hook.call(body, status, path="/warn")


def counted(hook: Webhook, outcome: str) -> float:
    value = hook.app[METRICS].registry.get_sample_value(
        "archfit_workload_reviews_total", {"outcome": outcome}
    )
    return value or 0.0


async def test_a_daemonset_create_is_allowed_with_the_warning_for_its_arm64_nodes(
    start: Start,
) -> None:
    """The answer allows, echoes the uid, and carries the warning with the node count."""
    hook = await start(nodes=MIXED)
    answer = (await warn(hook, review(daemonset("acme/amd:1"))))["response"]
    expected = {"uid": "u-9", "allowed": True, "warnings": [DAEMONSET_WARNING]}
    assert (expected, 1.0) == (answer, counted(hook, "warned"))


async def test_an_update_that_keeps_the_images_looks_nothing_up(start: Start) -> None:
    """A relabelled DaemonSet: the resolver is never asked, and nothing is warned."""
    asked: list[str] = []

    async def resolver(image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        asked.append(image)
        return await table_resolver(image, pull)

    hook = await start(resolver=FunctionResolver(resolver), nodes=MIXED)
    old, new = daemonset("acme/amd:1"), daemonset("acme/amd:1", team="infra")
    answer = (await warn(hook, review(new, old)))["response"]
    expected = ({"uid": "u-9", "allowed": True}, [], 1.0)
    assert expected == (answer, asked, counted(hook, "unchanged"))


async def test_an_image_the_registry_cannot_answer_for_is_allowed_without_a_warning(
    start: Start,
) -> None:
    """Fail open: an unknown image is not warned about, and counted as unknown."""
    hook = await start(nodes=MIXED)
    answer = (await warn(hook, review(daemonset("acme/down:1"))))["response"]
    assert ({"uid": "u-9", "allowed": True}, 1.0) == (answer, counted(hook, "unknown"))


@pytest.mark.parametrize(
    ("body", "status"),
    [(b"{not json", 400), ({"apiVersion": "v1", "kind": "AdmissionReview"}, 400)],
    ids=["not-json", "not-a-review"],
)
async def test_a_body_that_is_not_an_admission_review_is_a_400(
    start: Start, body: Any, status: int
) -> None:
    """Bad input is the client's problem, answered as such: never a 500."""
    hook = await start(nodes=MIXED)
    answer = await warn(hook, body, status)
    assert (True, 1.0) == ("error" in answer, counted(hook, "bad_request"))


async def test_with_the_warnings_off_the_path_is_not_served(start: Start) -> None:
    """webhook.workloadWarnings.enabled: false leaves only the pod webhook."""
    hook = await start(nodes=MIXED, webhook={"workloadWarnings": {"enabled": False}})
    async with hook.session.post(
        f"https://127.0.0.1:{hook.port}/warn", data=b"{}", ssl=hook.trust()
    ) as response:
        assert 404 == response.status
