"""Removing archfit strands no pod, on a real kube-apiserver with the shipped manifests.

Each test installs archfit with the admission policy (the layout that holds pods even while
archfit is down), publishes a parameter that lists no image, so that the policy holds every new
pod as it would with archfit gone, creates pods it holds, and then removes archfit:

- with Helm, by `helm uninstall` (the built helm), whose pre-delete hook's Job the real Job
  controller runs and a stand-in kubelet executes: `archfit uninstall` as the Job's own
  ServiceAccount;
- with kustomize, by the commands deploy/README.md gives, as written (the rollback's most
  complete step), with the real `archfit` command and a stand-in for kubectl.

Afterwards no pod may carry archfit's gate, no binding may remain, and a new pod is created
unheld. No archfit process runs here: nothing but the removal releases the held pods.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.deploy import render
from tests.deploy.apiserver import ApiError, ApiServer, token_kubeconfig
from tests.e2e import cluster
from tests.e2e.controllers import ControllerManager
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.policy import is_gated
from tests.e2e.topology import NODES
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

DEPLOY_README = render.REPO / "deploy" / "README.md"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
UNLISTED = "registry.invalid/team/app:1"
"""An image no parameter lists: the policy holds its pods."""


class Removal:
    """A control plane of its own (a removal that goes wrong must not hold another module's
    pods), with the Job controller, the kind Helm's hook needs run."""

    def __init__(self, binaries: Binaries, workdir: Path) -> None:
        self.plane = ControlPlane(binaries, workdir / "control-plane").start()
        try:
            self.controllers = ControllerManager(
                binaries, workdir / "controllers", self.plane.admin_kubeconfig, ("job-controller",)
            ).start()
        except BaseException:
            self.plane.stop()
            raise
        self.workdir = workdir
        self.core = cluster.core_api(self.plane.admin_kubeconfig)
        self.api = ApiServer(self.plane.server, self.plane.admin_ssl_context())
        cluster.create_node(self.core, NODES[0])

    def stop(self) -> None:
        self.controllers.process.stop()
        self.plane.stop()

    def publish_an_empty_parameter(self) -> None:
        """The ImagePlatforms object as archfit's publisher would leave it, listing no image:
        the policy then holds every pod outside the excluded namespaces."""
        wait_for(
            lambda: _established(self.api, "imageplatforms.archfit.io"),
            "the ImagePlatforms CRD to be established",
        )
        parameter = {
            "apiVersion": "archfit.io/v1alpha1",
            "kind": "ImagePlatforms",
            "metadata": {"name": "archfit"},
            "spec": {"enforce": True, "hold": True, "images": {}},
        }
        self.api.request("POST", "/apis/archfit.io/v1alpha1/imageplatforms", parameter)

    def held_pods(self, namespace: str, count: int) -> list[str]:
        """Create `count` pods of an unlisted image; each must come out held by the policy
        (once kube-apiserver's admission has seen the binding and the parameter: server-side
        dry-run creates, which run admission in full and store nothing, say when)."""
        cluster.create_namespace(self.core, namespace)
        probe = cluster.pod_manifest("probe", [UNLISTED])
        wait_for(
            lambda: is_gated(self.core.create_namespaced_pod(namespace, probe, dry_run="All")),
            "kube-apiserver's admission policy to hold a pod of an unlisted image",
        )
        names = [f"held-{n}" for n in range(count)]
        for name in names:
            cluster.create_pod(self.core, namespace, cluster.pod_manifest(name, [UNLISTED]))
        held = [n for n in names if is_gated(self.core.read_namespaced_pod(n, namespace))]
        assert names == held, "the policy must hold them before the removal starts"
        return names

    def gated_anywhere(self) -> list[str]:
        """Every pod of the cluster that carries archfit's gate, whatever its labels."""
        return [
            f"{p.metadata.namespace}/{p.metadata.name}"
            for p in self.core.list_pod_for_all_namespaces().items
            if is_gated(p)
        ]

    def bindings(self) -> list[str]:
        items = self.api.request("GET", f"{ADMISSION}/mutatingadmissionpolicybindings").body
        return [b["metadata"]["name"] for b in items["items"]]

    def new_pod_is_held(self, namespace: str) -> bool:
        """Whether a pod created now, of an image nothing lists, is held."""
        name = f"after-{uuid.uuid4().hex[:6]}"
        cluster.create_pod(self.core, namespace, cluster.pod_manifest(name, [UNLISTED]))
        return is_gated(self.core.read_namespaced_pod(name, namespace))


def _established(api: ApiServer, name: str) -> bool:
    try:
        crd = api.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    except ApiError:
        return False
    conditions = crd.body.get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


