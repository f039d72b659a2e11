"""`archfit audit` against a real kube-apiserver: a small fleet judged in JSON and Markdown.

No controller-manager runs, so nothing creates pods for the workloads: the test creates a
ReplicaSet owned by the Deployment, and pods bound to nodes (spec.nodeName) owned by it,
exactly as the controllers would, and sets one pod's status as kubelet would.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.archfit import archfit_command, merge
from tests.e2e.catalog import PRIVATE_USER, Images
from tests.e2e.controlplane import ControlPlane

pytestmark = pytest.mark.e2e
SECRET = "private-registry"
NO_MATCH = "no matching manifest for linux/arm64/v8 in the manifest list entries"


def _template(app: str, images: list[str], init: list[str] = (), **spec: Any) -> dict[str, Any]:
    pod = cluster.pod_manifest("unused", images, init_images=init, cpu="100m", **spec)
    return {"metadata": {"labels": {"app": app}}, "spec": pod["spec"]}


def _owned(kind: str, owner: Any, api_version: str = "apps/v1") -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": api_version,
            "kind": kind,
            "name": owner.metadata.name,
            "uid": owner.metadata.uid,
            "controller": True,
        }
    ]


def _bound_pod(name: str, image: str, node: str, owners: list[dict[str, Any]] | None = None):
    manifest = cluster.pod_manifest(name, [image], cpu="100m")
    manifest["spec"]["nodeName"] = node  # bound as the scheduler would, without one
    if owners:
        manifest["metadata"]["ownerReferences"] = owners
    return manifest


def create_fleet(api: client.ApiClient, namespace: str, images: Images) -> None:
    """Eight workloads: ready, blocked by an init container, private with and without its
    pull secret, DaemonSet, bare pods, an image in a registry that is down, and a pod kubelet
    failed to pull for."""
    core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
    selector = {"matchLabels": {"app": "web"}}
    web_template = _template("web", [images.multi.reference])
    edge = {"tier": "edge", "fleet": namespace}  # what the selector test picks
    web = apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "web", "labels": edge},
        "spec": {"replicas": 2, "selector": selector, "template": web_template},
    })  # fmt: skip
    replica_set = apps.create_namespaced_replica_set(namespace, {
        "metadata": {"name": "web-7d9c", "ownerReferences": _owned("Deployment", web)},
        "spec": {"replicas": 2, "selector": selector, "template": web_template},
    })  # fmt: skip
    for name, node in (("web-7d9c-a", "arm64-a"), ("web-7d9c-b", "amd64-a")):
        owners = _owned("ReplicaSet", replica_set)
        core.create_namespaced_pod(
            namespace, _bound_pod(name, images.multi.reference, node, owners)
        )
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "legacy"},
        "spec": {"selector": {"matchLabels": {"app": "legacy"}},
                 "template": _template("legacy", [images.unreachable_s390x_only.reference])},
    })  # fmt: skip
    apps.create_namespaced_stateful_set(namespace, {
        "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": _template("db", [images.multi.reference],
                                       init=[images.amd64_only.reference])},
    })  # fmt: skip
    apps.create_namespaced_daemon_set(namespace, {
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": _template("agent", [images.amd64_only.reference])},
    })  # fmt: skip
    # The DaemonSet controller would say how many nodes it wants; it does not run here.
    apps.patch_namespaced_daemon_set_status("agent", namespace, {"status": {
        "desiredNumberScheduled": 2, "currentNumberScheduled": 0,
        "numberMisscheduled": 0, "numberReady": 0,
    }})  # fmt: skip
    cluster.docker_config_secret(core, namespace, SECRET, images.private_registry, *PRIVATE_USER)
    # A Secret that does not exist is skipped with a warning, as kubelet does; the warning
    # goes to stderr, so the report on stdout stays parseable.
    private = _template("report", [images.private_arm64_only.reference],
                        pull_secrets=["deleted-long-ago", SECRET])  # fmt: skip
    batch.create_namespaced_cron_job(namespace, {
        "metadata": {"name": "report"},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": {
            **private, "spec": {**private["spec"], "restartPolicy": "OnFailure"}}}}},
    })  # fmt: skip
    debug = _bound_pod("debug", images.multi.reference, "arm64-b")
    debug["metadata"]["labels"] = edge
    core.create_namespaced_pod(namespace, debug)
    # The CronJob's private image again, without its pull secret: the registry's 401.
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "no-secret"},
        "spec": {"selector": {"matchLabels": {"app": "no-secret"}},
                 "template": _template("no-secret", [images.private_arm64_only.reference])},
    })  # fmt: skip
    core.create_namespaced_pod(
        namespace, _bound_pod("broken", images.amd64_only.reference, "arm64-a")
    )
    core.patch_namespaced_pod_status("broken", namespace, {"status": {
        "phase": "Pending",
        "containerStatuses": [{
            "name": "c0", "image": images.amd64_only.reference, "imageID": "",
            "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": "ErrImagePull", "message": NO_MATCH}},
        }],
    }})  # fmt: skip


def audit(config: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Run the installed `archfit audit` against the cluster."""
    command = [*archfit_command(), "audit", "--config", str(config), *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def fleet(
    core: client.CoreV1Api,
    namespace: str,
    images: Images,
    base_settings: dict[str, Any],
    tmp_path: Path,
) -> Path:
    """The fleet in the test's namespace; returns an archfit config that reaches the cluster."""
    create_fleet(core.api_client, namespace, images)
    config = tmp_path / "archfit.yaml"
    config.write_text(yaml.safe_dump(base_settings))
    return config


def test_the_json_report_judges_each_workload_and_sums_up_the_fleet(
    fleet: Path, namespace: str, images: Images
) -> None:
    """Verdicts, blockers, pods per architecture, unknown reasons, broken pods and the saving."""
    done = audit(fleet, "-n", namespace, "-o", "json", "--price-per-vcpu-hour", "0.10")
    assert 0 == done.returncode, done.stderr
    report = json.loads(done.stdout)
    workloads = {(w["kind"], w["name"]): w for w in report["workloads"]}
    verdicts = {key: (w["verdict"], w["runsOn"], w["running"]) for key, w in workloads.items()}
    assert {
        ("Deployment", "web"): ("ready", ["arm64", "amd64"], {"amd64": 1, "arm64": 1}),
        ("Deployment", "legacy"): ("unknown", ["arm64", "amd64"], {}),
        ("Deployment", "no-secret"): ("unknown", ["arm64", "amd64"], {}),
        ("StatefulSet", "db"): ("blocked", ["amd64"], {}),
        ("DaemonSet", "agent"): ("blocked", ["amd64"], {}),
        ("CronJob", "report"): ("ready", ["arm64"], {}),
        ("Pod", "debug"): ("ready", ["arm64", "amd64"], {"arm64": 1}),
        ("Pod", "broken"): ("blocked", ["amd64"], {"arm64": 1}),
    } == verdicts
    amd64_only = images.amd64_only.reference
    unknown = workloads["Deployment", "legacy"]["unknown"][0]
    assert (
        {"workloads": 8, "ready": 3, "blocked": 3, "unknown": 2, "vcpu": 1.0, "readyVcpu": 0.4,
         "movableVcpu": 0.2, "monthlySaving": 2.92, "brokenNow": 1},
        [{"image": amd64_only, "platforms": ["linux/amd64"], "workloads": 3, "vcpu": 0.4,
          "arm64FromTag": None, "newerTagsChecked": [],
          "action": "rebuild for arm64 (no newer version tag)"}],
        images.unreachable_s390x_only.reference,
        [(f"{namespace}/pod/broken", amd64_only, "arm64-a", "arm64", "no matching manifest")],
    ) == (
        {key: report["summary"][key] for key in ("workloads", "ready", "blocked", "unknown",
         "vcpu", "readyVcpu", "movableVcpu", "monthlySaving", "brokenNow")},
        report["blockers"],
        unknown["image"],
        [(b["workload"], b["image"], b["node"], b["nodeArch"], b["problem"])
         for b in report["brokenNow"]],
    )  # fmt: skip
    denied = workloads["Deployment", "no-secret"]["unknown"][0]["reason"]
    assert ("connect", "401") == (
        "connect" if "connect" in unknown["reason"].lower() else unknown["reason"],
        "401" if "401" in denied else denied,
    )


def test_the_markdown_report_ranks_blockers_and_fails_a_ci_job_on_them(
    fleet: Path, namespace: str, images: Images
) -> None:
    """Markdown for a ticket, and exit status 1 under `--fail-on blockers`."""
    done = audit(fleet, "-n", namespace, "-o", "markdown", "--fail-on", "blockers")
    lines = done.stdout.splitlines()
    assert (
        1,
        "- Ready for arm64: 3 of 8 workloads (38%), 0.4 of 1 requested vCPU (40%).",
        f"| `{images.amd64_only.reference}` | linux/amd64 | 3 | 0.4 | "
        "rebuild for arm64 (no newer version tag) |",
        f"| {namespace}/db | StatefulSet | **blocked** | amd64 | "
        f"{images.amd64_only.reference} has linux/amd64 | - | 0.1 |",
        f"| {namespace}/broken | `{images.amd64_only.reference}` | arm64-a (arm64) | "
        "no matching manifest |",
    ) == (
        done.returncode,
        lines[2],
        next(line for line in lines if line.startswith(f"| `{images.amd64_only.reference}`")),
        next(line for line in lines if line.startswith(f"| {namespace}/db ")),
        next(line for line in lines if line.startswith(f"| {namespace}/broken | `")),
    ), done.stdout + done.stderr


def test_a_selector_across_namespaces_picks_workloads_and_excluded_namespaces_are_left_out(
    fleet: Path, namespace: str, base_settings: dict[str, Any]
) -> None:
    """`-A -l` audits the labelled workloads only; policy.excludedNamespaces drops the rest."""
    selected = audit(fleet, "-A", "-l", f"tier=edge,fleet={namespace}", "-o", "json")
    excluded = fleet.with_name("excluded.yaml")
    excluded.write_text(yaml.safe_dump(merge(base_settings, {"policy": {
        "excludedNamespaces": ["kube-system", namespace]}})))  # fmt: skip
    dropped = audit(excluded, "-A", "-l", f"fleet={namespace}", "-o", "json")
    assert (0, 0) == (selected.returncode, dropped.returncode), selected.stderr + dropped.stderr
    names = [(w["kind"], w["name"]) for w in json.loads(selected.stdout)["workloads"]]
    assert ([("Deployment", "web"), ("Pod", "debug")], 0, 0) == (
        names,
        json.loads(selected.stdout)["summary"]["brokenNow"],
        json.loads(dropped.stdout)["summary"]["workloads"],
    ), selected.stderr + dropped.stderr


def test_an_event_about_an_earlier_pod_of_the_same_name_does_not_break_todays_pod(
    fleet: Path, core: client.CoreV1Api, namespace: str
) -> None:
    """A StatefulSet pod recreated after the fix: the old pod's event names the old uid."""
    debug = core.read_namespaced_pod("debug", namespace)
    involved = {"kind": "Pod", "namespace": namespace, "name": "debug", "apiVersion": "v1"}
    for suffix, uid in (("old", "0c4f5d3e-0000-4000-8000-000000000001"), ("now", "")):
        core.create_namespaced_event(namespace, {
            "metadata": {"name": f"debug.{suffix}"},
            "involvedObject": {**involved, "uid": uid or debug.metadata.uid,
                               "fieldPath": "spec.containers{c0}"},
            "reason": "Failed", "type": "Warning", "message": f"Failed to pull image: {NO_MATCH}",
            "firstTimestamp": cluster.timestamp(), "lastTimestamp": cluster.timestamp(),
            "source": {"component": "kubelet", "host": "arm64-b"},
        })  # fmt: skip
        done = audit(fleet, "-n", namespace, "-o", "json")
        report = json.loads(done.stdout)
        broken = sorted(b["pod"] for b in report["brokenNow"])
        expected = ["broken"] if suffix == "old" else ["broken", "debug"]
        assert (0, expected) == (done.returncode, broken), done.stderr


def _auditor_kubeconfig(
    core: client.CoreV1Api, namespace: str, server: str, ca: Path, path: Path
) -> Path:
    """A kubeconfig for a ServiceAccount that may list the workloads and pods of `namespace`
    and read pull secrets, but neither Events nor Nodes."""
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    rules = [
        {"apiGroups": ["apps"], "verbs": ["list"],
         "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"]},
        {"apiGroups": ["batch"], "verbs": ["list"], "resources": ["jobs", "cronjobs"]},
        {"apiGroups": [""], "verbs": ["list"], "resources": ["pods"]},
        {"apiGroups": [""], "verbs": ["get"], "resources": ["secrets", "serviceaccounts"]},
    ]  # fmt: skip
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "auditor"}, "rules": rules})
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "auditor"}})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "auditor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "auditor"},
        "subjects": [{"kind": "ServiceAccount", "name": "auditor", "namespace": namespace}],
    })  # fmt: skip
    token = core.create_namespaced_service_account_token(
        "auditor", namespace, {"spec": {"audiences": [], "expirationSeconds": 3600}}
    ).status.token
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "auditor",
        "clusters": [{"name": "e2e",
                      "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "auditor", "user": {"token": token}}],
        "contexts": [{"name": "auditor", "context": {"cluster": "e2e", "user": "auditor"}}],
    }))  # fmt: skip
    return path


