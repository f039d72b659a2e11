"""Namespace and workload arch preferences and the arm64 share (issue 22), with the real
Karpenter and the webhook only (kube-scheduler runs with no extender).

kube-controller-manager runs the Deployment and ReplicaSet controllers (tests/e2e/
controllers.py), so the pods reach the webhook as a real rollout sends them: only
`generateName` and a controller ownerReference, in the ReplicaSet controller's slow-start
batches. `pytest -s` prints what each case measured.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests import objects
from tests.e2e import cluster
from tests.e2e.archfit import archfit_command
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.catalog import Images
from tests.e2e.gating import logged
from tests.e2e.webhook import WebhookArchfit
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

PREFER = "archfit.io/prefer-arch"
SHARE = "archfit.io/arm64-share"
CHOICE = "archfit.io/arch-choice"


@pytest.fixture
def hook(
    autoscaled_controllers: AutoscaledCluster,
    autoscaled: AutoscaledCluster,
    autoscaled_namespace: str,
    autoscaled_settings: dict[str, Any],
    images: Images,
    tmp_path: Path,
) -> Iterator[WebhookArchfit]:
    """archfit's webhook registered and called; kube-scheduler with no extender; the
    Deployment and ReplicaSet controllers running."""
    with autoscaled.serving_webhook(
        autoscaled_settings, autoscaled_namespace, images.multi.reference, tmp_path, extender=False
    ) as running:
        yield running


def deployment(
    autoscaled: AutoscaledCluster,
    namespace: str,
    name: str,
    image: str,
    replicas: int,
    annotations: Mapping[str, str],
) -> None:
    """A Deployment whose template carries `annotations`; the real controllers make its
    ReplicaSet and pods."""
    template = cluster.pod_manifest(name, [image], annotations=annotations)
    labels = {"app": name}
    client.AppsV1Api(autoscaled.api_client).create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels, "annotations": dict(annotations)},
                    "spec": template["spec"],
                },
            },
        },
    )


def pods_of(autoscaled: AutoscaledCluster, namespace: str, app: str) -> list[Any]:
    return list(autoscaled.core.list_namespaced_pod(namespace, label_selector=f"app={app}").items)


def wait_all_bound(autoscaled: AutoscaledCluster, namespace: str, app: str, count: int) -> None:
    def bound() -> bool:
        pods = pods_of(autoscaled, namespace, app)
        return len(pods) == count and all(p.spec.node_name for p in pods)

    try:
        wait_for(bound, f"{count} pods of {app} to be bound")
    except TimeoutError as error:
        raise TimeoutError(f"{error}; {autoscaled.diagnosis()}") from None


def node_arches(autoscaled: AutoscaledCluster) -> dict[str, str]:
    return {
        n.metadata.name: n.metadata.labels["kubernetes.io/arch"]
        for n in autoscaled.core.list_node().items
    }


def admitted(hook: WebhookArchfit, namespace: str) -> list[dict[str, Any]]:
    return [line for line in logged(hook, "pod_admitted") if line.get("namespace") == namespace]


def test_a_namespace_preference_and_a_workload_preference_each_win_where_they_should(
    autoscaled: AutoscaledCluster,
    autoscaled_namespace: str,
    hook: WebhookArchfit,
    images: Images,
) -> None:
    """The namespace says amd64 (the global setting arm64): a plain pod prefers amd64 and
    Karpenter launches amd64 for it; a workload whose template says arm64 prefers arm64; each
    pod_admitted line names the level that won."""
    namespace = autoscaled_namespace
    autoscaled.core.patch_namespace(namespace, {"metadata": {"annotations": {PREFER: "amd64"}}})
    probe = cluster.pod_manifest("probe", [images.multi.reference])

    def namespace_seen() -> bool:  # the namespace watch carries the annotation to the webhook
        autoscaled.core.create_namespaced_pod(namespace, probe, dry_run="All")
        return any(line.get("preference_from") == "namespace" for line in admitted(hook, namespace))

    wait_for(namespace_seen, "the webhook to see the namespace's annotation")
    # The extender's prioritize reads the same namespace watch: amd64 scores highest.
    scored = prioritize(hook, {**probe, "metadata": {"name": "probe", "namespace": namespace}})
    plain = cluster.create_pod(
        autoscaled.core, namespace, cluster.pod_manifest("plain", [images.multi.reference])
    )
    # Alone, so that the only launch is the one its preference asks for.
    plain_node = autoscaled.wait_scheduled(namespace, plain)
    deployment(autoscaled, namespace, "api", images.multi.reference, 1, {PREFER: "arm64"})
    wait_all_bound(autoscaled, namespace, "api", 1)
    (workload_pod,) = pods_of(autoscaled, namespace, "api")

    preferred = {
        "plain": preferred_arches(autoscaled.core.read_namespaced_pod(plain, namespace)),
        "workload": preferred_arches(workload_pod),
    }
    levels = {
        line["pod"]: line["preference_from"]
        for line in admitted(hook, namespace)
        if "outcome" in line
    }
    launched = [(launch.name, launch.arch) for launch in autoscaled.launches()]
    print(
        f"preferences: preferred {preferred}, levels {levels}, launches {launched}, "
        f"prioritize {scored}"
    )
    assert {"amd-a": 10} == scored
    assert {"plain": [("amd64", 100)], "workload": [("arm64", 100)]} == preferred
    generated = workload_pod.metadata.generate_name  # the ReplicaSet's name and a dash
    assert ("namespace", "workload") == (levels["plain"], levels[generated])
    assert [(plain_node, "amd64")] == launched[:1]


def prioritize(hook: WebhookArchfit, pod: dict[str, Any]) -> dict[str, int]:
    """The scores archfit's prioritize gives `pod` on an amd64 and an arm64 node."""
    offered = (objects.node("amd-a", "amd64"), objects.node("arm-a", "arm64"))
    request = urllib.request.Request(  # noqa: S310 (loopback http)
        f"{hook.url_prefix}/prioritize",
        json.dumps(objects.args_full(pod, *offered)).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return {entry["Host"]: entry["Score"] for entry in json.load(response)}


def preferred_arches(pod: Any) -> list[tuple[str, int]]:
    """(architecture, weight) of each preferred node affinity term on the arch label."""
    terms = pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    return [
        (value, term.weight)
        for term in terms or ()
        for expression in term.preference.match_expressions
        if expression.key == "kubernetes.io/arch"
        for value in expression.values
    ]


def test_an_arm64_share_of_25_puts_a_quarter_of_100_replicas_on_arm64_and_leaves_single_arch_alone(
    autoscaled: AutoscaledCluster,
    autoscaled_namespace: str,
    hook: WebhookArchfit,
    images: Images,
    autoscaled_settings: dict[str, Any],
    tmp_path: Path,
) -> None:
    """100 replicas of a multi-arch image at arm64-share 25: 20..30 on arm64, the rest amd64,
    Karpenter launching both; 5 replicas of an amd64-only image at the same share: no choice."""
    namespace = autoscaled_namespace
    multi, amd64_only = images.multi.reference, images.amd64_only.reference
    started = time.monotonic()
    deployment(autoscaled, namespace, "web", multi, 100, {SHARE: "25"})
    deployment(autoscaled, namespace, "legacy", amd64_only, 5, {SHARE: "25"})
    wait_for(lambda: len(pods_of(autoscaled, namespace, "web")) == 100, "100 pods of web")
    seconds = time.monotonic() - started
    wait_all_bound(autoscaled, namespace, "web", 100)
    wait_all_bound(autoscaled, namespace, "legacy", 5)

    arches = node_arches(autoscaled)
    web = pods_of(autoscaled, namespace, "web")
    landed = Counter(arches[p.spec.node_name] for p in web)
    labelled = Counter((p.metadata.labels or {}).get(CHOICE) for p in web)
    launches = sorted({(launch.arch, launch.nodepool) for launch in autoscaled.launches()})
    print(
        f"arm64-share 25, 100 replicas created by the controller in {seconds:.1f} s: "
        f"landed {dict(landed)}, "
        f"labelled {dict(labelled)}, launches {launches} ({len(autoscaled.launches())} nodes)"
    )
    assert 20 <= landed["arm64"] <= 30, landed
    assert 100 == landed["arm64"] + landed["amd64"]
    # The label says where each pod went, and the constraint is required (what Karpenter reads).
    assert all(arches[p.spec.node_name] == p.metadata.labels[CHOICE] for p in web)
    assert [("amd64", "general"), ("arm64", "graviton")] == launches

    single = pods_of(autoscaled, namespace, "legacy")
    assert [None] * 5 == [(p.metadata.labels or {}).get(CHOICE) for p in single]
    assert {"amd64"} == {arches[p.spec.node_name] for p in single}
    shares = {
        line.get("arch_choice")
        for line in admitted(hook, namespace)
        if line["pod"].startswith("legacy-")
    }
    assert {None} == shares

    # The split is counted from the pod watch, not only from this replica's recent choices:
    # delete 8 arm64 pods, and the 8 the ReplicaSet controller makes to replace them all
    # take arm64. The controllers are paused meanwhile: a replacement it makes within
    # milliseconds of a deletion can reach admission before archfit's watch shows the
    # deletion, and take the other side (docs/webhook.md, limits).
    autoscaled.stop_controllers()
    doomed = [p.metadata.name for p in web if p.metadata.labels[CHOICE] == "arm64"][:8]
    for name in doomed:
        autoscaled.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    wait_for(lambda: len(pods_of(autoscaled, namespace, "web")) == 92, "8 pods to be deleted")
    time.sleep(1.0)  # the watch's DELETED events reach archfit
    autoscaled.start_controllers()

    def replaced_all() -> bool:
        names = {p.metadata.name for p in pods_of(autoscaled, namespace, "web")}
        return len(names) == 100 and not names & set(doomed)

    wait_for(replaced_all, "the ReplicaSet controller to replace the 8 deleted pods")
    wait_all_bound(autoscaled, namespace, "web", 100)
    arches = node_arches(autoscaled)
    replaced = Counter(
        p.metadata.labels[CHOICE]
        for p in pods_of(autoscaled, namespace, "web")
        if p.metadata.name not in {q.metadata.name for q in web}
    )
    landed = Counter(arches[p.spec.node_name] for p in pods_of(autoscaled, namespace, "web"))
    print(f"8 arm64 pods deleted, 8 created: {dict(replaced)}; landed {dict(landed)}")
    assert ({"arm64": 8}, 25) == (dict(replaced), landed["arm64"])

    # `archfit audit` shows the share each workload reached.
    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump(autoscaled_settings))
    command = [*archfit_command(), "audit", "--config", str(config), "-n", namespace, "-o", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert 0 == done.returncode, done.stderr
    reached = {w["name"]: w["archChoice"] for w in json.loads(done.stdout)["workloads"]}
    print(f"audit: {reached}")
    assert {"arm64": landed["arm64"], "amd64": landed["amd64"]} == {
        side: reached["web"][side] for side in ("arm64", "amd64")
    }
    assert reached["legacy"] is None
