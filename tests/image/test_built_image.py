"""The shipped Dockerfile, really built with buildah and really run with runc.

One container per architecture serves them the way a restricted pod runs the image: UID 65532,
no capabilities, read-only root filesystem, the shipped ConfigMap at /etc/archfit.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import extender
from tests.deploy.render import REPO
from tests.image import buildah, runc
from tests.image.conftest import Served, Unpacked, serving
from tests.support.fixtures import PublishedRegistry

pytestmark = pytest.mark.image

#: Unpacked bytes: Debian's Python (about 200 MB with pip) plus the venv (about 190 MB,
#: most of it the kubernetes client). A jump past this means something new came in.
MAX_IMAGE_BYTES = 450 * 1000 * 1000
#: Well inside kubelet's default terminationGracePeriodSeconds (30).
GRACE_SECONDS = 20.0


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310
        return response.status, response.read()


def _filter(served: Served, image: str) -> dict[str, Any]:
    body = {
        "Pod": {
            "metadata": {"name": "api", "namespace": "shop"},
            "spec": {"containers": [{"name": "api", "image": image}]},
        },
        "Nodes": {
            "items": [
                {
                    "metadata": {
                        "name": name,
                        "labels": {"kubernetes.io/arch": arch, "kubernetes.io/os": "linux"},
                    }
                }
                for name, arch in (("arm-1", "arm64"), ("amd-1", "amd64"))
            ]
        },
        "NodeNames": None,
    }
    request = urllib.request.Request(  # noqa: S310
        f"{served.url}/scheduler/filter",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def test_the_image_answers_healthz_and_readyz_with_the_shipped_config(served: Served) -> None:
    """/healthz and /readyz are 200 from the container, configured by the mounted ConfigMap."""
    assert (200, 200) == (_get(f"{served.url}/healthz")[0], _get(f"{served.url}/readyz")[0])


def test_the_image_is_built_for_the_architecture_it_is_named_for(
    served: Served, image: buildah.Built, store: buildah.Buildah
) -> None:
    """The image config and the running interpreter both say the requested architecture."""
    machine = served.container.exec("python", "-c", "import platform; print(platform.machine())")
    expected_machine = {"amd64": "x86_64", "arm64": "aarch64"}[served.arch]
    config = store.inspect(image.name)["OCIv1"]
    assert (served.arch, "linux", expected_machine) == (
        config["architecture"],
        config["os"],
        machine.stdout.strip(),
    )


def test_the_image_runs_as_uid_65532_without_capabilities(served: Served) -> None:
    """The serving process is 65532:65532 with an empty effective capability set."""
    status = runc.process_status(served.container.pid())
    assert ("65532", "65532", 0) == (
        status["Uid"].split()[0],
        status["Gid"].split()[0],
        int(status["CapEff"], 16),
    )


def test_the_image_root_filesystem_is_read_only_and_tmp_is_writable(served: Served) -> None:
    """Writing under /opt/archfit fails with EROFS; /tmp (the tmpfs) takes a file."""
    write = "import sys; open(sys.argv[1], 'w').write('x')"
    into_venv = served.container.exec("python", "-c", write, "/opt/archfit/written")
    into_tmp = served.container.exec("python", "-c", write, "/tmp/written")
    assert (True, 0) == ("Read-only file system" in into_venv.stderr, into_tmp.returncode)


def test_the_image_filters_out_arm_nodes_for_an_amd64_only_image_from_a_registry(
    served: Served,
) -> None:
    """A filter call resolves the image in the local registry and rejects only arm64
    (dropped unnamed: a node passed, so the reason would reach no event)."""
    image = served.registry.catalog.amd64_only.reference
    answer = _filter(served, image)
    assert (["amd-1"], [], "") == (
        [node["metadata"]["name"] for node in answer["Nodes"]["items"]],
        sorted(answer["FailedAndUnresolvableNodes"]),
        answer.get("Error", ""),
    )


def test_the_image_ships_the_redis_client_that_a_redis_cache_url_needs(served: Served) -> None:
    """`import redis` works in the image: cache.url: redis:// does not crash it."""
    imported = served.container.exec("python", "-c", "import redis; print(redis.__version__)")
    assert (0, "") == (imported.returncode, imported.stderr)


def test_the_image_carries_no_pip_or_setuptools(served: Served) -> None:
    """The runtime stage drops the base's pip, setuptools and wheel: nothing there installs."""
    # The base's python, not archfit's venv (first on PATH), which never sees them anyway.
    found = served.container.exec(
        "env",
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "python3",
        "-c",
        "import importlib.util as u; "
        "print([m for m in ('pip', 'setuptools', 'wheel') if u.find_spec(m)])",
    )
    on_path = served.container.exec("sh", "-c", "command -v pip pip3 || true")
    assert (0, "[]", "") == (found.returncode, found.stdout.strip(), on_path.stdout.strip())


def test_the_image_exits_cleanly_within_its_grace_period_on_sigterm(
    unpacked: Unpacked, public_registry: PublishedRegistry, tmp_path: Path
) -> None:
    """archfit runs as PID 1 of its container and still stops with status 0 on SIGTERM."""
    with serving(unpacked, public_registry, tmp_path) as running:
        status = running.container.stop(grace=GRACE_SECONDS)
    assert 0 == status, running.container.output()[-3000:]


def test_the_image_carries_oci_labels_naming_this_version_revision_and_source(
    image: buildah.Built, store: buildah.Buildah
) -> None:
    """org.opencontainers.image.* labels: title, licence, archfit's version, git HEAD."""
    labels = store.inspect(image.name)["OCIv1"]["config"]["Labels"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert {
        "org.opencontainers.image.title": "archfit",
        "org.opencontainers.image.description": project["description"],
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.version": extender.__version__,
        "org.opencontainers.image.revision": head,
        "org.opencontainers.image.source": "https://github.com/archfit/archfit",
    } == labels


def test_the_image_stays_under_its_size_budget(
    image: buildah.Built, store: buildah.Buildah, capsys: pytest.CaptureFixture[str]
) -> None:
    """The unpacked image is below MAX_IMAGE_BYTES; its size is printed for the record."""
    size = store.size(image.name)
    with capsys.disabled():
        print(f"\n{image.name}: {size / 1e6:.0f} MB unpacked")
    assert size < MAX_IMAGE_BYTES, f"{size / 1e6:.0f} MB"
