"""Public APIs only: no module of extender/ imports or reads a private (`_`-prefixed) name of
a third-party package, read from the source as a tree, so an upgrade cannot break it quietly."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "extender"

#: Private names of third-party packages extender/ may use, each with why and where its version
#: test and its line in docs/architecture.md are. None today: each use became a public one.
ALLOWED: dict[str, str] = {}


@dataclass(frozen=True)
class Use:
    """One use of a private name: where, and what."""

    where: str
    name: str

    def __str__(self) -> str:
        return f"{self.where}: {self.name}"


def is_private(name: str) -> bool:
    """`_x` and `__x`, not dunders (`__version__`, `__init__` are public by convention)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_third_party(module: str) -> bool:
    top = module.split(".", 1)[0]
    return bool(top) and top != "extender" and top not in sys.stdlib_module_names


def own_private_names(trees: dict[str, ast.Module]) -> set[str]:
    """Private names extender/ defines itself: functions, classes, assigned attributes and
    variables. A `getattr(obj, "_x")` of one of these reads archfit's own, not a library's."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Assign) and "__slots__" in map(ast.unparse, node.targets):
                names.update(
                    slot.value
                    for slot in ast.walk(node.value)
                    if isinstance(slot, ast.Constant) and isinstance(slot.value, str)
                )
    return {name for name in names if is_private(name)}


def third_party_bindings(tree: ast.Module) -> dict[str, str]:
    """Names a module binds to third-party imports (at any depth): name -> what it imports."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_third_party(alias.name):
                    bound[alias.asname or alias.name.split(".", 1)[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names if is_third_party(node.module) else ():
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def third_party_bases(tree: ast.Module, bound: dict[str, str]) -> dict[str, list[type]]:
    """Classes whose bases are third-party (`web.BaseSite`), by name, with those bases."""
    found: dict[str, list[type]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            dotted = ast.unparse(base).split(".")
            if dotted[0] in bound:
                module, _, name = bound[dotted[0]].rpartition(".")
                owner = importlib.import_module(module) if module else None
                value = getattr(owner, name) if owner else importlib.import_module(name)
                for part in dotted[1:]:
                    value = getattr(value, part)
                found.setdefault(node.name, []).append(value)
    return found


def private_uses(where: str, tree: ast.Module, own: set[str]) -> Iterator[Use]:
    bound = third_party_bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_third_party(alias.name) and any(map(is_private, alias.name.split("."))):
                    yield Use(where, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if is_third_party(node.module):
                parts = [*node.module.split("."), *(alias.name for alias in node.names)]
                if any(map(is_private, parts)):
                    names = ", ".join(alias.name for alias in node.names)
                    yield Use(where, f"from {node.module} import {names}")
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            # `aiohttp.connector._SSL_CONTEXT_VERIFIED`, `web._run_app`
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                yield Use(where, ast.unparse(node))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr", "delattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and is_private(node.args[1].value)
            and node.args[1].value not in own
        ):
            # A private attribute archfit never defines is some library's.
            yield Use(where, ast.unparse(node))
    yield from inherited_private_uses(where, tree, bound)


def inherited_private_uses(where: str, tree: ast.Module, bound: dict[str, str]) -> Iterator[Use]:
    """`self._x` in a subclass of a third-party class, where `_x` is that class's."""
    bases = third_party_bases(tree, bound)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or node.name not in bases:
            continue
        for inner in ast.walk(node):
            if (
                isinstance(inner, ast.Attribute)
                and isinstance(inner.value, ast.Name)
                and inner.value.id == "self"
                and is_private(inner.attr)
                and any(hasattr(base, inner.attr) for base in bases[node.name])
            ):
                yield Use(where, f"{node.name}: {ast.unparse(inner)}")


def parsed() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE.parent)): ast.parse(path.read_text(), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_module_of_extender_uses_a_private_name_of_a_third_party_package():
    """Every private name of a third-party package that extender/ imports, reads by attribute
    on a third-party import, asks getattr for, or inherits and reads is listed in ALLOWED."""
    trees = parsed()
    own = own_private_names(trees)
    uses = sorted(
        {str(use) for where, tree in trees.items() for use in private_uses(where, tree, own)}
    )
    assert [] == [use for use in uses if use.split(": ")[-1] not in ALLOWED], "\n".join(uses)


SAMPLE = """
import aiohttp
import aiohttp._private_module
from aiohttp import web, _helper
from aiohttp.web_protocol import RequestHandler
from asyncio import sslproto

class Site(web.BaseSite):
    def name(self):
        return self._runner, self._mine

def read(handler, connection):
    aiohttp.connector._SSL_CONTEXT_VERIFIED
    getattr(handler, "_request_in_progress", True)
    getattr(connection, "_archfits_own", None)
    sslproto._private_in_the_standard_library
    return aiohttp.__version__
"""


def test_the_walk_finds_each_kind_of_private_use_and_nothing_public():
    """The walk's table: a private module, a private import, a private attribute of an import,
    a getattr of a name archfit does not define, an inherited private attribute; not the
    standard library's, not a dunder, not archfit's own."""
    tree = ast.parse(SAMPLE)
    uses = [use.name for use in private_uses("sample.py", tree, own={"_archfits_own"})]
    assert [
        "import aiohttp._private_module",
        "from aiohttp import web, _helper",
        "aiohttp.connector._SSL_CONTEXT_VERIFIED",
        "getattr(handler, '_request_in_progress', True)",
        "Site: self._runner",
    ] == uses
