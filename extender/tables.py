"""Printing rich tables the same way everywhere: styled on a terminal, plain text elsewhere."""

from __future__ import annotations

import io
from typing import TextIO

from rich.console import Console, RenderableType

# A pipe or a file gets lines as long as the rows need (no folding mid-name) and no
# trailing padding, so scripts and diffs see stable text.
_FILE_WIDTH = 400


def print_table(renderable: RenderableType, out: TextIO) -> None:
    """Print `renderable` to `out`: styled to the terminal's width, or as plain lines."""
    if out.isatty():
        Console(file=out, highlight=False).print(renderable)
        return
    buffer = io.StringIO()
    Console(file=buffer, width=_FILE_WIDTH, no_color=True, highlight=False).print(renderable)
    out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
