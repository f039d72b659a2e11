"""Printing tables the same way everywhere: fitted to a terminal's width, plain text elsewhere.

On a terminal a table is laid out for the terminal's width (`fit`). What a column may give up
depends on what it holds: an image reference, a verdict, a digest or a number is never cut or
broken; text (a reason, a hint, a list) wraps at its spaces and then breaks a word too long
for it at a `/`, `:` or `=` (nothing of it is lost); a name is cut with an ellipsis, last,
and never below its shortest width. Before a name is cut, the columns that matter least are
left out (and named). When even that does not fit, each row is printed as a block of lines.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

# A pipe or a file gets lines as long as the rows need (no folding mid-name) and no
# trailing padding, so scripts and diffs see stable text.
_FILE_WIDTH = 400
GAP = 2
"""Spaces between two columns."""
_INDENT = 2
"""Of a block's fields under its first cell (the row's name)."""

Layout = Callable[[int], Iterable[RenderableType]]
"""What to print for a console of the given width."""


@dataclass(frozen=True, slots=True)
class Column:
    """How a column may give up width on a narrow terminal."""

    header: str
    shortest: int | None = None
    """The narrowest the column may become; None: never narrower than its widest cell, so
    nothing in it is ever cut or broken (an image reference, a verdict, a digest, a number)."""
    wrap: bool = False
    """Text: it wraps at spaces, and a word wider than the column breaks after a `/`, `:`,
    `=`, `,`, `.` or `-` (or, with none, at the column's edge), never cut. Otherwise a name:
    it stays on one line and is cut with an ellipsis down to `shortest`."""
    leave_out: int = 0
    """The order in which the column is left out when the table does not fit (1 first);
    0: always shown."""


@dataclass(frozen=True, slots=True)
class Fit:
    """A table's layout for one width: the columns shown, their widths, those left out."""

    shown: tuple[int, ...]
    widths: tuple[int, ...]
    left_out: tuple[str, ...]


def fit(
    columns: Sequence[Column],
    natural: Sequence[int],
    width: int,
    firm: Sequence[int] | None = None,
    whole: Sequence[int] | None = None,
) -> Fit | None:
    """The layout of columns whose widest lines are `natural` on `width` columns, or None
    when even the narrowest table would not fit (then rows are printed as blocks).

    `firm` is what each column needs for nothing in it to be cut or broken: its widest word
    for a text column, its widest cell for the others (headers wrap at their spaces). Width is
    given up in this order: text wraps at spaces down to its shortest width, but not below
    its widest word; then text breaks its long words down to its shortest width (nothing is
    lost), but never one of `whole`'s, each text column's widest word that must stay whole (a
    setting to paste); then columns are left out, in their order; then names are cut to their
    shortest. Each time the widest column gives first."""
    firm = natural if firm is None else firm
    whole = [0] * len(columns) if whole is None else whole
    shown = list(range(len(columns)))
    droppable = sorted((c.leave_out, i) for i, c in enumerate(columns) if c.leave_out)

    def floors(break_words: bool, cut_names: bool) -> list[int]:
        found = []
        for i in shown:
            column, lowest = columns[i], natural[i]
            if column.shortest is not None:
                lowest = min(natural[i], column.shortest)
            if column.wrap:
                found.append(max(lowest, whole[i] if break_words else firm[i]))
            else:
                found.append(lowest if cut_names and column.shortest is not None else firm[i])
        return found

    def shrunk(break_words: bool, cut_names: bool) -> list[int] | None:
        return _shrink([natural[i] for i in shown], floors(break_words, cut_names), width)

    widths = shrunk(False, False) or shrunk(True, False)
    while widths is None and droppable:
        shown.remove(droppable.pop(0)[1])
        widths = shrunk(True, False)
    widths = widths or shrunk(True, True)
    if widths is None:
        return None
    left_out = tuple(c.header for i, c in enumerate(columns) if i not in shown)
    return Fit(tuple(shown), tuple(widths), left_out)


def _shrink(widths: list[int], floors: Sequence[int], width: int) -> list[int] | None:
    """`widths` narrowed, the widest first, to fit `width` with GAPs, none below its floor;
    None if they cannot."""
    excess = sum(widths) + GAP * (len(widths) - 1) - width
    while excess > 0:
        giving = [k for k in range(len(widths)) if widths[k] > floors[k]]
        if not giving:
            return None
        widest = max(giving, key=lambda k: widths[k])
        widths[widest] -= 1
        excess -= 1
    return widths


def _widths(
    columns: Sequence[Column], rows: Iterable[Sequence[Text]]
) -> tuple[list[int], list[int], list[int]]:
    """Each column's width with nothing wrapped (its widest line, the header's too); what it
    needs for nothing to be cut or broken (`fit`'s firm): the widest word of a text column,
    the widest cell line of the others, and no less than the header's widest word; and what
    a text column needs for the words it must never break (`fit`'s whole)."""
    natural = [_cells(c.header) for c in columns]
    firm = [max(map(_cells, c.header.split())) for c in columns]
    whole = [0] * len(columns)
    for row in rows:
        for index, cell in enumerate(row):
            lines = cell.plain.split("\n")
            natural[index] = max(natural[index], *map(_cells, lines))
            if not columns[index].wrap:
                firm[index] = max(firm[index], *map(_cells, lines))
                continue
            for word in " ".join(lines).split():
                firm[index] = max(firm[index], _cells(word))
                if _WHOLE.match(word):
                    whole[index] = max(whole[index], _cells(word))
    return natural, firm, whole


_WHOLE = re.compile(r"\W*[A-Z][A-Z0-9_]*=")
"""A word text never breaks: a setting to paste (`ARCHFIT_REGISTRY__ALLOWED_NETWORKS=...`)."""


def _cells(line: str) -> int:
    return Text(line).cell_len


def fitted(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Text]],
    width: int,
    *,
    title: str | None = None,
    rule: bool = True,
    chunk: int = 1000,
) -> Iterator[RenderableType]:
    """The table fitted to `width`: in chunks of rows that share the column widths, then a
    line naming the columns left out; or, when no table fits, one block of lines a row.
    `rule` draws a line under the header."""
    natural, firm, whole = _widths(columns, rows)
    # One column of slack: rich 13.1 (the declared floor) lays out a table of exactly the
    # terminal's width one cell narrower than rich 15 does, cutting a column the layout
    # gave its full width (the minimum-versions job shows it).
    layout = fit(columns, natural, width - 1, firm, whole)
    if layout is None:
        yield from _blocks(columns, rows, width, title)
        return
    for start in range(0, max(len(rows), 1), chunk):
        first = start == 0
        table = Table(
            title=title if first else None,
            title_justify="left",
            box=box.SIMPLE_HEAD if rule else None,
            show_edge=False,
            show_header=first,
            highlight=False,
            # A box draws a space between columns: with the padding, GAP spaces.
            padding=(0, GAP - 1 if rule else GAP, 0, 0),
            pad_edge=False,
        )
        for index, column_width in zip(layout.shown, layout.widths, strict=True):
            column = columns[index]
            table.add_column(
                Text(column.header, no_wrap=False),  # a header wraps at its spaces
                width=column_width,
                no_wrap=True,  # text comes wrapped (`wrapped`); a name is cut, never folded
                overflow="ellipsis" if column.shortest is not None else "fold",
            )
        for row in rows[start : start + chunk]:
            table.add_row(
                *(
                    wrapped(row[index], width) if columns[index].wrap else row[index]
                    for index, width in zip(layout.shown, layout.widths, strict=True)
                )
            )
        yield table
    if layout.left_out:
        yield Text(
            f"Left out at {width} columns: {', '.join(layout.left_out)}"
            " (a wider terminal, or -o csv or json, shows them)."
        )


