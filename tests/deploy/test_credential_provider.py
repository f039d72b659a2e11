"""The credential provider additions: the kustomize component and the chart's value.

Both render, apply with a strict server-side dry run under the restricted Pod Security
Standard, agree with each other, and wire archfit to the config and binaries they ship.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from extender.config.loading import from_mapping
from extender.registry.plugin_protocol import load_config
from tests.deploy import render
from tests.deploy.apiserver import ApiServer
from tests.deploy.render import Object, one
from tests.deploy.test_apply import archfit_namespace, dry_run_problems  # noqa: F401
from tests.deploy.test_render import _normalised

pytestmark = pytest.mark.e2e

COMPONENT = render.REPO / "deploy" / "kustomize" / "components" / "credential-provider"
NAMES = ["base_with_credential_provider", "chart_with_credential_provider"]


@pytest.fixture(scope="module")
def base_with_credential_provider(
    kustomize: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[Object]:
    """base plus the component, from an overlay as an operator would write it."""
    overlay = tmp_path_factory.mktemp("overlay")
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n- {os.path.relpath(render.KUSTOMIZE_BASE, overlay)}\n"
        f"components:\n- {os.path.relpath(COMPONENT, overlay)}\n"
    )
    return render.kustomize_build(kustomize, overlay)


@pytest.fixture(scope="module")
def chart_with_credential_provider(
    helm: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[Object]:
    """The chart with credentialProvider.enabled=true."""
    values = {"credentialProvider": {"enabled": True}}
    return render.helm_template(helm, values, tmp_path_factory.mktemp("values"))


@pytest.mark.usefixtures("archfit_namespace")
@pytest.mark.parametrize("name", NAMES)
def test_the_credential_provider_renders_apply_with_a_strict_dry_run_without_warnings(
    request: pytest.FixtureRequest, apiserver: ApiServer, name: str
) -> None:
    """The init container passes restricted admission; no field is dropped or warned about."""
    objects: list[Object] = request.getfixturevalue(name)
    assert ([], [], []) == dry_run_problems(apiserver, objects)


def test_the_chart_and_the_component_render_the_same_objects(
    base_with_credential_provider: list[Object], chart_with_credential_provider: list[Object]
) -> None:
    """Same kinds, names and specs (labels and hashes aside)."""
    ours = _normalised(base_with_credential_provider)
    theirs = _normalised(chart_with_credential_provider)
    ours.pop(("Namespace", "", render.NAMESPACE))
    different = [k for k in ours if ours[k] != theirs.get(k)]
    assert (sorted(ours), []) == (sorted(theirs), different)


@pytest.mark.parametrize("name", NAMES)
def test_archfit_is_pointed_at_the_shipped_config_and_the_copied_binaries(
    request: pytest.FixtureRequest, name: str
) -> None:
    """The env paths are where the ConfigMap and the init container's emptyDir are mounted."""
    objects: list[Object] = request.getfixturevalue(name)
    spec = one(objects, "Deployment", "archfit")["spec"]["template"]["spec"]
    (archfit,) = spec["containers"]
    (init,) = spec["initContainers"]
    env = {e["name"]: e["value"] for e in archfit["env"] if "value" in e}
    settings = from_mapping(
        {"registry": {"credentialProviders": {"configPath": "x", "binDir": "y"}}}
    ).registry.credential_providers
    config_path = env["ARCHFIT_REGISTRY__CREDENTIAL_PROVIDERS__CONFIG_PATH"]
    bin_dir = env["ARCHFIT_REGISTRY__CREDENTIAL_PROVIDERS__BIN_DIR"]
    mounts = {m["mountPath"]: m["name"] for m in archfit["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    config_volume = volumes[mounts[os.path.dirname(config_path)]]
    config_map = one(objects, "ConfigMap", config_volume["configMap"]["name"])
    raw = config_map["data"][os.path.basename(config_path)].encode()
    (provider,) = load_config(raw, "rendered")
    init_mounts = {m["name"] for m in init["volumeMounts"]}
    assert ("y", "ecr-credential-provider") == (settings.bin_dir, provider.name)
    assert {mounts[bin_dir]} == init_mounts
    assert bin_dir.rstrip("/") + "/" == init["command"][-1]
    assert "emptyDir" in volumes[mounts[bin_dir]]
