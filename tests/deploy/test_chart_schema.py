"""The chart refuses mistakes with real helm: a value it does not read (misspelt or in the
wrong tree) fails `helm template` naming it, as does a combination of values that would install
an archfit that cannot work; values that need each other render together."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import chart_schema, render

pytestmark = pytest.mark.e2e

DEPLOY_README = (render.REPO / "deploy" / "README.md").read_text()


def _template(
    helm: Path, tmp_path: Path, values: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """`helm template` of the chart with `values`, as a process (its errors are the point)."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return subprocess.run(
        [
            str(helm), "template", render.RELEASE, str(render.HELM_CHART), "--namespace",
            render.NAMESPACE, "--kube-version", render.KUBE_VERSION, "--values", str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


def test_the_schemas_config_is_archfits_own_settings_schema() -> None:
    """values.schema.json's `config` is `archfit config --schema`: a setting added to archfit
    is one the chart takes (python -m tests.deploy.chart_schema rewrites it)."""
    assert chart_schema.expected() == chart_schema.SCHEMA.read_text()


@pytest.mark.parametrize(
    ("values", "refused"),
    [
        ({"webhook": {"archTaints": [{"architecture": "arm64"}]}},
         "at '/webhook': additional properties 'archTaints'"),
        ({"replicaCont": 3}, "at '': additional properties 'replicaCont'"),
        ({"config": {"webhook": {"archTaint": []}}},
         "at '/config/webhook': additional properties 'archTaint'"),
        ({"config": {"policy": {"failurePolicy": "open"}}}, "at '/config/policy/failurePolicy'"),
        ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"),
    ],
)  # fmt: skip
def test_a_value_the_chart_does_not_read_fails_helm_naming_it(
    helm: Path, tmp_path: Path, values: dict[str, Any], refused: str
) -> None:
    """deploy/README's old GKE advice (`webhook.archTaints`, which the chart's own `webhook`
    tree drops), a misspelt key, a setting archfit does not have, a choice it does not know."""
    done = _template(helm, tmp_path, values)
    assert (1, True) == (done.returncode, refused in done.stderr), done.stderr[-2000:]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": {"webhook": {"enabled": True}}}, "set webhook.enabled instead"),
        ({"config": {"admissionPolicy": {"enabled": True}}}, "set admissionPolicy.enabled instead"),
        ({"webhook": {"certManager": {"enabled": True}}},
         "webhook.certManager.enabled needs webhook.enabled"),
        ({"webhook": {"enabled": True},
          "config": {"webhook": {"schedulerName": "archfit-scheduler"}}},
         "would stay Pending: set secondScheduler.enabled=true"),
        ({"rbac": {"pullSecrets": False}}, "set config.kubernetes.pullSecrets=false too"),
        ({"webhook": {"enabled": True, "timeoutSeconds": 2}},
         "webhook.timeoutSeconds 2 must be above config.webhook.resolveDeadlineSeconds 2"),
        ({"secondScheduler": {"enabled": True, "extender": {"httpTimeout": "1500ms"}}},
         "httpTimeout 1500ms must be above config.policy.resolveDeadlineSeconds 1.5"),
        ({"secondScheduler": {"enabled": True}, "config": {"kubernetes": {"nodeIndex": False}}},
         "keep config.kubernetes.nodeIndex true"),
    ],
)  # fmt: skip
def test_values_that_cannot_work_together_fail_helm_with_the_fix(
    helm: Path, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    """Each combination would install an archfit that fails quietly (a pod routed to no
    scheduler, secrets it may not read, a timeout below its own deadline)."""
    done = _template(helm, tmp_path, values)
    assert (1, True) == (done.returncode, message in done.stderr), done.stderr[-2000:]


def test_the_admission_policy_without_the_webhook_comes_with_the_releasers_rights(
    helm: Path, tmp_path: Path
) -> None:
    """serve runs the releaser for the pods the policy holds, webhook or not: its ClusterRole
    and binding render with the policy."""
    objects = render.helm_template(helm, {"admissionPolicy": {"enabled": True}}, tmp_path)
    role = render.one(objects, "ClusterRole", "archfit-releaser")
    binding = render.one(objects, "ClusterRoleBinding", "archfit-releaser")
    pods = [r for r in role["rules"] if r.get("resources") == ["pods"]]
    assert ([["get", "list", "watch", "patch"]], "archfit-releaser") == (
        [r["verbs"] for r in pods],
        binding["roleRef"]["name"],
    )


def test_the_gke_rows_helm_command_sets_archfits_arch_taints(helm: Path, tmp_path: Path) -> None:
    """deploy/README's GKE Helm command, as written: the taint reaches archfit.yaml, under the
    chart's `config`, not the chart's own `webhook` values."""
    section = DEPLOY_README[DEPLOY_README.index("### GKE Arm nodes") :]
    (command,) = re.findall(r"^```sh\n(helm upgrade .*?)^```$", section, re.DOTALL | re.MULTILINE)
    argv = shlex.split(command.replace("\\\n", " "))
    (pairs,) = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--set-json"]
    path, _, value = pairs.partition("=")
    values = {
        "webhook": {"enabled": True},
        "config": {"webhook": {"archTaints": json.loads(value)}},
    }
    objects = render.helm_template(helm, values, tmp_path)
    settings = render.config_file(
        render.one(objects, "ConfigMap", "archfit-config"), "archfit.yaml"
    )
    assert ("config.webhook.archTaints", ["arm64"]) == (
        path,
        [taint["architecture"] for taint in settings["webhook"]["archTaints"]],
    )
