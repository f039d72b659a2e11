"""What the pod watch decodes of a Pod (extender.kube.pod_watch.WatchedPod): only what the
watcher reads, from a pod as kube-apiserver returns it."""

from __future__ import annotations

from email.message import Message
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from bench.pod_watch import pod as realistic_pod
from extender.core.mismatch import ContainerState
from extender.core.pods import PullSecretsRef
from extender.kube.client.api import connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.pod_watch import BOUND, decode_pod, decode_pod_page, pod_list_watch
from tests.support.json_server import json_server


def test_a_failing_pod_decodes_to_its_owner_node_images_and_container_states() -> None:
    """A StartError pod: its controller, node, image, not Ready, and the lastState's text."""
    raw = realistic_pod(50, nodes=10, version=7)  # every 50th pod fails; this one at start
    decoded = decode_pod(orjson.dumps(raw))
    (state,) = decoded.states()
    status = raw["status"]["containerStatuses"][0]
    expected = ContainerState(
        "app",
        status["image"],
        status["imageID"],
        "CrashLoopBackOff",
        "back-off 40s",
        "StartError",
        status["lastState"]["terminated"]["message"],
        3,
    )
    assert (("ReplicaSet", "app-50-7d9f8c6b5"), "node-0", False, True, expected) == (
        decoded.controller(),
        decoded.spec.node_name,
        decoded.ready,
        decoded.failing,
        state,
    )
    assert (raw["spec"]["containers"][0]["image"],) == decoded.images()
    assert PullSecretsRef("ns-50", (), "default") == decoded.pull()


def test_a_running_pod_is_ready_and_not_failing_and_a_page_keeps_its_continue_token() -> None:
    """A page decodes its items and its `continue`; a running pod is Ready, not failing."""
    page = {
        "metadata": {"resourceVersion": "9", "continue": "abc"},
        "items": [realistic_pod(1, nodes=10, version=9)],
    }
    decoded = decode_pod_page(orjson.dumps(page))
    (item,) = decoded.items or ()
    assert ("abc", "9", True, False) == (
        decoded.metadata.next,
        decoded.metadata.resource_version,
        item.ready,
        item.failing,
    )


def test_the_list_and_the_watch_ask_only_for_pods_bound_to_a_node() -> None:
    """An unscheduled pod has no container status to judge: neither call is sent one."""
    asked: list[dict[str, list[str]]] = []

    def answer(path: str, _headers: Message) -> Any:
        query = parse_qs(urlsplit(path).query)
        asked.append(query)
        if "watch" in query:
            return b""  # a watch the server ends at once
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    with json_server(answer) as url:
        watch = pod_list_watch(connect(RestConfig(host=url)), BOUND)
        watch.watch_from(watch.list_all())
    assert [[BOUND], [BOUND]] == [query.get("fieldSelector") for query in asked]
    assert "spec.nodeName!=" == BOUND
