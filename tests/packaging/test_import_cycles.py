"""No import cycle anywhere in extender/, imports inside functions included: a cycle hidden
by an import inside a function still ties two modules into one (docs/architecture.md,
"Folders")."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "extender"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, is_package: bool, tree: ast.Module, known: set[str]) -> Iterator[str]:
    """The modules of extender/ that `tree` imports, at any depth, relative ones resolved.

    `from package import name` imports the module `package.name` when there is one, else
    the package itself."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names]
            targets = [target if target in known else base for target in targets]
        else:
            continue
        yield from (target for target in targets if target in known)


def import_graph() -> dict[str, set[str]]:
    """Module → the modules of extender/ it imports."""
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(path) for path in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        module = module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        graph[module] = set(imported(module, path.name == "__init__.py", tree, known))
        graph[module].discard(module)
    return graph


def cycle_in(graph: Mapping[str, set[str]]) -> list[str]:
    """One cycle of `graph` as the modules along it, the first repeated at the end; [] when
    there is none."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path = [start]
        on_path = {start}
        pending = [iter(sorted(graph[start]))]
        while pending:
            following = next(pending[-1], None)
            if following is None:
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                pending.pop()
                continue
            if following in on_path:
                return [*path[path.index(following) :], following]
            if following not in done:
                path.append(following)
                on_path.add(following)
                pending.append(iter(sorted(graph[following])))
    return []


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    """The check below can fail: a → b → c → a is found and shown in order."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert ["a", "b", "c", "a"] == cycle_in(graph)


def test_no_module_of_extender_imports_itself_through_others():
    """Every import of extender/ (top of the module, inside functions, under TYPE_CHECKING)
    forms an acyclic graph."""
    cycle = cycle_in(import_graph())
    assert [] == cycle, "import cycle: " + " -> ".join(cycle)
