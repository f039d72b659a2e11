"""`archfit audit --context east --context west` against two real kube-apiservers: one lookup
per distinct image across both, a cluster column, the fleet total, and the HTML page in a
headless browser."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e import cluster
from tests.e2e.archfit import archfit_command
from tests.e2e.catalog import PRIVATE_USER, Images
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.support.browser import load

pytestmark = pytest.mark.e2e
NAMESPACE = "fleet"
SECRET = "private-registry"


@pytest.fixture(scope="module")
def west(
    e2e_binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A second control plane, beside the session's (east)."""
    plane = ControlPlane(e2e_binaries, tmp_path_factory.mktemp("controlplane-west")).start()
    try:
        yield plane
    finally:
        plane.stop()


def two_contexts(path: Path, planes: dict[str, Path]) -> Path:
    """One kubeconfig with a context per control plane, named as the keys of `planes`."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [],
                              "users": [], "contexts": [],
                              "current-context": next(iter(planes))}  # fmt: skip
    for name, kubeconfig in planes.items():
        single = yaml.safe_load(kubeconfig.read_text())
        merged["clusters"].append({"name": name, "cluster": single["clusters"][0]["cluster"]})
        merged["users"].append({"name": name, "user": single["users"][0]["user"]})
        merged["contexts"].append(
            {"name": name, "context": {"cluster": name, "user": name, "namespace": NAMESPACE}}
        )
    path.write_text(yaml.safe_dump(merged))
    return path


def _deployment(name: str, images: list[str], pull_secrets: list[str] = ()) -> dict[str, Any]:
    pod = cluster.pod_manifest("unused", images, cpu="100m", pull_secrets=pull_secrets)
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": pod["spec"]}},
    }  # fmt: skip


def create_workloads(kubeconfig: Path, images: Images, names: list[str]) -> None:
    """The namespace, a pull secret, and a Deployment per name, each pulling one of the
    three shared images (multi-arch, amd64-only, private arm64-only) in turn."""
    core = cluster.core_api(kubeconfig)
    apps = client.AppsV1Api(core.api_client)
    cluster.create_namespace(core, NAMESPACE)
    cluster.docker_config_secret(core, NAMESPACE, SECRET, images.private_registry, *PRIVATE_USER)
    shared = [images.multi.reference, images.amd64_only.reference,
              images.private_arm64_only.reference]  # fmt: skip
    for n, name in enumerate(names):
        image = shared[n % len(shared)]
        secrets = [SECRET] if image == images.private_arm64_only.reference else []
        apps.create_namespaced_deployment(NAMESPACE, _deployment(name, [image], secrets))


@pytest.fixture(scope="module")
def fleet(
    control_plane: ControlPlane,
    west: ControlPlane,
    images: Images,
    base_settings: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """east: three workloads; west: six, on the same three images. Returns a config whose
    kubeconfig has both contexts."""
    workdir = tmp_path_factory.mktemp("fleet")
    create_workloads(control_plane.admin_kubeconfig, images, ["web", "legacy", "report"])
    create_workloads(west.admin_kubeconfig, images, ["w1", "w2", "w3", "w4", "w5", "w6"])
    kubeconfig = two_contexts(workdir / "kubeconfig", {
        "east": control_plane.admin_kubeconfig, "west": west.admin_kubeconfig})  # fmt: skip
    settings = {**base_settings, "kubernetes": {**base_settings["kubernetes"],
                                                "kubeconfig": str(kubeconfig)}}  # fmt: skip
    config = workdir / "archfit.yaml"
    config.write_text(yaml.safe_dump(settings))
    return config


def audit(config: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Run the installed `archfit audit`."""
    command = [*archfit_command(), "audit", "--config", str(config), *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_two_clusters_cost_one_lookup_per_distinct_image_in_total(
    fleet: Path, images: Images
) -> None:
    """Nine workloads in two clusters share three images: the public registry sees what one
    cluster's audit costs it (a GET of the index's tag, a GET of the amd64 image's tag and its
    config blob), and the private image is read once, with each cluster's own secret."""
    public = images.public
    mark = public.mark()
    done = audit(fleet, "--context", "east", "--context", "west", "-o", "json",
                 "--newer-tags", "0")  # fmt: skip
    seen = public.count_since(mark)
    assert 0 == done.returncode, done.stderr
    report = json.loads(done.stdout)
    per_cluster = Counter(w["cluster"] for w in report["workloads"])
    verdicts = {(w["cluster"], w["name"]): w["verdict"] for w in report["workloads"]}
    expected = (
        {("GET", "manifests"): 2, ("GET", "blobs"): 1},
        {"east": 3, "west": 6},
        ["east", "west"],
        9,
        ("ready", "ready"),
        [{"east": 1, "west": 2}],
    )
    assert expected == (
        dict(seen),
        dict(per_cluster),
        [c["name"] for c in report["clusters"]],
        report["summary"]["workloads"],
        (verdicts["east", "report"], verdicts["west", "w3"]),
        [b["clusters"] for b in report["blockers"]],
    ), done.stderr


def test_all_contexts_audits_every_cluster_and_the_html_page_renders_in_a_browser(
    fleet: Path, tmp_path: Path
) -> None:
    """--all-contexts reads both clusters; the HTML names both, and chromium renders it with
    its chart and tables and no console message."""
    done = audit(fleet, "--all-contexts", "-o", "html")
    assert 0 == done.returncode, done.stderr
    page = tmp_path / "audit.html"
    page.write_text(done.stdout, encoding="utf-8")
    loaded = load(page, tmp_path)
    expected = ([], True, True, True)
    assert expected == (
        loaded.console,
        'id="readiness-chart"' in loaded.dom,
        '<table id="clusters">' in loaded.dom,
        "east/fleet" in loaded.dom and "west/fleet" in loaded.dom,
    )


def test_one_context_gives_the_single_cluster_report(fleet: Path) -> None:
    """`--context west` alone is kubectl's --context: the report of that cluster, no column."""
    done = audit(fleet, "--context", "west", "-o", "json", "--newer-tags", "0")
    assert 0 == done.returncode, done.stderr
    report = json.loads(done.stdout)
    assert (6, False) == (report["summary"]["workloads"], "clusters" in report)