@pytest.fixture
def removal(e2e_binaries: Binaries, tmp_path: Path) -> Iterator[Removal]:
    plane = Removal(e2e_binaries, tmp_path)
    try:
        yield plane
    finally:
        plane.stop()


# --- Helm ------------------------------------------------------------------------------------


def _helm(helm: Path, removal: Removal, *args: str) -> list[str]:
    return [str(helm), *args, "--kubeconfig", str(removal.plane.admin_kubeconfig)]


def run_hook_pod(
    removal: Removal, job: str, helm: subprocess.Popen[str]
) -> subprocess.CompletedProcess[str] | None:
    """Be the scheduler and kubelet of the Job controller's pod for `job`: bind it, run its
    container's command (archfit's image's entrypoint is `archfit`) as the pod's own
    ServiceAccount, and report how it ended, as kubelet would. None when `helm` finished
    without one (a chart with no hook)."""
    namespace = render.NAMESPACE

    def created() -> client.V1Pod | str | None:
        selector = f"batch.kubernetes.io/job-name={job}"
        pods = removal.core.list_namespaced_pod(namespace, label_selector=selector).items
        return pods[0] if pods else ("helm is done" if helm.poll() is not None else None)

    pod = wait_for(created, f"the Job controller to create {job}'s pod, or helm to finish")
    if not isinstance(pod, client.V1Pod):
        return None
    name = pod.metadata.name
    binding = {"target": {"kind": "Node", "name": NODES[0].name}, "metadata": {"name": name}}
    removal.core.create_namespaced_pod_binding(name, namespace, binding, _preload_content=False)
    (container,) = pod.spec.containers
    token = removal.api.service_account_token(namespace, pod.spec.service_account_name)
    assert removal.plane.certs is not None
    kubeconfig = token_kubeconfig(
        removal.workdir / "hook.kubeconfig",
        removal.plane.server,
        removal.plane.certs.ca_cert,
        token,
        namespace,
    )
    env = {e.name: e.value for e in container.env or ()}
    # Outside a pod the in-cluster identity is the ServiceAccount's token in a kubeconfig.
    assert "in-cluster" == env.pop("ARCHFIT_KUBERNETES__MODE")
    env |= {
        "ARCHFIT_KUBERNETES__MODE": "kubeconfig",
        "ARCHFIT_KUBERNETES__KUBECONFIG": str(kubeconfig),
    }
    done = subprocess.run(
        [sys.executable, "-m", "extender", *container.args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    ended = "Succeeded" if done.returncode == 0 else "Failed"
    terminated = {
        "exitCode": done.returncode,
        "reason": "Completed" if done.returncode == 0 else "Error",
    }
    status = {
        "phase": ended,
        "containerStatuses": [
            {
                "name": container.name,
                "image": container.image,
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ],
    }
    removal.core.patch_namespaced_pod_status(name, namespace, {"status": status})
    return done


def test_helm_uninstall_releases_every_held_pod_and_leaves_no_binding(
    helm: Path, removal: Removal
) -> None:
    """Pods held by the chart's admission policy; `helm uninstall`; none holds archfit's gate,
    no binding or webhook configuration remains, nothing of the hook is left behind, and a
    new pod is not held."""
    core = removal.core
    namespace = render.NAMESPACE
    core.create_namespace(
        {
            "metadata": {
                "name": namespace,
                "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
            }
        }
    )
    values = ["--set", "webhook.enabled=true", "--set", "admissionPolicy.enabled=true"]
    installed = subprocess.run(
        _helm(
            helm,
            removal,
            "install",
            render.RELEASE,
            str(render.HELM_CHART),
            "-n",
            namespace,
            *values,
        ),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == installed.returncode, installed.stderr
    removal.publish_an_empty_parameter()
    held = removal.held_pods("team-a", 3)

    uninstalling = subprocess.Popen(
        _helm(helm, removal, "uninstall", render.RELEASE, "-n", namespace, "--timeout", "5m"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        hook = run_hook_pod(removal, f"{render.RELEASE}-uninstall", uninstalling)
        _, err = uninstalling.communicate(timeout=300)
    finally:
        if uninstalling.poll() is None:
            uninstalling.kill()
    assert 0 == uninstalling.returncode, err
    assert ([], []) == (removal.gated_anywhere(), removal.bindings())
    assert hook is not None, "helm uninstall ran no pre-delete hook"
    assert 0 == hook.returncode, hook.stderr

    released = {line for line in hook.stdout.splitlines() if line.startswith("released ")}
    left = {
        kind: [o["metadata"]["name"] for o in removal.api.request("GET", path).body["items"]]
        for kind, path in {
            "Job": f"/apis/batch/v1/namespaces/{namespace}/jobs",
            "ServiceAccount": f"/api/v1/namespaces/{namespace}/serviceaccounts",
            "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            "MutatingWebhookConfiguration": f"{ADMISSION}/mutatingwebhookconfigurations",
        }.items()
    }
    assert {f"released team-a/{name}" for name in held} == released
    assert {kind: [] for kind in left} == {
        kind: [name for name in names if "archfit" in name] for kind, names in left.items()
    }
    assert False is removal.new_pod_is_held("team-a")


def test_helm_asks_the_cluster_and_installs_the_admission_policy_with_the_webhook(
    helm: Path, removal: Removal
) -> None:
    """`helm install --dry-run=server` with webhook.enabled only: helm's discovery of
    kube-apiserver v1.36.3 finds admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, and
    admissionPolicy.enabled: auto installs the policy, its binding and the hook."""
    namespace = render.NAMESPACE
    removal.core.create_namespace({"metadata": {"name": namespace}})
    argv = ["install", render.RELEASE, str(render.HELM_CHART), "-n", namespace]
    done = subprocess.run(
        _helm(helm, removal, *argv, "--dry-run=server", "--set", "webhook.enabled=true"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    manifest, _, notes = done.stdout.partition("NOTES:")
    kinds = {d["kind"] for d in yaml.safe_load_all(manifest.split("MANIFEST:", 1)[1]) if d}
    hooks = done.stdout.split("HOOKS:", 1)[1].split("MANIFEST:", 1)[0]
    assert {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} <= kinds
    assert "kind: Job" in hooks
    assert "The admission policy is on" in notes


# --- kustomize: the procedure as deploy/README.md writes it -----------------------------------


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    return text[start : text.index("\n## ", start + 1)]


def documented_removal() -> list[str]:
    """The shell commands of deploy/README.md's most complete rollback step, in order: the
    "Uninstalling" procedure's blocks when the step sends the reader there, else the step's own
    `kubectl` and `archfit` commands."""
    text = DEPLOY_README.read_text()
    rollback = _section(text, "## Roll back")
    last = rollback[rollback.rindex("\n3. ") :].split("\n\n", 1)[0]
    if "(#uninstalling)" in last:
        blocks = re.findall(r"```sh\n(.*?)```", _section(text, "## Uninstalling"), re.S)
        lines = [line.strip() for block in blocks for line in block.splitlines()]
        return [line for line in lines if line and not line.startswith("#")]
    spans = re.findall(r"`([^`\n]+)`", last)
    return [span for span in spans if span.startswith(("kubectl ", "archfit "))]


def _install_as_documented(removal: Removal, workdir: Path, kustomize: Path) -> None:
    """deploy/README.md's overlay (deploy/overlays/mine) over the admission-policy layout,
    in a copy of deploy/kustomize, applied for real."""
    shutil.copytree(render.REPO / "deploy" / "kustomize", workdir / "deploy" / "kustomize")
    overlay = workdir / "deploy" / "overlays" / "mine"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["../../kustomize/admission-policy"]})
    )
    for obj in render.kustomize_build(kustomize, overlay):
        removal.api.apply(obj, dry_run=False)


def test_the_documented_kustomize_removal_leaves_no_pod_gated_and_no_binding(
    kustomize: Path, removal: Removal, tmp_path: Path
) -> None:
    """The rollback's most complete step, command by command, with the real `archfit` and the
    manifests applied for real: no pod keeps archfit's gate, no binding remains, and a new
    pod is not held."""
    workdir = tmp_path / "operator"
    _install_as_documented(removal, workdir, kustomize)
    removal.publish_an_empty_parameter()
    held = removal.held_pods("team-b", 2)
    commands = documented_removal()
    assert commands, "the documentation names no command to run"
    shims = tmp_path / "bin"
    shims.mkdir()
    kubectl = shims / "kubectl"
    kubectl.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tests.deploy.stand_in_kubectl "$@"\n'
    )
    kubectl.chmod(0o755)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(shims), str(Path(sys.executable).parent), os.environ["PATH"]]),
        "PYTHONPATH": str(render.REPO),
        "KUBECONFIG": str(removal.plane.admin_kubeconfig),
        "KUSTOMIZE": str(kustomize),
    }
    ran: list[tuple[str, int, str]] = []
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        ran.append((command, done.returncode, done.stdout + done.stderr))
    assert [] == [r for r in ran if r[1] != 0], ran
    assert ([], []) == (removal.gated_anywhere(), removal.bindings()), (held, ran)
    assert False is removal.new_pod_is_held("team-b")
