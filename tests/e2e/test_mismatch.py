"""The mismatch watcher against the real kube-apiserver (issue 18, done-when 1, 2, 3 and 6).

Its own control plane: archfit runs with its webhook, the watcher (with remediation on) and
Redis; a stand-in kubelet (tests/e2e/runtime_kubelet.py) writes container statuses through
pods/status with the runtimes' own texts, and serves previous logs through the apiserver's
pods/log. No kube-controller-manager runs: the ReplicaSets, Deployments and replacement pods
a controller would make are created here, owned as a controller owns them.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.e2e import cluster
from tests.e2e.archfit import Archfit, archfit_command, archfit_settings, merge
from tests.e2e.catalog import Images
from tests.e2e.conftest import HookedArchfit, OwnControlPlane
from tests.e2e.runtime_kubelet import (
    CONTAINERD_PULL,
    CRIO_PULL,
    SCRIPT_LOG,
    RuntimeKubelet,
    crash_looping,
    pull_failing,
    running,
    start_failing,
)
from tests.e2e.topology import NODES
from tests.e2e.webhook import WebhookArchfit
from tests.support.images import OCI_INDEX, Pusher, digest_of
from tests.support.redis import RedisProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

FINDING = "ArchfitPlatformMismatch"
ARM64_NODE = "arm64-a"


@dataclass
class Plane:
    core: client.CoreV1Api
    apps: client.AppsV1Api
    policy: client.PolicyV1Api
    hook: WebhookArchfit
    kubelet: RuntimeKubelet
    lying: str
    """A tag whose index claims linux/arm64 for an amd64 image."""
    lying_digest: str
    settings: dict[str, Any]
    workdir: Path
    kubeconfig: Path


def _push_lying_image(registry_url: str) -> tuple[str, str]:
    """An index whose linux/arm64 entry is an amd64 image (an empty or wrong architecture in
    the build: grafana/xk6#233, go-containerregistry#1918)."""
    pusher = Pusher(registry_url)
    amd64 = pusher.single("lies/app", None, "linux/amd64", salt="amd64")
    also_amd64 = pusher.single("lies/app", None, "linux/amd64", salt="claims-arm64")
    entries = [
        {
            "mediaType": amd64.media_type,
            "digest": amd64.digest,
            "size": amd64.size,
            "platform": {"os": "linux", "architecture": "amd64"},
        },
        {
            "mediaType": also_amd64.media_type,
            "digest": also_amd64.digest,
            "size": also_amd64.size,
            "platform": {"os": "linux", "architecture": "arm64"},
        },
    ]
    body = json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    pusher.manifest("lies/app", "1.0", body, OCI_INDEX)
    return f"{pusher.host}/lies/app:1.0", digest_of(body)


@pytest.fixture(scope="module")
def plane(
    own_control_plane: OwnControlPlane,
    hooked_archfit: HookedArchfit,
    images: Images,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Plane]:
    """Control plane, nodes with the stand-in kubelet, Redis, archfit with webhook and watcher."""
    workdir = tmp_path_factory.mktemp("mismatch-plane")
    with own_control_plane(workdir / "control-plane") as control_plane:
        redis = RedisProcess.start(workdir / "redis")
        kubelet: RuntimeKubelet | None = None
        try:
            core = cluster.core_api(control_plane.admin_kubeconfig)
            kubelet = RuntimeKubelet(core, workdir / "kubelet").start([n.name for n in NODES])
            lying, lying_digest = _push_lying_image(images.public.url)
            settings = merge(
                archfit_settings(control_plane.admin_kubeconfig, images),
                {
                    "cache": {"url": redis.url},
                    "watcher": {
                        "remediate": True,
                        "evictionsPerMinute": 600,
                        "evidenceSyncSeconds": 0.5,
                    },
                    "webhook": {"unknownImages": "admit"},
                },
            )
            with hooked_archfit(control_plane, settings, workdir) as hook:
                api = config.new_client_from_config(config_file=str(control_plane.admin_kubeconfig))
                yield Plane(
                    core,
                    client.AppsV1Api(api),
                    client.PolicyV1Api(api),
                    hook,
                    kubelet,
                    lying,
                    lying_digest,
                    settings,
                    workdir,
                    control_plane.admin_kubeconfig,
                )
        finally:
            if kubelet is not None:
                kubelet.stop()
            redis.stop()


@pytest.fixture
def space(plane: Plane) -> Iterator[str]:
    name = f"mm-{uuid.uuid4().hex[:10]}"
    cluster.create_namespace(plane.core, name)
    try:
        yield name
    finally:
        cluster.delete_namespace_pods(plane.core, name)


# --- what a controller would create --------------------------------------------------------


def _deployment(plane: Plane, namespace: str, name: str, image: str) -> client.V1ReplicaSet:
    """A Deployment and the ReplicaSet it owns (as the deployment controller makes it)."""
    labels = {"app": name}
    template = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c0", "image": image}]},
    }
    deployment = plane.apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": name,
        "uid": deployment.metadata.uid,
        "controller": True,
    }
    return plane.apps.create_namespaced_replica_set(
        namespace,
        {
            "metadata": {"name": f"{name}-5d9c", "ownerReferences": [owner], "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
        },
    )


def _pod(
    plane: Plane,
    namespace: str,
    name: str,
    image: str,
    *,
    owner: client.V1ReplicaSet | None,
    node: str | None = ARM64_NODE,
    labels: dict[str, str] | None = None,
    container: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
) -> client.V1Pod:
    manifest = cluster.pod_manifest(name, [image])
    manifest["spec"]["containers"][0] |= container or {}
    manifest["spec"] |= spec or {}
    if node:
        manifest["spec"]["nodeName"] = node
    manifest["metadata"]["labels"] = labels or {}
    if owner is not None:
        manifest["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": owner.metadata.name,
                "uid": owner.metadata.uid,
                "controller": True,
            }
        ]
    return plane.core.create_namespaced_pod(namespace, manifest)


