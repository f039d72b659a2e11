"""References from one file of the tree to another stay true: every relative Markdown link
names a file that exists (and a heading it has, after `#`), and every `docs/X.md, "Section"`
(or `deploy/README.md, "Section"`) written in code, comments, manifests or docs names a heading
that exists, so a renamed section cannot leave readers at a dead end."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```.*?^```$", re.DOTALL | re.MULTILINE)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_SECTION = re.compile(r"((?:docs/|deploy/)?[\w-]+\.md), \"([^\"]{3,100})\"")
_README_SECTION = re.compile(r"\bREADME(?:'s)? \"([^\"]{3,100})\"")
"""The top-level README's sections, as prose names them: `the README's "Quick start"`."""
_CONTINUATION = re.compile(r"\s*\n\s*(?:#|//|\*|-)?\s*")
"""A line break inside a comment, with the next line's comment marker."""


def _tracked(*patterns: str) -> list[Path]:
    done = subprocess.run(
        ["git", "ls-files", "--", *patterns],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [ROOT / line for line in done.stdout.splitlines() if (ROOT / line).is_file()]


def headings(markdown: Path) -> list[str]:
    """The headings of `markdown`, outside code blocks, as written."""
    text = _FENCE.sub("", markdown.read_text())
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)]


def anchors(markdown: Path) -> set[str]:
    """The anchors GitHub gives the headings of `markdown`: lowercased, punctuation dropped,
    spaces as hyphens, a repeated one numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in headings(markdown):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _links() -> Iterator[tuple[str, str]]:
    for markdown in _tracked("*.md"):
        text = _FENCE.sub("", markdown.read_text())
        for target in _LINK.findall(text):
            if not re.match(r"[a-z]+:", target):  # not http(s):, mailto:
                yield str(markdown.relative_to(ROOT)), target


def _broken(source: str, target: str) -> str:
    """Why the link `target` in `source` leads nowhere, or ""."""
    path, _, anchor = target.partition("#")
    file = (ROOT / source).parent / path if path else ROOT / source
    if not file.resolve().is_relative_to(ROOT) or not file.exists():
        return "no such file"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return "no such heading"
    return ""


def test_every_relative_link_in_the_markdown_leads_to_a_file_and_heading_that_exist() -> None:
    """From a clone, a fork or an offline mirror alike."""
    broken = [
        f"{source}: {target}: {why}"
        for source, target in _links()
        if (why := _broken(source, target))
    ]
    assert [] == broken


def _referenced(path: str, where: Path) -> Path:
    """The file a `X.md, "Section"` reference in `where` means: a path from the root, or a
    name beside `where` or in docs/."""
    if "/" in path:
        return ROOT / path
    beside = where.parent / path
    return beside if beside.exists() else ROOT / "docs" / path


def _names(heading: str, section: str) -> bool:
    """A reference names a heading by its whole text, or by the part before its `:` or `(`."""
    return heading == section or bool(re.match(re.escape(section) + r"(:| \(| —|,)", heading))


def section_references() -> Iterator[tuple[str, Path, str]]:
    """(where, the file referenced, the section) for every reference in a tracked text file."""
    skipped = (".lock", ".png", ".json", ".pem")
    for where in _tracked():
        # This module quotes wrong references on purpose, as examples.
        if where.suffix in skipped or "fixtures" in where.parts or where == Path(__file__):
            continue
        try:
            text = where.read_text()
        except UnicodeDecodeError:
            continue
        text = _CONTINUATION.sub(" ", text)
        for path, section in _SECTION.findall(text):
            yield str(where.relative_to(ROOT)), _referenced(path, where), section
        for section in _README_SECTION.findall(text):
            yield str(where.relative_to(ROOT)), ROOT / "README.md", section


def test_every_section_reference_names_a_heading_that_exists() -> None:
    """`docs/operations.md, "Platform mismatches"` in a manifest's comment must be a heading of
    that file, as `deploy/README.md, "Which layout"` is."""
    wrong = [
        f'{where}: {file.relative_to(ROOT)}, "{section}"'
        for where, file, section in section_references()
        if not file.exists() or not any(_names(h, section) for h in headings(file))
    ]
    assert [] == wrong


@pytest.mark.parametrize(
    ("heading", "section", "named"),
    [
        ("Learned evidence: what a tenant can and cannot", "Learned evidence", True),
        ("Held pods (a slow or failing registry)", "Held pods", True),
        ("Which layout", "Which layout", True),
        ("Which layout", "Layouts", False),
        ("Pods it leaves alone", "DaemonSets", False),
    ],
)  # fmt: skip
def test_a_reference_names_a_heading_by_its_text_or_the_part_before_a_colon(
    heading: str, section: str, named: bool
) -> None:
    """What counts as naming a heading: the whole of it, or its lead before `:` or `(`."""
    assert named == _names(heading, section)
