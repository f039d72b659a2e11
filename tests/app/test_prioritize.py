"""The prioritize verb through the real app: preference, prefer-arch, dry-run, fairness.

Only hosts scored above 0 are listed: kube-scheduler adds an extender's scores only for
the hosts it returns (schedule_one.go prioritizeNodes), so an absent host counts as 0.
"""

from tests.app.conftest import post, settings
from tests.objects import args_full, args_names, node, pod
from tests.support.fakes import StaticNodes

ALL = (node("amd-a", "amd64"), node("amd-b", "amd64"), node("arm-a", "arm64"))
NAMES = ["amd-a", "amd-b", "arm-a"]


def scores(body):
    return {entry["Host"]: entry["Score"] for entry in body}


async def test_multi_arch_pods_score_arm64_highest_by_default(make_client):
    """Default preference arm64: 10, amd64: 0."""
    client = await make_client(nodes=StaticNodes(*ALL))
    body = await post(client, "prioritize", args_names(pod("acme/multi:1"), *NAMES))
    assert {"arm-a": 10} == scores(body)
    assert all(isinstance(entry["Score"], int) for entry in body)


async def test_prioritize_works_with_full_node_objects_too(make_client):
    """nodeCacheCapable: false requests carry the platforms in the Node objects."""
    client = await make_client()
    body = await post(client, "prioritize", args_full(pod("acme/multi:1"), *ALL))
    assert {"arm-a": 10} == scores(body)


async def test_the_prefer_arch_annotation_overrides_the_configured_preference(make_client):
    """archfit.io/prefer-arch: amd64 flips the preference for that pod."""
    client = await make_client(nodes=StaticNodes(*ALL))
    p = pod("acme/multi:1", annotations={"archfit.io/prefer-arch": "amd64"})
    body = await post(client, "prioritize", args_names(p, *NAMES))
    assert {"amd-a": 10, "amd-b": 10} == scores(body)


async def test_single_arch_and_unknown_pods_get_no_scores(make_client):
    """No bias for pods that run on one architecture or whose platforms are unknown."""
    client = await make_client(nodes=StaticNodes(*ALL))
    for image in ("acme/amd:1", "acme/down:1"):
        body = await post(client, "prioritize", args_names(pod(image), *NAMES))
        assert [] == body, image


async def test_dry_run_never_scores(make_client):
    """dry-run logs what it would prefer, but answers equal scores."""
    client = await make_client(settings(policy={"mode": "dry-run"}), nodes=StaticNodes(*ALL))
    body = await post(client, "prioritize", args_names(pod("acme/multi:1"), *NAMES))
    assert [] == body


async def test_skipped_and_excluded_pods_get_no_scores(make_client):
    """The opt-out annotation and excluded namespaces apply to prioritize too."""
    client = await make_client(
        settings(policy={"excludedNamespaces": ["ops"]}), nodes=StaticNodes(*ALL)
    )
    skipped = pod("acme/multi:1", annotations={"archfit.io/skip": "true"})
    excluded = pod("acme/multi:1", namespace="ops")
    for p in (skipped, excluded):
        body = await post(client, "prioritize", args_names(p, *NAMES))
        assert [] == body
