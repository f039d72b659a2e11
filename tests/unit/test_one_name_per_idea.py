"""One name per idea, one place per constant: the source of extender/ read as a tree, so a
second ARCH_LABEL, MAX_SCORE, cut-short helper or pod-mapping reader fails here."""

from __future__ import annotations

import ast
import copy
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from extender.core.text import error_text

PACKAGE = Path(__file__).resolve().parents[2] / "extender"

#: Public names more than one module defines on purpose, each with why.
SHARED_ON_PURPOSE = {
    "log": "each module's own structlog logger",
    "T": "a TypeVar of each generic module",
    "parse": "quantities, platforms and references each parse their own text (module-qualified)",
    # The single-cluster and the fleet renderer offer one interface (audit/output picks one).
    "as_csv": "audit/render and audit/render_fleet",
    "as_markdown": "audit/render and audit/render_fleet",
    "headline": "audit/render and audit/render_fleet",
    "table_parts": "audit/render and audit/render_fleet",
    "write_table": "audit/render and audit/render_fleet",
}

#: Constant values two modules write on purpose, each for an idea of its own, with why.
SAME_VALUE_ON_PURPOSE = {
    "unknown": "audit/report's verdict, and the os or architecture OCI writes on an entry that "
    "is no platform (registry/manifests)",
}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE.parent)), ast.parse(path.read_text(), str(path))


