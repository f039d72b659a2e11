"""Session fixtures for the e2e suite: binaries, control plane, nodes, registries, stack.

The control plane starts once per session. Scenarios ask `stack.ensure(...)` for the
archfit settings they need; archfit and kube-scheduler restart only when those change.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e import binaries, catalog, cluster
from tests.e2e.archfit import archfit_settings
from tests.e2e.catalog import Images
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.stack import Stack
from tests.e2e.topology import NODES
from tests.support.prerequisites import unavailable


@pytest.fixture(scope="session")
def e2e_binaries() -> Binaries:
    """kube-apiserver, kube-scheduler and etcd from tests/e2e/build.sh (cached)."""
    try:
        return Binaries(binaries.build())
    except binaries.Unavailable as error:
        unavailable("E2E", error)
    except binaries.BuildFailed as error:
        pytest.fail(f"building the e2e binaries failed: {error}")


@pytest.fixture(scope="session")
def control_plane(
    e2e_binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver on loopback, with the four test nodes registered."""
    plane = ControlPlane(e2e_binaries, tmp_path_factory.mktemp("controlplane")).start()
    try:
        core = cluster.core_api(plane.admin_kubeconfig)
        for node in NODES:
            cluster.create_node(core, node)
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def core(control_plane: ControlPlane) -> client.CoreV1Api:
    """A CoreV1Api with admin rights."""
    return cluster.core_api(control_plane.admin_kubeconfig)


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    """Three real registries on loopback (public, Basic-auth, one already down) and images."""
    with catalog.published(tmp_path_factory) as published:
        yield published


@pytest.fixture(scope="session")
def base_settings(control_plane: ControlPlane, images: Images) -> dict[str, Any]:
    """archfit settings every scenario starts from: enforce, fail-open, local registries."""
    return archfit_settings(control_plane.admin_kubeconfig, images)


@pytest.fixture(scope="session")
def stack(
    e2e_binaries: Binaries,
    control_plane: ControlPlane,
    base_settings: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """The shared archfit + kube-scheduler; stopped at the end of the session."""
    shared = Stack(e2e_binaries, control_plane, tmp_path_factory.mktemp("stack"), base_settings)
    try:
        yield shared
    finally:
        shared.stop()


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test; its pods are deleted afterwards."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{slug}-{abs(hash(request.node.nodeid)) % 10**6}"
    cluster.create_namespace(core, name)
    try:
        yield name
    finally:
        cluster.delete_namespace_pods(core, name)
