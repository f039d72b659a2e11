"""server.eventLoop: uvloop when installed (it is, in CI and the image), asyncio on request."""

import asyncio
import importlib.util
import sys

import pytest

from extender.config.settings import ServerSettings
from extender.event_loop import EventLoopUnavailable, loop_factory


@pytest.mark.parametrize(("choice", "expected"), [("auto", "uvloop"), ("uvloop", "uvloop")])
def test_auto_and_uvloop_run_on_uvloop_when_it_is_installed(choice, expected):
    name, factory = loop_factory(choice)
    loop = factory()
    try:
        assert (expected, "uvloop") == (name, type(loop).__module__.split(".")[0])
    finally:
        loop.close()


def test_the_default_runs_on_uvloop_where_it_is_installed():
    """server.eventLoop's default is auto: uvloop, a dependency on Linux, is taken."""
    assert "uvloop" == loop_factory(ServerSettings().event_loop)[0]


def test_without_uvloop_the_default_runs_on_asyncios_loop(monkeypatch):
    """Elsewhere than Linux uvloop may be missing: the default still starts."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        "importlib.util.find_spec",
        lambda name, *rest: None if name == "uvloop" else find_spec(name, *rest),
    )
    assert "asyncio" == loop_factory(ServerSettings().event_loop)[0]


def test_asyncio_runs_on_asyncios_own_loop():
    name, factory = loop_factory("asyncio")
    loop = factory()
    try:
        assert ("asyncio", True) == (name, isinstance(loop, asyncio.BaseEventLoop))
    finally:
        loop.close()


def test_asking_for_uvloop_without_it_is_a_config_error_naming_the_key(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    with pytest.raises(EventLoopUnavailable, match=r"server\.eventLoop: uvloop is not installed"):
        loop_factory("uvloop")


def test_the_missing_uvloop_error_names_the_extra_that_installs_it(monkeypatch):
    """`archfit[uvloop]` pins the version archfit is tested with; bare `uvloop` does not."""
    monkeypatch.setitem(sys.modules, "uvloop", None)
    with pytest.raises(EventLoopUnavailable, match=r"pip install 'archfit\[uvloop\]'"):
        loop_factory("uvloop")
