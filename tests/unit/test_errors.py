"""archfit's exceptions form one tree (extender/errors.py)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import extender
from extender.errors import ArchfitError


def _exceptions_of_extender() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in pkgutil.walk_packages(extender.__path__, "extender."):
        if module.name == "extender.__main__":
            continue
        loaded = importlib.import_module(module.name)
        for name, value in vars(loaded).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.name
            ):
                found[f"{module.name}.{name}"] = value
    return found


def test_every_exception_archfit_defines_hangs_under_archfit_error() -> None:
    """A new exception class joins a family of the tree, so the roots catch it."""
    found = _exceptions_of_extender()
    strays = sorted(name for name, error in found.items() if not issubclass(error, ArchfitError))
    assert [] == strays


def test_the_extender_and_the_webhook_raise_one_wire_error() -> None:
    """scheduler_api and admission_api name the same class, so one handler catches both."""
    from extender.wire import admission_api, scheduler_api

    assert scheduler_api.WireError is admission_api.WireError
