"""Session fixtures for the e2e suite: binaries, control plane, nodes, registries, stack,
and the autoscaled cluster with Karpenter.

The control plane starts once per session. Scenarios ask `stack.ensure(...)` for the
archfit settings they need; archfit and kube-scheduler restart only when those change.
The autoscaled cluster has its own control plane and starts only when a test asks for it.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e import binaries, catalog, cluster
from tests.e2e.archfit import archfit_settings
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.catalog import Images
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.karpenter import KarpenterBuild
from tests.e2e.stack import Stack
from tests.e2e.topology import control_plane_with_nodes
from tests.e2e.webhook import WebhookArchfit, serving_webhook
from tests.support.prerequisites import built


@pytest.fixture(scope="session")
def e2e_binaries() -> Binaries:
    """kube-apiserver, kube-scheduler, kube-controller-manager and etcd from
    tests/e2e/build.sh (cached)."""
    return Binaries(built("E2E", binaries.build))


@pytest.fixture(scope="session")
def karpenter_build() -> KarpenterBuild:
    """Karpenter (kwok provider) and its CRDs from tests/e2e/build-karpenter.sh (cached)."""
    return KarpenterBuild(built("E2E", binaries.build_karpenter))


@pytest.fixture(scope="session")
def control_plane(
    e2e_binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver on loopback, with the four test nodes registered."""
    with control_plane_with_nodes(e2e_binaries, tmp_path_factory.mktemp("controlplane")) as plane:
        yield plane


OwnControlPlane = Callable[[Path], contextlib.AbstractContextManager[ControlPlane]]
"""Starts a control plane in a directory, for one `with` block."""


@pytest.fixture(scope="session")
def own_control_plane(e2e_binaries: Binaries) -> OwnControlPlane:
    """For a module whose scenario needs a control plane of its own (a webhook registered,
    a policy installed, nodes relabelled): etcd and kube-apiserver in the directory given,
    the four test nodes registered, stopped when the block ends."""
    return functools.partial(control_plane_with_nodes, e2e_binaries)


HookedArchfit = Callable[
    [ControlPlane, Mapping[str, Any], Path], contextlib.AbstractContextManager[WebhookArchfit]
]
"""Starts archfit with these settings in a directory, its webhook registered with the control
plane, for one `with` block."""


@pytest.fixture(scope="session")
def hooked_archfit(images: Images) -> HookedArchfit:
    """archfit serving with the settings given, its webhook registered with the control plane
    and seen called for a pod of the multi-arch image; stopped and unregistered when the
    block ends."""

    def start(
        control_plane: ControlPlane, settings: Mapping[str, Any], workdir: Path
    ) -> contextlib.AbstractContextManager[WebhookArchfit]:
        kubeconfig = control_plane.admin_kubeconfig
        return serving_webhook(kubeconfig, settings, workdir, images.multi.reference)

    return start


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


def _namespace_name(request: pytest.FixtureRequest) -> str:
    """A namespace name of the test's own, valid as a DNS label."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    return f"{slug}-{abs(hash(request.node.nodeid)) % 10**6}"


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test; its pods are deleted afterwards."""
    name = _namespace_name(request)
    cluster.create_namespace(core, name)
    try:
        yield name
    finally:
        cluster.delete_namespace_pods(core, name)


@pytest.fixture(scope="session")
def autoscaled_cluster(
    e2e_binaries: Binaries,
    karpenter_build: KarpenterBuild,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AutoscaledCluster]:
    """Its own control plane with no nodes, Karpenter and its NodePools; one per session."""
    autoscaled = AutoscaledCluster(
        e2e_binaries, karpenter_build, tmp_path_factory.mktemp("autoscaled")
    )
    try:
        yield autoscaled.start()
    finally:
        autoscaled.stop()


@pytest.fixture
def autoscaled(autoscaled_cluster: AutoscaledCluster) -> Iterator[AutoscaledCluster]:
    """The autoscaled cluster at zero nodes and no scheduler; reset again afterwards."""
    autoscaled_cluster.reset()
    try:
        yield autoscaled_cluster
    finally:
        autoscaled_cluster.reset()


@pytest.fixture
def autoscaled_controllers(autoscaled: AutoscaledCluster) -> Iterator[AutoscaledCluster]:
    """The autoscaled cluster with kube-controller-manager's Deployment and ReplicaSet
    controllers running (opt-in: other tests' Deployments stay plain objects)."""
    autoscaled.start_controllers()
    try:
        yield autoscaled
    finally:
        autoscaled.stop_controllers()


@pytest.fixture
def autoscaled_namespace(autoscaled: AutoscaledCluster, request: pytest.FixtureRequest) -> str:
    """A fresh namespace in the autoscaled cluster; reset() deletes its pods."""
    return autoscaled.create_namespace(_namespace_name(request))


@pytest.fixture(scope="session")
def autoscaled_settings(autoscaled_cluster: AutoscaledCluster, images: Images) -> dict[str, Any]:
    """base_settings, but for an archfit that watches the autoscaled cluster."""
    return archfit_settings(autoscaled_cluster.control_plane.admin_kubeconfig, images)
