"""What the pod watch decodes of a Pod (extender.kube.pod_watch.WatchedPod): only what the
watcher reads, from a pod as kube-apiserver returns it."""

from __future__ import annotations

from typing import Any

import orjson
from kubernetes import client

from bench.pod_watch import pod as realistic_pod
from extender.core.mismatch import ContainerState
from extender.core.pods import PullSecretsRef
from extender.kube.pod_watch import BOUND, PodWatch, decode_pod, decode_pod_page


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


class _Response:
    """A list page or an empty watch, as the kubernetes client's unread response."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = data

    def stream(self, decode_content: bool = True) -> list[bytes]:
        return []

    def release_conn(self) -> None:
        pass


class _PodCalls:
    """list_pod_for_all_namespaces, remembering the field selector of each call."""

    def __init__(self) -> None:
        self.selectors: list[str | None] = []

    def list_pod_for_all_namespaces(self, **query: Any) -> _Response:
        self.selectors.append(query.get("field_selector"))
        return _Response(orjson.dumps({"metadata": {"resourceVersion": "1"}, "items": []}))


def test_the_list_and_the_watch_ask_only_for_pods_bound_to_a_node() -> None:
    """An unscheduled pod has no container status to judge: neither call is sent one."""
    watch = PodWatch(client.ApiClient(client.Configuration()))
    calls = _PodCalls()
    watch._core = calls  # type: ignore[assignment]
    watch.watch_from(watch.list_all())
    assert [BOUND, BOUND] == calls.selectors
    assert "spec.nodeName!=" == BOUND
