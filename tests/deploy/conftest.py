"""Fixtures for the deploy tests: kustomize and helm built from Go modules, their
renders of deploy/, and the e2e suite's real kube-apiserver to dry-run them against.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy import render
from tests.deploy.apiserver import ApiServer

# The e2e suite's session fixtures: etcd + kube-apiserver from tests/e2e/build.sh.
from tests.e2e.conftest import control_plane, e2e_binaries  # noqa: F401
from tests.e2e.controlplane import ControlPlane
from tests.support.prerequisites import built


def _tool(name: str) -> Path:
    return built("DEPLOY TESTS", lambda: render.build_tool(name))


@pytest.fixture(scope="session")
def kustomize() -> Path:
    """kustomize from tests/deploy/build-tools.sh (cached)."""
    return _tool("kustomize")


@pytest.fixture(scope="session")
def helm() -> Path:
    """helm from tests/deploy/build-tools.sh (cached)."""
    return _tool("helm")


@pytest.fixture(scope="session")
def base(kustomize: Path) -> list[render.Object]:
    """`kustomize build deploy/kustomize/base`."""
    return render.kustomize_build(kustomize, render.KUSTOMIZE_BASE)


@pytest.fixture(scope="session")
def overlay(kustomize: Path) -> list[render.Object]:
    """`kustomize build deploy/kustomize/second-scheduler`."""
    return render.kustomize_build(kustomize, render.KUSTOMIZE_SECOND_SCHEDULER)


@pytest.fixture(scope="session")
def webhook_overlay(kustomize: Path) -> list[render.Object]:
    """`kustomize build deploy/kustomize/webhook` (base plus the webhook component)."""
    return render.kustomize_build(kustomize, render.KUSTOMIZE_WEBHOOK)


@pytest.fixture(scope="session")
def chart_with_webhook(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> list[render.Object]:
    """`helm template` of the chart with webhook.enabled=true."""
    return render.helm_template(
        helm, {"webhook": {"enabled": True}}, tmp_path_factory.mktemp("values")
    )


@pytest.fixture(scope="session")
def policy_overlay(kustomize: Path) -> list[render.Object]:
    """`kustomize build deploy/kustomize/admission-policy` (webhook and policy components)."""
    return render.kustomize_build(kustomize, render.KUSTOMIZE_POLICY)


@pytest.fixture(scope="session")
def chart_with_policy(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> list[render.Object]:
    """`helm template` of the chart with webhook.enabled and admissionPolicy.enabled."""
    values = {"webhook": {"enabled": True}, "admissionPolicy": {"enabled": True}}
    return render.helm_template(helm, values, tmp_path_factory.mktemp("values"))


@pytest.fixture(scope="session")
def chart(helm: Path) -> list[render.Object]:
    """`helm template` of the chart with its default values."""
    return render.helm_template(helm)


@pytest.fixture(scope="session")
def chart_with_scheduler(
    helm: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[render.Object]:
    """`helm template` of the chart with secondScheduler.enabled=true."""
    return render.helm_template(
        helm, {"secondScheduler": {"enabled": True}}, tmp_path_factory.mktemp("values")
    )


@pytest.fixture(scope="session")
def renders(
    base: list[render.Object],
    overlay: list[render.Object],
    chart: list[render.Object],
    chart_with_scheduler: list[render.Object],
) -> dict[str, list[render.Object]]:
    """Every shipped render, by name."""
    return {
        "kustomize-base": base,
        "kustomize-second-scheduler": overlay,
        "helm-default": chart,
        "helm-second-scheduler": chart_with_scheduler,
    }


@pytest.fixture(scope="session")
def apiserver(control_plane: ControlPlane) -> ApiServer:  # noqa: F811
    """The e2e kube-apiserver, as its admin (system:masters)."""
    return ApiServer(control_plane.server, control_plane.admin_ssl_context())
