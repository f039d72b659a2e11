"""`archfit serve` from a laptop with a kubeconfig ($KUBECONFIG, ~/.kube/config, --kubeconfig):
it reads that cluster, but runs nothing that writes to it (the watcher's Lease, Events,
evictions) unless asked with --controllers; settings that name a kubeconfig are a deployment
and run what they say. The start-up line says which controllers run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.archfit_process import running


def _kubeconfig(path: Path) -> Path:
    # A server nobody answers at: what is checked is what archfit starts, not what it reaches.
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "laptop",
        "contexts": [{"name": "laptop", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {}}],
    }))  # fmt: skip
    return path


def _starting(
    tmp_path: Path, *serve_args: str, kubernetes: dict[str, object] | None = None
) -> dict[str, object]:
    kube = {"mode": "auto", "nodeIndex": False, "pullSecrets": False, **(kubernetes or {})}
    with running(tmp_path, serve_args=serve_args, kubernetes=kube) as archfit:
        lines = archfit.log_lines()
    return next(
        entry
        for entry in map(json.loads, (line for line in lines if line.startswith("{")))
        if entry["event"] == "archfit_starting"
    )


@pytest.fixture
def laptop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$KUBECONFIG names a cluster, as on an operator's machine (the serve inherits it)."""
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    return kubeconfig


def test_a_serve_from_kubeconfig_runs_no_writing_controller_and_says_so(laptop, tmp_path):
    """The watcher and the capacity check are withheld; the start-up line names them and the
    flag that runs them."""
    line = _starting(tmp_path)
    assert ([], True) == (
        line["controllers"],
        "`archfit serve --controllers` runs them" in str(line["controllers_withheld"]),
    )


def test_a_kubeconfig_given_with_the_flag_is_borrowed_too(tmp_path: Path):
    """`archfit serve --kubeconfig PATH` reads that cluster and writes nothing to it."""
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig")
    line = _starting(tmp_path, "--kubeconfig", str(kubeconfig))
    assert [] == line["controllers"]


def test_controllers_runs_the_watcher_from_a_borrowed_kubeconfig(laptop, tmp_path):
    """Asked for, it runs, and the start-up line says so."""
    line = _starting(tmp_path, "--controllers")
    assert (["watcher", "capacity"], None) == (line["controllers"], line["controllers_withheld"])


def test_settings_that_name_a_kubeconfig_run_the_watcher_as_a_deployment(tmp_path: Path):
    """kubernetes.kubeconfig in the settings: archfit deployed outside the cluster (beside a
    kubeadm control plane), not someone trying it."""
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig")
    line = _starting(tmp_path, kubernetes={"mode": "kubeconfig", "kubeconfig": str(kubeconfig)})
    assert (["watcher", "capacity"], None) == (line["controllers"], line["controllers_withheld"])


@pytest.mark.parametrize(
    ("watcher", "expected"),
    [
        ({}, ["watcher", "capacity"]),
        ({"remediate": True}, ["watcher+evictions", "capacity"]),
        ({"enabled": False}, ["capacity"]),
    ],
)
def test_in_a_pod_the_start_up_line_names_the_controllers_that_write(watcher, expected):
    """In a cluster (its service account), the settings alone decide, and the line lists them."""
    from extender.config.loading import from_mapping
    from extender.server import writing_controllers

    settings = from_mapping({"kubernetes": {"mode": "in-cluster"}, "watcher": watcher})
    assert expected == writing_controllers(settings)