def _blocks(
    columns: Sequence[Column], rows: Sequence[Sequence[Text]], width: int, title: str | None
) -> Iterator[RenderableType]:
    """Each row as its first cell on a line, then one line per other field. A value that
    would not fit beside its label, and may not be cut or broken, goes on a line of its own
    (which the terminal folds if it must)."""
    if title:
        yield Text(title)
    label_width = max((_cells(c.header) for c in columns[1:]), default=0)
    room = max(width - _INDENT - label_width - GAP, 1)
    for row in rows:
        name = row[0].copy()
        if columns[0].shortest is not None:
            name.no_wrap, name.overflow = True, "ellipsis"  # a name: one line, cut if it must
        yield name
        yield Text("\n").join(_fields(columns, row, label_width, room))


def _fields(
    columns: Sequence[Column],
    row: Sequence[Text],
    label_width: int,
    room: int,
) -> Iterator[Text]:
    indent = " " * _INDENT
    for column, cell in zip(columns[1:], row[1:], strict=True):
        if column.shortest is None and cell.cell_len > room:
            yield Text(indent + column.header)
            yield Text(indent).append_text(cell)
            continue
        label = indent + column.header.ljust(label_width + GAP)
        if column.wrap:
            lines = list(wrapped(cell, room).split("\n"))
        else:
            lines = [cell.copy()]
            lines[0].truncate(room, overflow="ellipsis")
        for number, line in enumerate(lines):
            prefix = label if number == 0 else " " * len(label)
            yield Text(prefix).append_text(line)


