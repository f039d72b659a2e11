"""A real headless browser (Debian's chromium) that loads a local page and says what it saw.

`load(path)` returns the DOM after rendering and every console message (errors, CSP
violations, blocked loads), which chromium writes to stderr as `...:CONSOLE:...` lines.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.prerequisites import require_binary

CHROMIUM = "/usr/bin/chromium"
_CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)")
_TIMEOUT = 90.0
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
          "--disable-extensions", "--enable-logging=stderr", "--v=0")  # fmt: skip


@dataclass(frozen=True)
class Loaded:
    """What the browser rendered."""

    dom: str
    console: list[str]
    """Console messages: none for a clean page."""


def _run(page: Path, *flags: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    binary = require_binary(CHROMIUM, "chromium", "HEADLESS BROWSER")
    profile = workdir / "chromium-profile"
    return subprocess.run(
        [binary, *_FLAGS, f"--user-data-dir={profile}", *flags, page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        check=True,
        cwd=workdir,
    )


def load(page: Path, workdir: Path) -> Loaded:
    """Render `page` and return its DOM and console messages."""
    done = _run(page, "--dump-dom", workdir=workdir)
    return Loaded(done.stdout, _CONSOLE.findall(done.stderr))


def screenshot(page: Path, target: Path, workdir: Path, size: tuple[int, int]) -> Path:
    """Render `page` into a PNG of `size` (width, height) pixels at `target`."""
    width, height = size
    _run(page, f"--screenshot={target.resolve()}", f"--window-size={width},{height}",
         "--hide-scrollbars", workdir=workdir)  # fmt: skip
    return target
