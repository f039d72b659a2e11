"""Printing tables the same way everywhere: fitted to a terminal's width, plain text elsewhere.

On a terminal a table is laid out for the terminal's width (`fit`): a column of text wraps
at spaces, a name is cut with an ellipsis but never below its shortest width, a verdict or a
digest is never broken, and the columns that matter least are left out (and named) before
anything is cut. When even that does not fit, each row is printed as a block of lines.
"""

from __future__ import annotations

import io
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
    nothing in it is ever cut (a verdict, a digest, a number)."""
    wrap: bool = False
    """The text wraps at spaces (a reason, a list); otherwise it stays on one line and is
    cut with an ellipsis. A word wider than the column is cut, never broken."""
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
) -> Fit | None:
    """The layout of columns whose widest lines are `natural` on `width` columns, or None
    when even the narrowest table would not fit (then rows are printed as blocks).

    `firm` is what each column needs for nothing in it to be cut: its widest word for a text
    column, its widest cell for the others (headers wrap at their spaces). Width is given up
    in this order: text wraps down to its shortest width, but never below its widest word;
    then columns are left out, in their order; then text columns cut their long words; then
    one-line columns are cut to their shortest. Each time the widest column gives first."""
    firm = natural if firm is None else firm
    shown = list(range(len(columns)))
    droppable = sorted((c.leave_out, i) for i, c in enumerate(columns) if c.leave_out)

    def floors(cut_text: bool, cut_names: bool) -> list[int]:
        found = []
        for i in shown:
            column, lowest = columns[i], natural[i]
            if column.shortest is not None:
                lowest = min(natural[i], column.shortest)
            if column.wrap:
                found.append(lowest if cut_text else max(lowest, firm[i]))
            else:
                found.append(lowest if cut_names and column.shortest is not None else firm[i])
        return found

    while (widths := _shrink([natural[i] for i in shown], floors(False, False), width)) is None:
        if not droppable:
            widths = _shrink([natural[i] for i in shown], floors(True, False), width)
            widths = widths or _shrink([natural[i] for i in shown], floors(True, True), width)
            if widths is None:
                return None
            break
        shown.remove(droppable.pop(0)[1])
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
) -> tuple[list[int], list[int]]:
    """Each column's width with nothing wrapped (its widest line, the header's too), and what
    it needs for nothing to be cut (`fit`'s firm): the widest word of a text column, the
    widest cell line of the others, and no less than the header's widest word."""
    natural = [_cells(c.header) for c in columns]
    firm = [max(map(_cells, c.header.split())) for c in columns]
    for row in rows:
        for index, cell in enumerate(row):
            lines = cell.plain.split("\n")
            natural[index] = max(natural[index], *map(_cells, lines))
            pieces = " ".join(lines).split() if columns[index].wrap else lines
            firm[index] = max(firm[index], *map(_cells, pieces or [""]))
    return natural, firm


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
    natural, firm = _widths(columns, rows)
    layout = fit(columns, natural, width, firm)
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
                no_wrap=not column.wrap,
                overflow="ellipsis",
            )
        for row in rows[start : start + chunk]:
            table.add_row(*(row[index] for index in layout.shown))
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
    would not fit beside its label, and may not be cut, goes on a line of its own."""
    if title:
        yield Text(title)
    label_width = max((_cells(c.header) for c in columns[1:]), default=0)
    room = max(width - _INDENT - label_width - GAP, 1)
    console = Console(width=room)
    for row in rows:
        name = row[0].copy()
        name.no_wrap, name.overflow = True, "ellipsis"  # one line, even if it must be cut
        yield name
        yield Text("\n").join(_fields(columns, row, label_width, room, console))


def _fields(
    columns: Sequence[Column],
    row: Sequence[Text],
    label_width: int,
    room: int,
    console: Console,
) -> Iterator[Text]:
    indent = " " * _INDENT
    for column, cell in zip(columns[1:], row[1:], strict=True):
        if column.shortest is None and cell.cell_len > room:
            yield Text(indent + column.header)
            yield Text(indent).append_text(cell)
            continue
        label = indent + column.header.ljust(label_width + GAP)
        for number, line in enumerate(cell.wrap(console, room, overflow="ellipsis")):
            prefix = label if number == 0 else " " * len(label)
            yield Text(prefix).append_text(line)


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