_BREAKS = "/:=,.-"
"""Where a word too long for its column is broken, in order of preference: after a path
separator, a port or tag, a setting's `=`, a list's comma, a domain's dot, a hyphen."""


def wrapped(text: Text, width: int) -> Text:
    """`text` in lines of at most `width` cells: broken at spaces, and a word wider than
    `width` after the last of `_BREAKS` that fits (else at `width`), unless it is a setting to
    paste (`_WHOLE`), which gets a line of its own. Nothing is cut."""
    plain = text.plain
    lines: list[tuple[int, int]] = []
    for start, end in _spans(plain):
        line_start, line_end = start, start
        for word_start, word_end in _words(plain, start, end):
            if line_end > line_start and _cells(plain[line_start:word_end]) <= width:
                line_end = word_end
                continue
            if line_end > line_start:
                lines.append((line_start, line_end))
            line_start = word_start
            breakable = not _WHOLE.match(plain, word_start)
            while breakable and _cells(plain[line_start:word_end]) > width:
                cut = _break(plain, line_start, word_end, width)
                lines.append((line_start, cut))
                line_start = cut
            line_end = word_end
        lines.append((line_start, line_end))
    return Text("\n").join(text[a:b] for a, b in lines)


def _spans(plain: str) -> Iterator[tuple[int, int]]:
    """The (start, end) of each line `plain` has of its own."""
    start = 0
    for line in plain.split("\n"):
        yield start, start + len(line)
        start += len(line) + 1


def _words(plain: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The (start, end) of each word of plain[start:end]; a line of spaces only has none."""
    index = start
    while index < end:
        while index < end and plain[index] == " ":
            index += 1
        word = index
        while index < end and plain[index] != " ":
            index += 1
        if index > word:
            yield word, index


def _break(plain: str, start: int, end: int, width: int) -> int:
    """Where to break the word plain[start:end], wider than `width`: after the most preferred
    separator that leaves a first piece of at most `width` cells and more than a third of it."""
    fits = start + 1
    while fits < end and _cells(plain[start : fits + 1]) <= width:
        fits += 1
    for separator in _BREAKS:
        found = plain.rfind(separator, start, fits)
        if found >= 0 and _cells(plain[start : found + 1]) * 3 > width:
            return found + 1
    return fits


def print_table(what: RenderableType | Layout, out: TextIO) -> None:
    """Print `what` to `out`, styled on a terminal, else as plain lines as long as they need
    to be. A Layout is asked for the terminal's width (`fitted`); a renderable is printed
    as it is."""
    layout: Layout = what if callable(what) else (lambda width: [what])
    if out.isatty():
        console = Console(file=out, highlight=False)
        for part in layout(console.width):
            console.print(part)
        return
    buffer = io.StringIO()
    console = Console(file=buffer, width=_FILE_WIDTH, no_color=True, highlight=False)
    for part in layout(_FILE_WIDTH):
        console.print(part)
    out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