def _events(plane: Plane, namespace: str, kind: str, name: str) -> list[client.CoreV1Event]:
    listed = plane.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
    )
    return [e for e in listed.items if e.reason == FINDING]


def _metric(archfit: Archfit, name: str, labels: str = "") -> float:
    url = f"http://127.0.0.1:{archfit.port}/metrics"
    with urllib.request.urlopen(url, timeout=2) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _evidence_list(config_path: Path) -> str:
    """What `archfit evidence list` prints with that archfit's config (Redis)."""
    command = [*archfit_command(), "evidence", "list", "--config", str(config_path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=True).stdout


def _gone(plane: Plane, namespace: str, name: str) -> bool:
    """Whether the pod is deleted or being deleted (an eviction)."""
    try:
        pod = plane.core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        return error.status == 404
    return pod.metadata.deletion_timestamp is not None


def _evidence_json(config_path: Path, *flags: str) -> list[dict[str, str]]:
    """What `archfit evidence list -o json FLAGS` prints with that archfit's config."""
    command = [
        *archfit_command(), "evidence", "list", "-o", "json", "--config", str(config_path), *flags
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    return list(json.loads(done.stdout))


def _filter_keeps(archfit: Archfit, pod: dict[str, Any], nodes: list[str]) -> list[str]:
    """The nodes archfit's extender keeps for `pod` (a NodeNames filter call, as
    kube-scheduler makes it)."""
    body = json.dumps({"Pod": pod, "NodeNames": nodes, "Nodes": None}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{archfit.port}{archfit.prefix}/filter",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310  # loopback http
        return list(json.loads(response.read())["NodeNames"] or [])


def _required_archs(pod: client.V1Pod) -> list[list[str]]:
    affinity = pod.spec.affinity
    node = affinity.node_affinity if affinity else None
    required = node.required_during_scheduling_ignored_during_execution if node else None
    return [
        sorted(
            v
            for e in term.match_expressions or ()
            if e.key == "kubernetes.io/arch"
            for v in e.values or ()
        )
        for term in (required.node_selector_terms if required else ())
    ]


# --- the scenarios --------------------------------------------------------------------------


def test_an_image_that_lies_is_found_learned_and_its_replacement_constrained_to_amd64(
    plane: Plane, space: str
) -> None:
    """exec format error on arm64: Events on the pod and its Deployment, the metric, the
    evidence; then the webhook constrains the Deployment's next pod to amd64."""
    before = plane.core.create_namespaced_pod(
        space, cluster.pod_manifest("before", [plane.lying]), dry_run="All"
    )
    replica_set = _deployment(plane, space, "api", plane.lying)
    pod = _pod(plane, space, "api-5d9c-x1", plane.lying, owner=replica_set)
    image_id = f"{plane.lying.rsplit(':', 1)[0]}@{plane.lying_digest}"
    plane.kubelet.write(space, pod.metadata.name, [start_failing("c0", plane.lying, image_id)])

    on_pod = wait_for(lambda: _events(plane, space, "Pod", "api-5d9c-x1"), "the pod's Event")
    on_deployment = wait_for(lambda: _events(plane, space, "Deployment", "api"), "its Event")
    message = on_pod[0].message
    assert (["linux/arm64", plane.lying_digest, "exec format error"]) == [
        part for part in ("linux/arm64", plane.lying_digest, "exec format error") if part in message
    ]
    assert message == on_deployment[0].message
    assert 1.0 == _metric(plane.hook.archfit, "archfit_mismatch_findings_total", '{reason="start"}')

    # The learned evidence: the replacement pod (as the ReplicaSet controller would make it)
    # goes through the webhook, which now treats arm64 as unsupported for this digest.
    # Its index's arm64 entry is an amd64 image per its config: a registry fact no tenant
    # controls, so what was learned counts in every namespace, for any workload.
    assert "in every namespace" in message
    elsewhere = f"{space}-other"
    cluster.create_namespace(plane.core, elsewhere)

    def constrained() -> list[list[str]] | None:
        probe = cluster.pod_manifest("api-5d9c-probe", [plane.lying])
        made = plane.core.create_namespaced_pod(elsewhere, probe, dry_run="All")
        return _required_archs(made) if _required_archs(made) == [["amd64"]] else None

    wait_for(constrained, "the webhook to constrain the replacement to amd64", seconds=20)
    replacement = _pod(plane, space, "api-5d9c-x2", plane.lying, owner=replica_set, node=None)
    assert ([], [["amd64"]]) == (_required_archs(before), _required_archs(replacement))
    listed = _evidence_json(plane.hook.archfit.config_path)
    wide = [e for e in listed if e["digest"] == plane.lying_digest and e["scope"] == "cluster"]
    assert [("linux/arm64", "start", plane.lying, space, "ReplicaSet/api-5d9c")] == [
        (e["platform"], e["reason"], e["image"], e["namespace"], e["workload"]) for e in wide
    ]
    assert "per its config" in wide[0]["corroboration"]


def test_a_pull_failure_and_a_crash_loop_whose_log_says_exec_format_error_are_each_found_once(
    plane: Plane, space: str, images: Images
) -> None:
    """No matching manifest (containerd's and CRI-O's texts) and a crash-loop whose previous
    log, served through pods/log, says exec format error: one Event each, however often
    kubelet writes."""
    amd64 = images.amd64_only.reference
    amd64_id = f"{amd64.rsplit(':', 1)[0]}@{images.amd64_only.digest}"
    _pod(plane, space, "pulls", amd64, owner=None)
    _pod(plane, space, "pulls-crio", amd64, owner=None)
    _pod(plane, space, "loops", amd64, owner=None)
    plane.kubelet.logs[(space, "loops", "c0")] = SCRIPT_LOG
    pull = pull_failing("c0", amd64, CONTAINERD_PULL.format(image=amd64))
    crio_pull = pull_failing("c0", amd64, CRIO_PULL.format(arch="arm64"))
    for restarts in (1, 2, 3):  # kubelet writes again at each back-off and restart
        plane.kubelet.write(space, "pulls", [pull])
        plane.kubelet.write(space, "pulls-crio", [crio_pull])
        plane.kubelet.write(space, "loops", [crash_looping("c0", amd64, amd64_id, restarts)])
        wait_for(
            lambda n=restarts: len([r for r in plane.kubelet.log_requests if r[1] == "loops"]) >= n,
            f"the previous log of restart {restarts} to be read",
        )
    wait_for(lambda: _events(plane, space, "Pod", "loops"), "the crash-loop's Event")
    wait_for(lambda: _events(plane, space, "Pod", "pulls"), "the pull failure's Event")
    wait_for(lambda: _events(plane, space, "Pod", "pulls-crio"), "CRI-O's pull failure's Event")
    reads = [r for r in plane.kubelet.log_requests if r[1] == "loops"]
    counts = (
        len(_events(plane, space, "Pod", "pulls")),
        len(_events(plane, space, "Pod", "loops")),
    )
    assert ((1, 1), 3) == (counts, len(reads))
    assert {"previous": "true", "limitBytes": "16384"} == {
        k: v for k, v in reads[0][3].items() if k in ("previous", "limitBytes")
    }
    assert "no linux/arm64 entry" in _events(plane, space, "Pod", "pulls")[0].message
    assert "its log says exec format error" in _events(plane, space, "Pod", "loops")[0].message


def test_remediation_evicts_only_a_not_ready_controlled_pod_and_a_pdb_holds(
    plane: Plane, space: str, images: Images
) -> None:
    """On an arm64 node with an amd64-only image: the not-Ready ReplicaSet pod is evicted; one
    a PodDisruptionBudget protects, a Ready one and a bare one stay."""
    amd64 = images.amd64_only.reference
    amd64_id = f"{amd64.rsplit(':', 1)[0]}@{images.amd64_only.digest}"
    replica_set = _deployment(plane, space, "web", amd64)
    plane.policy.create_namespaced_pod_disruption_budget(
        space,
        {
            "metadata": {"name": "guarded"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"guard": "yes"}}},
        },
    )
    # What the disruption controller would write: one healthy pod wanted, none healthy.
    plane.policy.patch_namespaced_pod_disruption_budget_status(
        "guarded",
        space,
        {
            "status": {
                "observedGeneration": 1,
                "disruptionsAllowed": 0,
                "currentHealthy": 0,
                "desiredHealthy": 1,
                "expectedPods": 1,
            }
        },
    )
    _pod(plane, space, "guarded", amd64, owner=replica_set, labels={"guard": "yes"})
    _pod(plane, space, "ready", amd64, owner=replica_set)
    _pod(plane, space, "bare", amd64, owner=None)
    _pod(plane, space, "broken", amd64, owner=replica_set)
    waiting = crash_looping("c0", amd64, amd64_id, 1)
    for name in ("guarded", "bare", "broken"):
        plane.kubelet.write(space, name, [waiting])
    plane.kubelet.write(space, "ready", [running("c0", amd64, amd64_id)], ready=True)

    wait_for(lambda: _gone(plane, space, "broken"), "the not-Ready pod to be evicted")
    wait_for(
        lambda: (
            _metric(plane.hook.archfit, "archfit_mismatch_evictions_total", '{outcome="refused"}')
            >= 1
        ),
        "the PodDisruptionBudget to refuse the eviction",
    )
    kept = [_gone(plane, space, name) for name in ("guarded", "ready", "bare")]
    assert [False, False, False] == kept


def test_a_restart_and_a_second_replica_keep_the_learned_evidence_through_redis(
    plane: Plane, space: str
) -> None:
    """After archfit restarts, and on a second replica, the evidence learned before is there."""
    learned = wait_for(
        lambda: _metric(plane.hook.archfit, "archfit_evidence_entries"),
        "evidence learned by the scenarios before",
    )
    plane.hook.stop()
    plane.hook.start()
    replica = Archfit(
        plane.workdir / "replica",
        merge(plane.settings, {"watcher": {"enabled": False}}),
        name="replica",
    ).start()
    try:
        restarted = wait_for(
            lambda: _metric(plane.hook.archfit, "archfit_evidence_entries"), "the restarted one"
        )
        second = wait_for(lambda: _metric(replica, "archfit_evidence_entries"), "the replica")
        assert (learned, learned) == (restarted, second)
        assert plane.lying_digest in _evidence_list(replica.config_path)
    finally:
        replica.stop()


# --- what a tenant cannot make archfit believe (issue 28) -----------------------------------


def _other_tenant(plane: Plane, space: str) -> str:
    other = f"{space}-b"
    cluster.create_namespace(plane.core, other)
    return other


def _unconstrained_elsewhere(
    plane: Plane, namespace: str, image: str, owner: client.V1ReplicaSet
) -> tuple[list[list[str]], list[str]]:
    """What the webhook writes, and what the extender keeps, for another namespace's
    ReplicaSet pod of `image`."""
    made = _pod(plane, namespace, "victim-5d9c-x1", image, owner=owner, node=None)
    pod = plane.core.api_client.sanitize_for_serialization(made)
    nodes = [node.name for node in NODES]
    return _required_archs(made), sorted(_filter_keeps(plane.hook.archfit, pod, nodes))


def test_a_tenants_log_that_says_exec_format_error_teaches_its_own_workload_only(
    plane: Plane, space: str, images: Images
) -> None:
    """tenant-a's honest multi-arch image prints 'exec format error' and crash-loops on arm64:
    tenant-a's ReplicaSet is kept off arm64; tenant-b's pods of the same image are not."""
    multi = images.multi.reference
    image_id = f"{multi.rsplit(':', 1)[0]}@{images.multi.digest}"
    forger = _deployment(plane, space, "forger", multi)
    command = {"command": ["sh", "-c", "echo 'exec format error'; exit 1"]}
    _pod(plane, space, "forger-5d9c-x1", multi, owner=forger, container=command)
    plane.kubelet.logs[(space, "forger-5d9c-x1", "c0")] = "exec format error\n"
    plane.kubelet.write(space, "forger-5d9c-x1", [crash_looping("c0", multi, image_id, 1)])
    event = wait_for(lambda: _events(plane, space, "Pod", "forger-5d9c-x1"), "the finding")[0]
    assert f"for ReplicaSet/forger-5d9c in namespace {space} only" in event.message

    # Learned for tenant-a's own workload: its next pod is kept off arm64 ...
    def own_constrained() -> list[list[str]] | None:
        made = _pod(plane, space, "forger-5d9c-x2", multi, owner=forger, node=None)
        found = _required_archs(made)
        plane.core.delete_namespaced_pod("forger-5d9c-x2", space, grace_period_seconds=0)
        return found if found == [["amd64"]] else None

    wait_for(own_constrained, "tenant-a's own workload to be kept off arm64", seconds=20)
    # ... and nobody else is.
    other = _other_tenant(plane, space)
    victim = _deployment(plane, other, "victim", multi)
    assert ([], sorted(n.name for n in NODES)) == _unconstrained_elsewhere(
        plane, other, multi, victim
    )
    scopes = {
        e["scope"]
        for e in _evidence_json(plane.hook.archfit.config_path)
        if e["digest"] == images.multi.digest
    }
    assert {"workload"} == scopes


def test_a_genuine_start_error_of_a_file_the_pod_wrote_teaches_its_own_workload_only(
    plane: Plane, space: str, images: Images
) -> None:
    """An init container writes a non-ELF file into an emptyDir and the main container runs
    it (a real StartError, no log): tenant-b's pod of that image keeps arm64, and tenant-b's
    not-Ready ReplicaSet pod of it on arm64 is not evicted; an amd64-only one there is."""
    arm64 = images.arm64_only.reference
    multi = images.multi.reference
    image_id = f"{multi.rsplit(':', 1)[0]}@{images.multi.digest}"
    dropper = _deployment(plane, space, "dropper", multi)
    _pod(
        plane,
        space,
        "dropper-5d9c-x1",
        multi,
        owner=dropper,
        container={
            "command": ["/scripts/run"],
            "volumeMounts": [{"name": "scripts", "mountPath": "/scripts"}],
        },
        spec={
            "volumes": [{"name": "scripts", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "write",
                    "image": arm64,
                    "command": [
                        "sh",
                        "-c",
                        "printf 'not elf' > /scripts/run; chmod +x /scripts/run",
                    ],
                    "volumeMounts": [{"name": "scripts", "mountPath": "/scripts"}],
                }
            ],
        },
    )
    plane.kubelet.write(space, "dropper-5d9c-x1", [start_failing("c0", multi, image_id)])
    event = wait_for(lambda: _events(plane, space, "Pod", "dropper-5d9c-x1"), "the finding")[0]
    assert f"in namespace {space} only" in event.message

    other = _other_tenant(plane, space)
    victim = _deployment(plane, other, "victim", multi)
    assert ([], sorted(n.name for n in NODES)) == _unconstrained_elsewhere(
        plane, other, multi, victim
    )
    # Remediation acts only on evidence that applies to the pod it evicts: tenant-b's pod of
    # the image, failing on arm64 for its own reasons, stays; a pod whose image really lacks
    # arm64, written after it, goes (so the first was judged before the second went).
    amd64 = images.amd64_only.reference
    amd64_id = f"{amd64.rsplit(':', 1)[0]}@{images.amd64_only.digest}"
    _pod(plane, other, "victim-5d9c-x2", multi, owner=victim)
    _pod(plane, other, "victim-5d9c-x3", amd64, owner=victim)
    plane.kubelet.write(other, "victim-5d9c-x2", [crash_looping("c0", multi, image_id, 1)])
    plane.kubelet.write(other, "victim-5d9c-x3", [crash_looping("c0", amd64, amd64_id, 1)])

    wait_for(lambda: _gone(plane, other, "victim-5d9c-x3"), "the amd64-only pod to be evicted")
    assert False is _gone(plane, other, "victim-5d9c-x2")


def test_without_redis_every_replica_and_the_cli_share_evidence_through_a_configmap(
    plane: Plane, space: str
) -> None:
    """No cache.url: what the watcher's replica learns reaches a replica that does not watch,
    and `archfit evidence list` reads it with the operator's kubeconfig."""
    alone = {
        "cache": {"url": ""},
        "watcher": {"leaseName": "archfit-watcher-cm", "evidenceConfigMap": "evidence-cm"},
    }
    leader = Archfit(plane.workdir / "cm-leader", merge(plane.settings, alone), name="cm-leader")
    replica_settings = merge(plane.settings, merge(alone, {"watcher": {"enabled": False}}))
    replica = Archfit(plane.workdir / "cm-replica", replica_settings, name="cm-replica")
    leader.start()
    replica.start()
    try:
        replica_set = _deployment(plane, space, "cm", plane.lying)
        pod = _pod(plane, space, "cm-5d9c-x1", plane.lying, owner=replica_set)
        image_id = f"{plane.lying.rsplit(':', 1)[0]}@{plane.lying_digest}"
        plane.kubelet.write(space, pod.metadata.name, [start_failing("c0", plane.lying, image_id)])
        learned = wait_for(
            lambda: _metric(replica, "archfit_evidence_entries"), "the replica to read it"
        )
        # These archfits run from a kubeconfig whose context names no namespace: their own
        # is `default`, not the archfit-system the command reads by default.
        listed = _evidence_json(replica.config_path, "-n", "default")
        assert learned >= 1
        assert (plane.lying_digest, "cluster") in {(e["digest"], e["scope"]) for e in listed}
    finally:
        replica.stop()
        leader.stop()
