"""The audit's one output dispatch: a cluster's report or a fleet's, written in the format
asked for (`options.FORMATS`) by the module that renders it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TextIO, TypeVar

import orjson

from extender.audit import html_report, render, render_fleet
from extender.audit.pure.fleet_report import FleetReport, fleet_document, single
from extender.audit.pure.report import Report, document

R = TypeVar("R", Report, FleetReport)


@dataclass(frozen=True, slots=True)
class _Renderings(Generic[R]):
    """How one kind of report is written in each format."""

    document: Callable[[R], dict[str, Any]]
    csv: Callable[[R], str]
    markdown: Callable[[R], str]
    table: Callable[[R, TextIO], None]
    fleet: Callable[[R], FleetReport]
    """The report in the fleet's shape, which the HTML page draws (one cluster: a fleet of one)."""


_CLUSTER: _Renderings[Report] = _Renderings(
    document, render.as_csv, render.as_markdown, render.write_table, single
)
_FLEET: _Renderings[FleetReport] = _Renderings(
    fleet_document,
    render_fleet.as_csv,
    render_fleet.as_markdown,
    render_fleet.write_table,
    lambda fleet: fleet,
)


def write(report: Report | FleetReport, output: str, out: TextIO) -> None:
    """Write one cluster's report, or a fleet's, in one of `options.FORMATS`."""
    if isinstance(report, FleetReport):
        _write(_FLEET, report, output, out)
    else:
        _write(_CLUSTER, report, output, out)


def _write(renderings: _Renderings[R], report: R, output: str, out: TextIO) -> None:
    if output == "json":
        text = orjson.dumps(renderings.document(report), option=orjson.OPT_INDENT_2).decode()
        out.write(text + "\n")
    elif output == "csv":
        out.write(renderings.csv(report))
    elif output == "markdown":
        out.write(renderings.markdown(report))
    elif output == "html":
        out.write(html_report.page(renderings.fleet(report)))
    else:
        renderings.table(report, out)
