"""Fixtures for the image tests: the Dockerfile built with buildah, and run with runc.

The image is built once per architecture and session (tests/image/build.sh, cached outside
the clone), and one container per image serves every test: UID 65532, no capabilities, a
read-only root filesystem, the shipped ConfigMap at /etc/archfit, a local registry.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.render import REPO
from tests.image import buildah, runc
from tests.support.fixtures import PublishedRegistry
from tests.support.prerequisites import built, require_binary
from tests.support.process import free_port

SHIPPED_CONFIG = REPO / "deploy" / "kustomize" / "base" / "archfit.yaml"
#: Seconds until /healthz answers: Python under qemu imports the kubernetes client slowly.
START_TIMEOUT = {"amd64": 60.0, "arm64": 180.0}
_HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def built_image(arch: str) -> buildah.Built:
    """build.sh's image for `arch`; fails under CI=true, skips loudly elsewhere."""
    return built("IMAGE TESTS", lambda: buildah.build(arch))


@pytest.fixture(scope="session")
def store() -> buildah.Buildah:
    """buildah on the image cache's storage."""
    return buildah.Buildah()


#: What archfit is published for: this machine's architecture first, the other under
#: qemu-user-static (binfmt_misc), which makes a cold build several minutes slower;
#: `ARCHFIT_IMAGE_ARCHES=amd64` narrows a local run.
ARCHITECTURES = [
    arch
    for arch in [_HOST_ARCH, *sorted({"amd64", "arm64"} - {_HOST_ARCH})]
    if arch in os.environ.get("ARCHFIT_IMAGE_ARCHES", "amd64,arm64").split(",")
]


@pytest.fixture(scope="session", params=ARCHITECTURES)
def image(request: pytest.FixtureRequest) -> buildah.Built:
    """The Dockerfile built for each architecture archfit is published for."""
    arch: str = request.param
    return built_image(arch)


def container_config(registry_host: str, port: int) -> dict[str, Any]:
    """The shipped ConfigMap with what a machine without a cluster needs changed.

    No API server (kubernetes.mode off: Nodes come whole in the request), loopback only,
    and the test registry allowed though it is private and plain HTTP.
    """
    settings: dict[str, Any] = yaml.safe_load(SHIPPED_CONFIG.read_text())
    settings["server"].update(host="127.0.0.1", port=port)
    settings["kubernetes"]["mode"] = "off"
    registry = settings.setdefault("registry", {})
    registry["allowedNetworks"] = ["127.0.0.1/32"]
    registry.setdefault("hosts", {})[registry_host] = {"plainHttp": True}
    return settings


@dataclass(frozen=True)
class Unpacked:
    """An image's filesystem, mounted once and shared read-only by its containers."""

    arch: str
    rootfs: Path
    config: dict[str, Any]
    """The OCI image config: User, Entrypoint, Cmd, Env, WorkingDir."""


@dataclass(frozen=True)
class Served:
    """A running container of the image and what it was given."""

    url: str
    arch: str
    container: runc.Container
    registry: PublishedRegistry


@pytest.fixture(scope="session")
def unpacked(image: buildah.Built, store: buildah.Buildah) -> Iterator[Unpacked]:
    """The image's root filesystem, for runc."""
    require_binary("runc", "runc")
    oci_config = store.inspect(image.name)["OCIv1"]["config"]
    with store.rootfs(image.name) as rootfs:
        yield Unpacked(image.arch, rootfs, oci_config)


@contextmanager
def serving(unpacked: Unpacked, registry: PublishedRegistry, bundle: Path) -> Iterator[Served]:
    """Run the image as a restricted pod would, until it answers /healthz; stop it after."""
    config_dir = bundle / "etc-archfit"
    config_dir.mkdir()
    port = free_port()
    settings = container_config(registry.registry.host, port)
    (config_dir / "archfit.yaml").write_text(yaml.safe_dump(settings))
    config = runc.bundle_config(unpacked.rootfs, unpacked.config, config_dir)
    name = runc.unique_name(f"archfit-{unpacked.arch}")
    container = runc.Container.start(bundle, config, name)
    try:
        url = f"http://127.0.0.1:{port}"
        container.wait_http(f"{url}/healthz", timeout=START_TIMEOUT[unpacked.arch])
        yield Served(url, unpacked.arch, container, registry)
    finally:
        container.stop()


@pytest.fixture(scope="session")
def served(
    unpacked: Unpacked,
    public_registry: PublishedRegistry,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    """The container most tests talk to, one per architecture."""
    with serving(unpacked, public_registry, tmp_path_factory.mktemp("bundle")) as running:
        yield running
