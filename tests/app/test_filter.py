"""The filter verb through the real app: both nodeCacheCapable modes, policies, switches."""

from structlog.testing import capture_logs

from tests.app.conftest import post, settings
from tests.objects import args_full, args_names, node, pod
from tests.support.fakes import StaticNodes

AMD1, AMD2 = node("ip-10-0-1-17", "amd64"), node("ip-10-0-1-18", "amd64")
ARM1, ARM2 = node("ip-10-0-2-17", "arm64"), node("ip-10-0-2-18", "arm64")
ALL = (AMD1, AMD2, ARM1, ARM2)
NAMES = [n["metadata"]["name"] for n in ALL]
ARM_REASON = "node(s) didn't match image platform: acme/amd:1 has no linux/arm64"


async def test_full_nodes_mode_returns_the_kept_node_objects_unmodified(make_client):
    """nodeCacheCapable: false: amd64-only image keeps the amd64 Node objects as sent."""
    client = await make_client()
    body = await post(client, "filter", args_full(pod("acme/amd:1"), *ALL))
    assert {
        "Nodes": {"metadata": {}, "items": [AMD1, AMD2]},
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},  # nodes passed: the rejected need no reasons
        "Error": "",
    } == body


async def test_rejected_nodes_are_named_with_their_reasons_when_none_is_left(make_client):
    """The reasons reach the pod's FailedScheduling event, so they go out when no node
    passes; while some pass, kube-scheduler treats the dropped ones just the same
    (UnschedulableAndUnresolvable) without them."""
    client = await make_client()
    amd_only = [AMD1, AMD2]
    none_left = await post(client, "filter", args_full(pod("acme/arm:1"), *amd_only))
    some_left = await post(client, "filter", args_full(pod("acme/amd:1"), *ALL))
    reason = "node(s) didn't match image platform: acme/arm:1 has no linux/amd64"
    assert (
        {"ip-10-0-1-17": reason, "ip-10-0-1-18": reason},
        [],
        {},
        2,
    ) == (
        none_left["FailedAndUnresolvableNodes"],
        none_left["Nodes"]["items"],
        some_left["FailedAndUnresolvableNodes"],
        len(some_left["Nodes"]["items"]),
    )


async def test_node_names_mode_uses_the_node_index_for_platforms(make_client):
    """nodeCacheCapable: true: names in, names out, platforms from the node source."""
    client = await make_client(nodes=StaticNodes(*ALL))
    body = await post(client, "filter", args_names(pod("acme/arm:1"), *NAMES))
    assert (["ip-10-0-2-17", "ip-10-0-2-18"], None) == (body["NodeNames"], body["Nodes"])
    assert {} == body["FailedAndUnresolvableNodes"]


async def test_node_names_without_a_node_index_is_a_clear_extender_error(make_client):
    """No silent rejection: the scheduler gets an Error naming the misconfiguration."""
    client = await make_client(nodes=None)
    body = await post(client, "filter", args_names(pod("acme/arm:1"), *NAMES))
    assert (None, {}, {}) == (
        body["NodeNames"],
        body["FailedNodes"],
        body["FailedAndUnresolvableNodes"],
    )
    assert "no node index" in body["Error"]


async def test_an_amd64_only_init_container_restricts_a_multi_arch_pod(make_client):
    """Init containers count like containers."""
    client = await make_client(nodes=StaticNodes(*ALL))
    p = pod("acme/multi:1", init_images=("acme/amd:1",))
    body = await post(client, "filter", args_names(p, *NAMES))
    assert ["ip-10-0-1-17", "ip-10-0-1-18"] == body["NodeNames"]


async def test_unknown_images_pass_every_node_and_warn_under_fail_open(make_client):
    """Default fail-open: a registry outage never rejects, but it is logged."""
    client = await make_client(nodes=StaticNodes(*ALL))
    with capture_logs() as logs:
        body = await post(client, "filter", args_names(pod("acme/down:1"), *NAMES))
    assert (NAMES, {}, {}) == (
        body["NodeNames"],
        body["FailedNodes"],
        body["FailedAndUnresolvableNodes"],
    )
    warnings = [e for e in logs if e["event"] == "image_platforms_unknown"]
    assert ["warning"] == [e["log_level"] for e in warnings]
    assert "connection refused" in warnings[0]["error"]


