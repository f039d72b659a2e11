"""The images e2e scenarios schedule, pushed into real registries on loopback.

Uses the registry process and pusher from tests/support (CNCF distribution 2.8).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.images import Image, Pusher
from tests.support.registry import RegistryProcess

#: user, password of the Basic-auth registry; pods reach it through a pull secret.
PRIVATE_USER = ("archfit-e2e", "e2e-pull-pass-7331")


@dataclass(frozen=True)
class Images:
    """The images the scenarios schedule, by what they can run on."""

    multi: Image
    """linux/amd64 + linux/arm64 (OCI index)."""
    amd64_only: Image
    arm64_only: Image
    s390x_only: Image
    """Runs on none of the nodes."""
    armv7_only: Image
    """linux/arm/v7: only arm64 nodes whose runtime falls back to 32-bit arm run it."""
    private_arm64_only: Image
    """Behind Basic auth; needs the pod's imagePullSecrets."""
    private_s390x_only: Image
    """Behind Basic auth; runs on none of the nodes."""
    unreachable_s390x_only: Image
    """In a registry that is stopped before any test runs: an outage."""
    private_registry: str
    """host:port of the Basic-auth registry, as a pull secret names it."""
    public: RegistryProcess
    """The anonymous registry, to push more images to and to count its requests."""


class TempFactory:
    """Stands in for pytest's tmp_path_factory outside pytest (the benchmarks): `published`
    takes either."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=name, dir=self.root))


@contextlib.contextmanager
def published(tmp_path_factory: pytest.TempPathFactory | TempFactory) -> Iterator[Images]:
    """Start three real registries on loopback (public, Basic-auth, one already down),
    push the scenario images, and stop the registries on exit."""
    public = RegistryProcess.start(tmp_path_factory.mktemp("registry-public"))
    private: RegistryProcess | None = None
    try:
        private = RegistryProcess.start(
            tmp_path_factory.mktemp("registry-private"), htpasswd=PRIVATE_USER
        )
        gone = RegistryProcess.start(tmp_path_factory.mktemp("registry-gone"))
        try:
            unreachable = Pusher(gone.url).single("e2e/s390x-only", "1.0", "linux/s390x")
        finally:
            gone.stop()
        pusher = Pusher(public.url)
        private_pusher = Pusher(private.url, basic=PRIVATE_USER)
        multi, _ = pusher.index("e2e/multi", "1.0", ["linux/amd64", "linux/arm64"])
        yield Images(
            multi=multi,
            amd64_only=pusher.single("e2e/amd64-only", "1.0", "linux/amd64"),
            arm64_only=pusher.single("e2e/arm64-only", "1.0", "linux/arm64"),
            s390x_only=pusher.single("e2e/s390x-only", "1.0", "linux/s390x"),
            armv7_only=pusher.single("e2e/armv7-only", "1.0", "linux/arm/v7"),
            private_arm64_only=private_pusher.single("e2e/private-arm64", "1.0", "linux/arm64"),
            private_s390x_only=private_pusher.single("e2e/private-s390x", "1.0", "linux/s390x"),
            unreachable_s390x_only=unreachable,
            private_registry=private.host,
            public=public,
        )
    finally:
        if private is not None:
            private.stop()
        public.stop()
