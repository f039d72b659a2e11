"""A registry on loopback with an amd64-only and a multi-arch image, for the README's quick
start without registry access.

    python -m tests.support.demo_registry DIR

Starts Debian's `docker-registry` (CNCF distribution) on a free loopback port with its
storage in DIR, pushes `demo/amd64-only:1.0` (linux/amd64 alone) and `demo/multi-arch:1.0`
(linux/amd64 and linux/arm64), writes DIR/archfit.yaml (that registry over plain HTTP and
allowed past the SSRF guard, Kubernetes off), DIR/image (the amd64-only reference) and
DIR/multi-arch (the other), then serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
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
    multi_arch = f"{registry.host}/demo/multi-arch:1.0"
    settings = {
        "kubernetes": {"mode": "off"},
        "registry": {
            "hosts": {registry.host: {"plainHttp": True}},
            "allowedNetworks": [registry.host],
        },
    }
    # archfit.yaml last: its presence tells a waiting shell that everything is ready.
    (directory / "image").write_text(amd64_only.reference + "\n")
    (directory / "multi-arch").write_text(multi_arch + "\n")
    written = directory / "archfit.yaml.tmp"
    written.write_text(yaml.safe_dump(settings, sort_keys=False))
    written.replace(directory / "archfit.yaml")
    return registry


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.demo_registry",
        description="Serve a registry on loopback with demo/amd64-only:1.0 (linux/amd64) and "
        "demo/multi-arch:1.0 (linux/amd64, linux/arm64), and write DIR/archfit.yaml, which "
        "lets archfit read it, until SIGTERM or SIGINT.",
    )
    parser.add_argument("directory", metavar="DIR", help="where the registry keeps its files")
    directory = Path(parser.parse_args(argv).directory)
    if not os.access(REGISTRY_BINARY, os.X_OK):
        sudo = "" if os.geteuid() == 0 else "sudo "
        print(
            f"demo_registry: {REGISTRY_BINARY} not found: {sudo}apt-get install -y "
            "docker-registry, or name another with DOCKER_REGISTRY_BINARY",
            file=sys.stderr,
        )
        return 3
    directory.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    registry = publish(directory)
    image, multi = ((directory / name).read_text().strip() for name in ("image", "multi-arch"))
    print(
        f"demo_registry: {registry.url} serves {image} (linux/amd64 only) and {multi} "
        "(linux/amd64, linux/arm64)",
        file=sys.stderr,
    )
    try:
        stop.wait()
    finally:
        registry.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