async def test_unknown_images_fail_every_node_in_failed_nodes_under_fail_closed(make_client):
    """fail-closed: FailedNodes with archfit's own reason, so a later attempt may pass."""
    client = await make_client(
        settings(policy={"failurePolicy": "fail-closed"}), nodes=StaticNodes(*ALL)
    )
    body = await post(client, "filter", args_names(pod("acme/down:1"), *NAMES))
    reason = "node(s) couldn't verify image platform: platforms of acme/down:1 are unknown: "
    assert ([], [reason] * len(NAMES), {}) == (
        body["NodeNames"],
        [why[: len(reason)] for why in body["FailedNodes"].values()],
        body["FailedAndUnresolvableNodes"],
    )
    assert "connection refused" in next(iter(body["FailedNodes"].values()))


async def test_dry_run_logs_and_counts_rejections_but_rejects_nothing(make_client):
    """dry-run decides and explains, and passes every node."""
    client = await make_client(settings(policy={"mode": "dry-run"}), nodes=StaticNodes(*ALL))
    with capture_logs() as logs:
        body = await post(client, "filter", args_names(pod("acme/amd:1"), *NAMES))
    assert (NAMES, {}) == (body["NodeNames"], body["FailedAndUnresolvableNodes"])
    rejected = [e["nodes"] for e in logs if e["event"] == "nodes_rejected"]
    assert [["ip-10-0-2-17", "ip-10-0-2-18"]] == rejected
    metrics = await (await client.get("/metrics")).text()
    assert 'archfit_node_decisions_total{decision="rejected",mode="dry-run"} 2.0' in metrics


async def test_the_skip_annotation_passes_every_node_unexamined(make_client):
    """archfit.io/skip: "true" opts a pod out."""
    client = await make_client(nodes=StaticNodes(*ALL))
    p = pod("acme/amd:1", annotations={"archfit.io/skip": "true"})
    body = await post(client, "filter", args_names(p, *NAMES))
    assert (NAMES, {}) == (body["NodeNames"], body["FailedAndUnresolvableNodes"])


async def test_pods_in_excluded_namespaces_pass_every_node(make_client):
    """excludedNamespaces are never filtered."""
    client = await make_client(
        settings(policy={"excludedNamespaces": ["ops"]}), nodes=StaticNodes(*ALL)
    )
    body = await post(client, "filter", args_names(pod("acme/amd:1", namespace="ops"), *NAMES))
    assert NAMES == body["NodeNames"]


async def test_rejected_nodes_of_one_platform_share_one_explaining_line_and_a_summary(make_client):
    """nodes_rejected carries the nodes, platforms, reason and rule; filter_done sums up.

    O(groups), not O(nodes): 250 rejected arm64 nodes are one line, not 250.
    """
    client = await make_client(nodes=StaticNodes(*ALL))
    with capture_logs() as logs:
        await post(client, "filter", args_names(pod("acme/amd:1", name="api-1"), *NAMES))
    rejected = [e for e in logs if e["event"] == "nodes_rejected"]
    assert [
        {
            "event": "nodes_rejected",
            "log_level": "info",
            "count": 2,
            "nodes": ["ip-10-0-2-17", "ip-10-0-2-18"],
            "node_platform": "linux/arm64",
            "image": "acme/amd:1",
            "image_platforms": ["linux/amd64"],
            "reason": ARM_REASON,
            "rule": "strict",
            "dry_run": False,
        }
    ] == rejected
    assert [] == [e for e in logs if e["event"] == "node_rejected"]
    (summary,) = [e for e in logs if e["event"] == "filter_done"]
    assert (4, 2, 2) == (summary["candidates"], summary["passed"], summary["rejected"])


async def test_at_debug_every_rejected_node_also_gets_its_own_line(make_client):
    """logging.level debug adds node_rejected per node, with the group's fields."""
    client = await make_client(settings(logging={"level": "debug"}), nodes=StaticNodes(*ALL))
    with capture_logs() as logs:
        await post(client, "filter", args_names(pod("acme/amd:1"), *NAMES))
    per_node = [(e["node"], e["reason"]) for e in logs if e["event"] == "node_rejected"]
    assert [("ip-10-0-2-17", ARM_REASON), ("ip-10-0-2-18", ARM_REASON)] == per_node


