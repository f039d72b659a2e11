"""The lock files agree with pyproject.toml and with each other, read without a network.

requirements.lock is what the image installs; requirements-test.lock is what CI's venv
installs; requirements-min.lock is the minimum-versions venv of tests/run.sh. All come
from tests/lock.sh; these tests catch an edit to pyproject.toml
that was not followed by a refresh.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.render import REPO

IMAGE_LOCK = REPO / "requirements.lock"
TEST_LOCK = REPO / "requirements-test.lock"
MIN_LOCK = REPO / "requirements-min.lock"
_PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _entries(lock: Path) -> list[str]:
    """Each requirement of a lock with its continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", lock.read_text())
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _pins(lock: Path) -> dict[str, str]:
    """Package name → pinned version."""
    pins: dict[str, str] = {}
    for entry in _entries(lock):
        requirement = Requirement(entry.split(" --hash")[0])
        (spec,) = requirement.specifier
        assert "==" == spec.operator, entry
        pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def _unsatisfied(requirements: list[str], pins: dict[str, str]) -> list[str]:
    missing = []
    for line in requirements:
        requirement = Requirement(line)
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is None or not requirement.specifier.contains(pinned, prereleases=True):
            missing.append(f"{line} (locked: {pinned})")
    return missing


def test_the_image_lock_pins_every_runtime_and_redis_dependency_at_an_allowed_version() -> None:
    """pyproject's dependencies and the redis extra each have a pin in requirements.lock."""
    wanted = [*_PROJECT["dependencies"], *_PROJECT["optional-dependencies"]["redis"]]
    assert [] == _unsatisfied(wanted, _pins(IMAGE_LOCK))


def test_the_test_lock_pins_every_test_lint_and_bench_dependency_at_an_allowed_version() -> None:
    """The test, lint and bench extras have a matching pin in requirements-test.lock."""
    extras = _PROJECT["optional-dependencies"]
    wanted = [*extras["test"], *extras["lint"], *extras["bench"]]
    assert [] == _unsatisfied(wanted, _pins(TEST_LOCK))


def test_the_minimum_lock_pins_every_runtime_dependency_at_its_declared_floor() -> None:
    """requirements-min.lock holds each `name>=floor` of the runtime and redis dependencies at
    exactly that floor, so the minimum-versions job tests what pyproject.toml promises."""
    wanted = [*_PROJECT["dependencies"], *_PROJECT["optional-dependencies"]["redis"]]
    pins = _pins(MIN_LOCK)
    floors = {}
    for line in wanted:
        requirement = Requirement(line)
        (spec,) = [s for s in requirement.specifier if s.operator == ">="]
        floors[canonicalize_name(requirement.name)] = Version(spec.version)
    assert floors == {name: Version(pins.get(name, "0")) for name in floors}


def test_the_minimum_lock_pins_every_test_dependency_at_an_allowed_version() -> None:
    """The test extra, which the minimum-versions venv runs, is satisfied there too."""
    wanted = [*_PROJECT["dependencies"], *_PROJECT["optional-dependencies"]["test"]]
    assert [] == _unsatisfied(wanted, _pins(MIN_LOCK))


def test_ci_installs_exactly_the_versions_the_image_ships() -> None:
    """Every package of requirements.lock is pinned to the same version in the test lock."""
    image, test = _pins(IMAGE_LOCK), _pins(TEST_LOCK)
    assert image == {name: test.get(name, "missing") for name in image}


def test_every_locked_package_carries_at_least_one_hash() -> None:
    """pip --require-hashes would refuse an entry without one; say which, before a build."""
    locks = (IMAGE_LOCK, TEST_LOCK, MIN_LOCK)
    unhashed = [e for lock in locks for e in _entries(lock) if "--hash=" not in e]
    assert [] == unhashed