def top_level(tree: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    """Each name a module defines at its top level, with the statement that defines it.

    An alias of another name (`table = _table`) defines nothing new and is left out."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name, node
        elif isinstance(node, ast.Assign | ast.AnnAssign) and not is_alias(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                parts = target.elts if isinstance(target, ast.Tuple) else [target]
                for part in parts:
                    if isinstance(part, ast.Name):
                        yield part.id, node


def is_alias(value: ast.expr | None) -> bool:
    parts = value.elts if isinstance(value, ast.Tuple) else [value]
    return all(isinstance(part, ast.Name) for part in parts)


def shape(node: ast.stmt) -> str:
    """The statement with its names, argument names and docstring left out: two helpers
    that differ only in what they call things have one shape."""
    node = copy.deepcopy(node)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        node.name = ""
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            node.body = node.body[1:] or [ast.Pass()]
    for part in ast.walk(node):
        if isinstance(part, ast.Name):
            part.id = ""
        elif isinstance(part, ast.arg):
            part.arg = ""
    return ast.dump(node, annotate_fields=False)


def constants(tree: ast.Module) -> Iterator[tuple[str, object]]:
    """Each upper-case name a module sets at its top level to a literal string or tuple, with
    its value (`A, B = "a", "b"` sets two)."""
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            pairs = [(target, node.value)]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(target.elts, node.value.elts, strict=True))
            for name, value in pairs:
                literal = literal_of(value)
                upper = isinstance(name, ast.Name) and name.id.lstrip("_").isupper()
                if upper and (isinstance(literal, str) or is_flat_tuple(literal)):
                    yield name.id, literal


def is_flat_tuple(value: object) -> bool:
    return isinstance(value, tuple) and all(isinstance(item, str | int | float) for item in value)


def literal_of(value: ast.expr) -> object:
    """The value of a literal expression, or None when it is not one."""
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError):
        return None


def test_no_public_name_is_defined_in_two_modules():
    """A public constant, function or class of extender/ is defined in one module only."""
    where: defaultdict[str, set[str]] = defaultdict(set)
    for module, tree in modules():
        for name, _ in top_level(tree):
            if not name.startswith("_") and name not in SHARED_ON_PURPOSE:
                where[name].add(module)
    assert {} == {name: sorted(found) for name, found in where.items() if len(found) > 1}


def test_no_string_or_tuple_constant_is_written_twice():
    """A module-level string constant (a label, a key, a domain) or tuple of them (the two
    architectures a split or a report knows) is written once, whatever each module calls it."""
    where: defaultdict[object, set[str]] = defaultdict(set)
    for module, tree in modules():
        for name, value in constants(tree):
            where[value].add(f"{module}:{name}")
    twice = {value: sorted(found) for value, found in where.items() if len(found) > 1}
    assert {} == {
        value: found for value, found in twice.items() if value not in SAME_VALUE_ON_PURPOSE
    }


def test_the_command_line_reads_its_number_defaults_from_the_modules_that_own_them():
    """A flag's number default is a module constant's name (`newer_tags.LIMIT`), never a
    literal that would repeat it."""
    literals = []
    for module, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("add_argument"):
                for keyword in node.keywords:
                    value = literal_of(keyword.value)
                    if keyword.arg == "default" and isinstance(value, int | float):
                        literals.append(f"{module}:{node.lineno}: default={value!r}")
    assert [] == literals


def test_no_private_constant_or_helper_is_copied_into_another_module():
    """A private constant of the same name and value, or a private helper of the same name
    and shape, in two modules is one idea written twice: share it."""
    where: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    for module, tree in modules():
        for name, node in top_level(tree):
            private = name.startswith("_") and not name.startswith("__")
            helper = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if private and (helper or name.isupper()):
                where[name, shape(node)].add(module)
    assert {} == {name: sorted(found) for (name, _), found in where.items() if len(found) > 1}


def test_text_is_cut_short_only_by_the_one_helper_in_text_py():
    """`text[:n - 3] + "..."` is written only in extender/core/text.py (`cut`); everything else
    that cuts text short calls it."""
    cuts = []
    for module, tree in modules():
        if module == "extender/core/text.py":
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Add)
                and isinstance(node.left, ast.Subscript)
                and isinstance(node.left.slice, ast.Slice)
                and isinstance(node.right, ast.Constant)
                and node.right.value in ("...", "…")
            ):
                cuts.append(f"{module}:{node.lineno}")
    assert [] == cuts


def test_no_error_text_is_cut_by_slicing():
    """An error's text (`str(error)`, an f-string naming `error`, archfit's one name for a
    caught exception) is cut by core/text.py's `error_text` or `cut` at a named width, never
    by `[:n]`, which cuts mid-word with no sign that anything is missing."""
    slices = []
    for module, tree in modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Slice)
                and node.slice.lower is None
                and isinstance(node.slice.upper, ast.Constant)
                and (
                    isinstance(node.value, ast.JoinedStr)
                    or (isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "str")
                )
                and any(
                    isinstance(part, ast.Name) and part.id == "error"
                    for part in ast.walk(node.value)
                )
            ):
                slices.append(f"{module}:{node.lineno}")
    assert [] == slices


def test_an_error_text_longer_than_its_width_ends_in_an_ellipsis():
    """`error_text` keeps a short message whole and cuts a long one to the width, marked."""
    long = ValueError("x" * 400)
    assert ("short", 300, "...") == (
        error_text(ValueError("short")),
        len(error_text(long)),
        error_text(long)[-3:],
    )


def test_request_log_fields_are_bound_in_one_place() -> None:
    """A request's log fields are bound with extender.logs (bind_request, bind), whose one
    context variable every line merges; structlog.contextvars is not merged, so a field
    bound there would vanish from every line without an error."""
    bound_elsewhere = [
        f"{name}:{node.lineno}"
        for name, tree in modules()
        for node in ast.walk(tree)
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "contextvars"
            and isinstance(node.value, ast.Name)
            and node.value.id == "structlog"
        )
        or (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("structlog.contextvars")
        )
    ]
    assert [] == bound_elsewhere


#: Words a module or folder of extender/ is no longer named with, each with the one word that
#: names its idea now.
RETIRED_WORDS = {
    "lookup": "resolve: an image's platforms learned (extender/resolution/)",
    "lookups": "resolve: an image's platforms learned (extender/resolution/)",
    "looker": "resolve: an image's platforms learned (extender/resolution/)",
    "access": "connect: the API client built from the settings (extender/kube/connect.py)",
}


def test_no_module_or_folder_is_named_with_a_retired_word():
    """Resolving an image's platforms has one word, so its modules are found under it."""
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for part in path.relative_to(PACKAGE).with_suffix("").parts:
            named += [
                f"{path.relative_to(PACKAGE)}: {word} ({RETIRED_WORDS[word]})"
                for word in part.split("_")
                if word in RETIRED_WORDS
            ]
    assert [] == named


def test_a_class_called_a_resolver_resolves_an_image():
    """A `*Resolver` answers an image's platforms (`platforms(image, ...)` or
    `resolve(image, ...)`); what turns a host name into addresses is named for DNS."""
    others = []
    for module, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Resolver"):
                methods = [
                    item
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    and item.name in ("platforms", "resolve")
                ]
                if not any(m.args.args[1:2] and m.args.args[1].arg == "image" for m in methods):
                    others.append(f"{module}: {node.name}")
    assert [] == others
