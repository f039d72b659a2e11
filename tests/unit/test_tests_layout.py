"""The tests are laid out like the code: a unit test sits in the folder of tests/unit/ named like
the extender/ folder it tests, and a stand-in for one of archfit's Protocols lives in
tests/support/fakes.py, never in a test module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "extender"
UNIT = ROOT / "tests" / "unit"

#: Tests at the root of tests/unit/ that read the whole tree rather than one module, and why.
WHOLE_TREE = {
    "test_comments_present_tense.py": "every comment and docstring of extender/",
    "test_library_internals.py": (
        "the third-party behaviours extender/ relies on without a public promise, in any folder"
    ),
    "test_one_name_per_idea.py": "every definition and constant of extender/",
    "test_public_apis.py": "every import and attribute read of third-party packages in extender/",
    "test_repository.py": "every tracked file of the repository",
    "test_tests_layout.py": "every test module and every Protocol of extender/",
}

#: Classes of test modules that match a Protocol on purpose, and why they cannot be fakes.
NOT_FAKES = {
    ("tests/app/test_filter.py", "Broken"): (
        "a resolver bug: it answers strings where Platforms belong, which the type checker "
        "refuses in tests/support/fakes.py"
    ),
    ("tests/packaging/test_wheel.py", "Built"): (
        "the built wheel's metadata lines: its `metadata` field shares a name with the pod "
        "watch's Listed, nothing else"
    ),
}


def folders(top: Path) -> set[Path]:
    """Every folder under `top` holding Python modules, relative to it."""
    return {
        path.parent.relative_to(top)
        for path in top.rglob("*.py")
        if "__pycache__" not in path.parts and path.parent != top
    }


def top_level_modules() -> set[str]:
    return {path.stem for path in PACKAGE.glob("*.py") if path.stem not in {"__init__"}}


def imported_modules(path: Path) -> set[str]:
    """Every extender module `path` imports, `from extender.x import y` as extender.x.y too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "extender" or name.startswith("extender.")}


def test_every_folder_of_the_unit_tests_names_a_folder_of_extender() -> None:
    """tests/unit/core/ for extender/core/, tests/unit/kube/client/ for extender/kube/client/:
    a folder of tests with no folder of code beside it tests nothing there."""
    assert [] == sorted(str(folder) for folder in folders(UNIT) - folders(PACKAGE))


def test_every_unit_test_in_a_folder_imports_the_folder_it_is_named_for() -> None:
    """A test of extender/registry/ sits in tests/unit/registry/ and imports from it; one
    that imports nothing of its folder is in the wrong place."""
    misplaced = []
    for path in sorted(UNIT.rglob("test_*.py")):
        if path.parent == UNIT:
            continue
        folder = "extender." + ".".join(path.parent.relative_to(UNIT).parts)
        if not any(name.startswith(folder) for name in imported_modules(path)):
            misplaced.append(f"{path.relative_to(ROOT)} imports nothing of {folder}")
    assert [] == misplaced


def test_a_unit_test_at_the_root_tests_a_top_level_module_or_the_whole_tree() -> None:
    """The root of tests/unit/ mirrors extender/'s own top-level modules: test_logs_context.py
    tests extender/logs.py. A test of a module inside a folder goes in that folder."""
    modules = top_level_modules()
    stray = [
        path.name
        for path in sorted(UNIT.glob("test_*.py"))
        if path.name not in WHOLE_TREE
        and not any(path.stem == f"test_{m}" or path.stem.startswith(f"test_{m}_") for m in modules)
    ]
    missing = [name for name in WHOLE_TREE if not (UNIT / name).is_file()]
    assert ([], []) == (stray, missing)


def protocols() -> dict[str, frozenset[str]]:
    """Each Protocol of extender (module:name) → the names of its members."""
    found: dict[str, frozenset[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(base).split("[")[0] in {"Protocol", "typing.Protocol"}
                for base in node.bases
            ):
                names = frozenset(members(node))
                if names:
                    found[f"{path.relative_to(PACKAGE)}:{node.name}"] = names
    return found


def members(node: ast.ClassDef) -> Iterator[str]:
    """The names a class body defines: methods, properties and attributes."""
    for statement in node.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            if not statement.name.startswith("__"):
                yield statement.name
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            yield statement.target.id
        elif isinstance(statement, ast.Assign):
            yield from (t.id for t in statement.targets if isinstance(t, ast.Name))


def modules_of_tests() -> Iterator[Path]:
    """Every Python module under tests/ but tests/support/."""
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "support" not in path.relative_to(ROOT / "tests").parts:
            yield path


def test_no_test_module_defines_a_stand_in_for_one_of_archfits_protocols() -> None:
    """A class that defines every member of a Protocol stands in for it: it lives in
    tests/support/fakes.py, subclassing the Protocol so mypy checks it, and every test that
    needs one shares it."""
    shapes = protocols()
    stand_ins = []
    for path in modules_of_tests():
        name = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or (name, node.name) in NOT_FAKES:
                continue
            defined = set(members(node))
            stand_ins += [
                f"{name}:{node.name} stands in for {protocol}"
                for protocol, needed in shapes.items()
                if needed <= defined
            ]
    assert [] == stand_ins
