"""What a suite does when a real part it needs cannot be had on this machine.

CI must never pass by skipping the real thing, so under CI=true a missing prerequisite
fails; on a developer machine it skips with a message nobody can miss.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI, where missing prerequisites must fail rather than skip."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def unavailable(suite: str, reason: object) -> NoReturn:
    """Fail under CI=true, else skip loudly: the `suite` tests cannot run, for `reason`."""
    if in_ci():
        pytest.fail(f"CI=true and {suite} prerequisites are missing: {reason}")
    pytest.skip(f"!!! {suite} SKIPPED, NOT TESTED: {reason}")
