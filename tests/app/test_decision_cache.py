"""The verbs' decision cache finds a question again by identity: a copy must not hide it."""

from extender.app_keys import VERBS
from extender.core.platforms import Platform
from extender.core.pods import PullSecretsRef
from tests.app.conftest import TABLE, post
from tests.objects import args_names, node, pod
from tests.support.fakes import FunctionResolver, StaticNodes

NODES = (node("ip-10-0-1-17", "amd64"), node("ip-10-0-2-17", "arm64"))
NAMES = [n["metadata"]["name"] for n in NODES]


async def copying_resolver(image: str, pull: PullSecretsRef) -> frozenset[Platform]:
    """A registry layer that answers every lookup with a new set, equal to the last one."""
    answer = TABLE[image]
    assert isinstance(answer, frozenset)
    return frozenset(list(answer))


async def test_a_second_pod_with_the_same_images_is_decided_once_though_lookups_give_copies(
    make_client,
):
    """Pods in two namespaces (two lookups, each a new equal set) share one decision."""
    client = await make_client(
        nodes=StaticNodes(*NODES), resolver=FunctionResolver(copying_resolver)
    )
    first = await post(client, "filter", args_names(pod("acme/arm:1", namespace="a"), *NAMES))
    second = await post(client, "filter", args_names(pod("acme/arm:1", namespace="b"), *NAMES))
    assert (["ip-10-0-2-17"], first, 1) == (
        second["NodeNames"],
        second,
        client.app[VERBS].decisions_reused,
    )


async def test_a_new_order_of_the_same_nodes_is_answered_from_the_judgement_kept(make_client):
    """kube-scheduler lists the feasible nodes in a new order on most calls: the groups'
    judgement does not depend on it, so the second order is judged from the first's."""
    client = await make_client(nodes=StaticNodes(*NODES))
    await post(client, "filter", args_names(pod("acme/arm:1"), *NAMES))
    again = await post(client, "filter", args_names(pod("acme/arm:1"), *reversed(NAMES)))
    assert (["ip-10-0-2-17"], 1) == (again["NodeNames"], client.app[VERBS].decisions_reused)


async def test_prioritize_is_judged_apart_from_filter_for_the_same_question(make_client):
    """Filter's verdicts are not prioritize's architectures: each verb keeps its own."""
    client = await make_client(nodes=StaticNodes(*NODES))
    await post(client, "filter", args_names(pod("acme/multi:1"), *NAMES))
    scores = await post(client, "prioritize", args_names(pod("acme/multi:1"), *NAMES))
    assert ([{"Host": "ip-10-0-2-17", "Score": 10}], 0) == (
        scores,
        client.app[VERBS].decisions_reused,
    )
