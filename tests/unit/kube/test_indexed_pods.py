"""What the publisher reads of every pod (extender.kube.indexed_pods): images, namespace,
credentials, workload; nothing for pods the policy never reads again."""

from __future__ import annotations

from email.message import Message
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import orjson

from bench.pod_watch import pod as realistic_pod
from extender.core.image_uses import PodUse
from extender.core.pods import PullSecretsRef
from extender.kube.client.api import connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.indexed_pods import IndexedPod, every_pod
from tests.support.json_server import json_server
from tests.support.waiting import wait_for_async

decode = msgspec.json.Decoder(IndexedPod).decode


def test_a_realistic_pod_names_its_images_credentials_and_workload() -> None:
    """A Deployment's pod as kube-apiserver returns it (5 KB): only what the table needs."""
    raw = realistic_pod(1, nodes=10, version=3)
    raw["spec"]["initContainers"] = [{"name": "init", "image": "busybox:1.36"}]
    raw["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    use = decode(orjson.dumps(raw)).use()
    image = raw["spec"]["containers"][0]["image"]
    assert (
        PodUse("ns-1", ("busybox:1.36", image), PullSecretsRef("ns-1", ("regcred",), "default"),
               "ReplicaSet/app-1-7d9f8c6b5")
        == use
    )  # fmt: skip


def test_finished_and_daemonset_pods_name_nothing() -> None:
    """A Succeeded or Failed pod will not be replaced by itself; a DaemonSet's pods the
    policy leaves alone: neither counts."""
    finished = realistic_pod(2, nodes=10, version=3)
    finished["status"]["phase"] = "Succeeded"
    daemon = realistic_pod(3, nodes=10, version=3)
    daemon["metadata"]["ownerReferences"][0]["kind"] = "DaemonSet"
    assert [None, None] == [decode(orjson.dumps(p)).use() for p in (finished, daemon)]


async def test_every_pod_is_listed_and_watched_without_a_field_selector() -> None:
    """Pending pods name images too: the list and the watch ask for every pod, and a relist
    says LISTING first and SYNCED last."""
    asked: list[dict[str, list[str]]] = []
    page = {"metadata": {"resourceVersion": "1"}, "items": [realistic_pod(4, 10, 1)]}

    def answer(path: str, _headers: Message) -> Any:
        query = parse_qs(urlsplit(path).query)
        asked.append(query)
        return b"" if "watch" in query else page

    told: list[str] = []
    with json_server(answer) as url:
        watch = every_pod(connect(RestConfig(host=url)))
        watch.start(lambda kind, pod: told.append(kind))
        try:
            await wait_for_async(lambda: "SYNCED" in told and len(asked) > 1, "a list and a watch")
        finally:
            await watch.stop()
    assert ["LISTING", "ADDED", "SYNCED"] == told[:3]
    assert [None, None] == [query.get("fieldSelector") for query in asked[:2]]
