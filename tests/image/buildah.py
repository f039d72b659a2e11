"""Build the shipped Dockerfile through tests/image/build.sh and read the result with buildah.

With CI=true a missing buildah or mmdebstrap, or a failed build, is an error, never a
skip; on a developer machine without them the image tests skip with a message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.prerequisites import last_line, run_build

BUILD_SCRIPT = Path(__file__).resolve().parent / "build.sh"
#: A cold build (mmdebstrap, then pip from PyPI, on vfs) takes minutes; a hung one must
#: not stall CI for its whole limit.
BUILD_TIMEOUT_SECONDS = 30 * 60
#: build.sh's exit statuses for a missing tool and a missing binfmt handler.
MISSING_TOOL_EXIT = 3
MISSING_BINFMT_EXIT = 4


def cache_dir() -> Path:
    """Where build.sh keeps the base rootfs stamps and buildah's storage."""
    default = Path.home() / ".cache" / "archfit-image"
    return Path(os.environ.get("ARCHFIT_IMAGE_CACHE", default))


@dataclass(frozen=True)
class Built:
    """An image build.sh left in buildah's storage."""

    name: str
    arch: str
    log: str
    """build.sh's stderr: what was rebuilt, and how long it took."""


def build(arch: str) -> Built:
    """Run build.sh for `arch` (a no-op when nothing that goes in changed)."""

    def missing(done: subprocess.CompletedProcess[str]) -> str | None:
        if done.returncode not in (MISSING_TOOL_EXIT, MISSING_BINFMT_EXIT):
            return None
        return last_line(done.stderr)

    done = run_build(["bash", BUILD_SCRIPT, arch], BUILD_TIMEOUT_SECONDS, missing)
    return Built(last_line(done.stdout), arch, done.stderr)


class Buildah:
    """buildah on build.sh's storage (vfs driver, outside the clone)."""

    def __init__(self, cache: Path | None = None) -> None:
        root = cache or cache_dir()
        binary = shutil.which("buildah") or "buildah"
        self._base = [binary, "--root", str(root / "storage"), "--runroot", str(root / "run")]
        self._base += ["--storage-driver", "vfs"]

    def run(self, *args: str) -> str:
        """One buildah command; its stdout."""
        done = subprocess.run(
            [*self._base, *args], capture_output=True, text=True, timeout=600, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"buildah {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    def inspect(self, image: str) -> dict[str, Any]:
        """`buildah inspect --type image`: the OCI config, manifest and more."""
        inspected: dict[str, Any] = json.loads(self.run("inspect", "--type", "image", image))
        return inspected

    def size(self, image: str) -> int:
        """Bytes of the image's layers as stored: uncompressed tars, the unpacked size."""
        manifest = json.loads(self.inspect(image)["Manifest"])
        return sum(int(layer["size"]) for layer in manifest["layers"])

    @contextmanager
    def rootfs(self, image: str) -> Iterator[Path]:
        """The image's filesystem, mounted from a throwaway working container."""
        container = self.run("from", "--pull=never", image).strip()
        try:
            yield Path(self.run("mount", container).strip())
        finally:
            self.run("rm", container)