def test_without_the_right_to_list_events_or_nodes_the_audit_says_so_and_marks_the_figures(
    fleet: Path,
    core: client.CoreV1Api,
    namespace: str,
    control_plane: ControlPlane,
    base_settings: dict[str, Any],
) -> None:
    """stderr names what was left out; movable vCPU and the saving are marked upper bounds
    (no replica counts as on arm64), broken now a lower bound."""
    assert control_plane.certs is not None
    kubeconfig = _auditor_kubeconfig(
        core, namespace, control_plane.server, control_plane.certs.ca_cert,
        fleet.with_name("auditor.kubeconfig"),
    )  # fmt: skip
    config = fleet.with_name("auditor.yaml")
    config.write_text(yaml.safe_dump(merge(base_settings, {"kubernetes": {
        "kubeconfig": str(kubeconfig), "nodeIndex": False}})))  # fmt: skip
    done = audit(config, "-n", namespace, "-o", "json", "--price-per-vcpu-hour", "0.10")
    summary = json.loads(done.stdout)["summary"] if done.stdout else {}
    notes = [line for line in done.stderr.splitlines() if line.startswith("archfit: Not read:")]
    assert (
        0,
        [("archfit: Not read: Nodes", "403"), ("archfit: Not read: Events", "403")],
        {"movableVcpu": 0.4, "monthlySaving": 5.84, "brokenNow": 1},
        [("Node", ["movableVcpu", "monthlySaving"]), ("Event", ["brokenNow"])],
    ) == (
        done.returncode,
        [(line.split(" (")[0], line.split(" (")[1][:3]) for line in notes],
        {key: summary.get(key) for key in ("movableVcpu", "monthlySaving", "brokenNow")},
        [(item["kind"], item["bounds"]) for item in summary.get("leftOut", [])],
    ), done.stderr
