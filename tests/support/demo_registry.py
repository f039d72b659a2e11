"""A registry on loopback with one amd64-only image, for the README's offline quick start.

    python -m tests.support.demo_registry DIR

Starts Debian's `docker-registry` (CNCF distribution) on a free loopback port with its
storage in DIR, pushes `demo/amd64-only:1.0` (linux/amd64 alone) and `demo/multi-arch:1.0`
(linux/amd64 and linux/arm64), writes DIR/archfit.yaml (that registry over plain HTTP and
allowed past the SSRF guard, Kubernetes off) and DIR/image (the amd64-only reference),
then serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import yaml

from tests.support.images import Pusher
from tests.support.registry import REGISTRY_BINARY, RegistryProcess


def publish(directory: Path) -> RegistryProcess:
    """Start the registry, push the two images and write DIR/archfit.yaml and DIR/image."""
    registry = RegistryProcess.start(directory / "registry")
    pusher = Pusher(registry.url)
    amd64_only = pusher.single("demo/amd64-only", "1.0", "linux/amd64")
    pusher.index("demo/multi-arch", "1.0", ["linux/amd64", "linux/arm64"])
    settings = {
        "kubernetes": {"mode": "off"},
        "registry": {
            "hosts": {registry.host: {"plainHttp": True}},
            "allowedNetworks": [registry.host],
        },
    }
    # archfit.yaml last: its presence tells a waiting shell that everything is ready.
    (directory / "image").write_text(amd64_only.reference + "\n")
    written = directory / "archfit.yaml.tmp"
    written.write_text(yaml.safe_dump(settings, sort_keys=False))
    written.replace(directory / "archfit.yaml")
    return registry


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    if not os.access(REGISTRY_BINARY, os.X_OK):
        print(
            f"demo_registry: {REGISTRY_BINARY} not found: sudo apt-get install -y "
            "docker-registry, or name another with DOCKER_REGISTRY_BINARY",
            file=sys.stderr,
        )
        return 3
    directory = Path(argv[0])
    directory.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    registry = publish(directory)
    image = (directory / "image").read_text().strip()
    print(f"demo_registry: {registry.url} serves {image} (linux/amd64 only)", file=sys.stderr)
    try:
        stop.wait()
    finally:
        registry.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
