"""`archfit serve` from a laptop with a kubeconfig: it reads that cluster, but runs nothing
that writes to it (the watcher's Lease, Events, evictions) unless asked with --controllers;
the start-up line says which controllers run."""

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


def _starting(tmp_path: Path, *serve_args: str) -> dict[str, object]:
    kube = {"mode": "auto", "kubeconfig": str(_kubeconfig(tmp_path / "kubeconfig")),
            "nodeIndex": False, "pullSecrets": False}  # fmt: skip
    with running(tmp_path, serve_args=serve_args, kubernetes=kube) as archfit:
        lines = archfit.log_lines()
    return next(
        entry
        for entry in map(json.loads, (line for line in lines if line.startswith("{")))
        if entry["event"] == "archfit_starting"
    )


def test_a_serve_from_a_kubeconfig_runs_no_writing_controller_and_says_so(tmp_path: Path):
    """The watcher is withheld, and the start-up line names it and the flag that runs it."""
    line = _starting(tmp_path)
    assert ([], True) == (
        line["controllers"],
        "`archfit serve --controllers` runs it" in str(line["controllers_withheld"]),
    )


def test_controllers_runs_the_watcher_from_a_kubeconfig_too(tmp_path: Path):
    """Asked for, it runs, and the start-up line says so."""
    line = _starting(tmp_path, "--controllers")
    assert (["watcher"], None) == (line["controllers"], line["controllers_withheld"])


@pytest.mark.parametrize(
    ("watcher", "expected"),
    [({}, ["watcher"]), ({"remediate": True}, ["watcher+evictions"]), ({"enabled": False}, [])],
)
def test_in_a_pod_the_start_up_line_names_the_controllers_that_write(watcher, expected):
    """In a cluster (its service account), the settings alone decide, and the line lists them."""
    from extender.config import from_mapping
    from extender.server import writing_controllers

    settings = from_mapping({"kubernetes": {"mode": "in-cluster"}, "watcher": watcher})
    assert expected == writing_controllers(settings)
