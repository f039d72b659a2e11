"""Comments and docstrings in extender/ say why the code is so in present terms: none cites an
issue or pull request by number (that history belongs in commit messages, docs/architecture.md
says so)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "extender"

#: "issue 32", "Issues #7 and", "PR 12", "#1918", "go-containerregistry#1918".
CITATION = re.compile(r"\b(?:issues?|pull requests?|PRs?)\s*#?\d+|[\w./-]*#\d+\b", re.IGNORECASE)


def prose(source: str) -> Iterator[tuple[int, str]]:
    """Each comment and each docstring of `source` (string statements: attribute docstrings too),
    with its first line number."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.lineno, node.value.value


def citations(source: str) -> list[tuple[int, str]]:
    return [(line, cited[0]) for line, text in prose(source) for cited in CITATION.finditer(text)]


def test_no_comment_or_docstring_in_extender_cites_an_issue_number() -> None:
    """A comment or docstring of extender/ that cites an issue by number is named here."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {cited}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, cited in citations(path.read_text())
    ]
    assert [] == found


def test_the_check_finds_citations_in_comments_and_docstrings_but_not_in_code() -> None:
    """The reader sees comments, module and attribute docstrings, not strings in code."""
    source = '''"""A module (issue 32)."""
x = 1  # see #41
colour = "#555"
y = 2
"""What y is; go-containerregistry#1918 writes such configs."""
'''
    assert [(2, "#41"), (1, "issue 32"), (5, "go-containerregistry#1918")] == citations(source)