async def test_a_node_the_index_does_not_know_follows_the_failure_policy(make_client):
    """A name missing from the node index is never rejected as a mismatch."""
    client = await make_client(nodes=StaticNodes(AMD1))
    body = await post(client, "filter", args_names(pod("acme/amd:1"), "ip-10-0-1-17", "new-node"))
    assert (["ip-10-0-1-17", "new-node"], {}) == (
        body["NodeNames"],
        body["FailedAndUnresolvableNodes"],
    )


async def test_an_internal_error_passes_every_node_instead_of_rejecting(make_client):
    """archfit's own bug must never reject a node."""

    class Broken:
        async def platforms(self, image, pull):
            return frozenset({"linux/amd64"})  # a resolver bug: strings, not Platforms

    client = await make_client(
        settings(policy={"failurePolicy": "fail-closed"}),
        nodes=StaticNodes(*ALL),
        resolver=Broken(),
    )
    body = await post(client, "filter", args_names(pod("acme/amd:1"), *NAMES))
    assert (NAMES, {}, {}) == (
        body["NodeNames"],
        body["FailedNodes"],
        body["FailedAndUnresolvableNodes"],
    )


async def test_a_skipped_pod_passes_node_names_even_without_a_node_index(make_client):
    """Opted-out pods need no platforms, so the missing index is no error for them."""
    client = await make_client(nodes=None)
    p = pod("acme/amd:1", annotations={"archfit.io/skip": "true"})
    body = await post(client, "filter", args_names(p, *NAMES))
    assert (NAMES, "") == (body["NodeNames"], body["Error"])


async def test_a_rejection_line_shows_a_huge_images_platforms_as_a_sample_and_a_count(make_client):
    """An index with 5,000 platforms logs 8 of them and `+4992 more`, not all 5,000."""
    from extender.core.platforms import Platform
    from tests.support.fakes import FunctionResolver

    huge = frozenset(Platform("linux", "s390x", f"v{i}") for i in range(5000))

    async def resolver(image, pull):
        return huge

    client = await make_client(nodes=StaticNodes(*ALL), resolver=FunctionResolver(resolver))
    with capture_logs() as logs:
        await post(client, "filter", args_names(pod("acme/huge:1"), *NAMES))
    shown = [e["image_platforms"] for e in logs if e["event"] == "nodes_rejected"]
    assert 2 == len(shown)  # one line per node platform
    assert (9, "+4992 more") == (len(shown[0]), shown[0][-1])


async def test_a_repeated_question_is_answered_again_after_the_node_index_changes(make_client):
    """Pods with the same images and nodes reuse one decision, until the index publishes a
    new snapshot: a node relabelled from arm64 to amd64 then passes the amd64-only pod."""
    nodes = StaticNodes(*ALL)
    client = await make_client(nodes=nodes)
    first = await post(client, "filter", args_names(pod("acme/amd:1", name="a"), *NAMES))
    again = await post(client, "filter", args_names(pod("acme/amd:1", name="b"), *NAMES))
    relabelled = StaticNodes(AMD1, AMD2, node(ARM1["metadata"]["name"], "amd64"), ARM2)
    nodes._nodes = relabelled.snapshot()  # what NodeIndex._publish does: a new snapshot
    after = await post(client, "filter", args_names(pod("acme/amd:1", name="c"), *NAMES))
    assert (NAMES[:2], NAMES[:2], NAMES[:3]) == (
        first["NodeNames"],
        again["NodeNames"],
        after["NodeNames"],
    )


async def test_a_name_the_node_index_does_not_know_is_doubted_though_every_group_passes(
    make_client,
):
    """A multi-arch pod passes every indexed node, but a node not (yet) in the index is
    unknown: under fail-closed it fails, on the first call and on the next, whose groups'
    judgement is kept."""
    client = await make_client(
        settings(policy={"failurePolicy": "fail-closed"}), nodes=StaticNodes(*ALL)
    )
    names = [*NAMES, "ip-10-0-9-99"]
    answers = [await post(client, "filter", args_names(pod("acme/multi:1"), *names))]
    answers.append(await post(client, "filter", args_names(pod("acme/multi:1"), *names)))
    reason = "node(s) couldn't verify image platform: node has no kubernetes.io/arch label"
    assert [(NAMES, {"ip-10-0-9-99": reason})] * 2 == [
        (a["NodeNames"], a["FailedNodes"]) for a in answers
    ]
