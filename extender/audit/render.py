"""The audit report as a terminal table (rich), JSON, CSV or Markdown (HTML: html_report).

Image names, reasons and kubelet messages come from the cluster, written by anyone who can
create a pod: every cell is made printable, rich markup is never interpreted, Markdown
special characters are escaped and CSV cells never start a formula, so a hostile name cannot
forge rows, styles, links or spreadsheet formulas. JSON stays exact.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from extender.audit.pure.report import BLOCKED, CANNOT_RUN, READY, LeftOut, Report, WorkloadReport
from extender.core.text import printable
from extender.registry.errors import snippet
from extender.tables import Column, fitted, print_table

_STYLE = {READY: "green", BLOCKED: "red"}
_CELL = 2000
"""The longest a cell's text may be: far above any valid image reference (distribution caps
a name's path at 255 characters) or archfit's own reasons and hints, which are written in
full; only hostile text from the cluster is that long."""

CSV_COLUMNS = (
    "namespace", "kind", "name", "verdict", "runsOn", "arm64Blockers", "amd64Blockers",
    "unknown", "running", "replicas", "vcpu", "memoryBytes", "brokenNow",
)  # fmt: skip


def headline(report: Report) -> list[str]:
    """The summary in a few sentences, shared by the table and Markdown."""
    s = report.summary
    # Figures that a missing right makes bounds say so where they are printed.
    at_least = "at least " if s.bounded("brokenNow") else ""
    at_most = "at most " if s.bounded("movableVcpu") else ""
    lines = [
        f"Ready for arm64: {s.ready} of {s.workloads} workloads ({_percent(s.ready_share)}), "
        f"{_vcpu(s.ready_cpu_millis)} of {_vcpu(s.cpu_millis)} requested vCPU "
        f"({_percent(s.ready_cpu_share)}).",
        f"Blocked: {s.blocked}. Unknown (images that could not be read): {s.unknown}. "
        f"Broken now: {at_least}{s.broken}.",
    ]
    discount = f"{s.pricing.arm64_discount:.0%}"
    if s.monthly_saving is not None:
        lines.append(
            f"Estimated saving: {at_most}{s.monthly_saving:,.2f} a month, moving "
            f"{at_most}{_vcpu(s.movable_cpu_millis)} vCPU at {s.pricing.price_per_vcpu_hour:g} "
            f"a vCPU-hour and a {discount} arm64 discount."
        )
    else:
        lines.append(
            f"Movable now: {at_most}{_vcpu(s.movable_cpu_millis)} vCPU; give "
            f"--price-per-vcpu-hour for the saving at a {discount} arm64 discount."
        )
    if report.capacity:
        lines.append(f"{CANNOT_RUN.capitalize()}: {len(report.capacity)} workloads.")
    lines += [left_out_line(item) for item in s.left_out]
    return lines


def left_out_line(item: LeftOut) -> str:
    """What was not read and what that does to the figures: on stderr and in the summary."""
    return f"Not read: {item.kind}s ({snippet(item.reason, 200)}); {item.effect}."


# How each kind of cell gives up width on a narrow terminal (extender.tables.Column): an
# image reference never does, text (WHY, REASON, ACTION, PROBLEM) wraps, names are cut last.
# Columns are left out by `leave_out`, the least useful first (docs/audit.md, "Reading the
# tables").
NAMESPACE = Column("NAMESPACE", shortest=12)
KIND = Column("KIND", leave_out=4)
NAME = Column("NAME", shortest=16)
IMAGE = Column("IMAGE")
WORKLOADS = Column("WORKLOADS")


def why_column(header: str) -> Column:
    """A column of sentences: it wraps at spaces and takes what width is left."""
    return Column(header, shortest=20, wrap=True)


@dataclass(frozen=True, slots=True)
class _Section:
    """One table of the terminal report: its rows as printable, cut cells."""

    title: str
    columns: tuple[Column, ...]
    rows: list[list[str]]
    verdict_column: int | None = None
    """The column to colour by verdict on a terminal."""

    @property
    def headers(self) -> list[str]:
        return [column.header for column in self.columns]

    @property
    def widths(self) -> list[int]:
        widths = [cell_len(h) for h in self.headers]
        for row in self.rows:
            for index, cell in enumerate(row):
                widths[index] = max(widths[index], cell_len(cell))
        return widths


def _sections(report: Report) -> Iterator[_Section]:
    def cells(*values: str) -> list[str]:
        return [snippet(value, _CELL) for value in values]

    yield _Section(
        "Workloads",
        (NAMESPACE, KIND, NAME, Column("ARM64"), Column("RUNS ON", 7, True, leave_out=5),
         why_column("WHY"), Column("PODS NOW", 8, True, leave_out=3),
         Column("VCPU", leave_out=2), Column("MEMORY", leave_out=1)),
        [
            cells(w.workload.key.namespace, w.workload.key.kind, w.workload.key.name,
                  w.verdict, _runs_on(w), _why(w) or "-", _running(w.running),
                  _vcpu(w.cpu_millis), _memory(w.memory_bytes))
            for w in report.workloads
        ],
        verdict_column=3,
    )  # fmt: skip
    split = [w for w in report.workloads if w.split]
    if split:
        yield _Section(
            "arm64 share reached (archfit.io/arm64-share), live pods placed by the share",
            (NAMESPACE, Column("KIND", leave_out=1), NAME, Column("ARM64"), Column("AMD64"),
             Column("ARM64 SHARE")),
            [cells(w.workload.key.namespace, w.workload.key.kind, w.workload.key.name,
                   str(w.split.get("arm64", 0)), str(w.split.get("amd64", 0)),
                   _percent(w.arm64_share)) for w in split],
        )  # fmt: skip
    if report.blockers:
        action = (why_column("ACTION"),) if report.hints else ()
        yield _Section(
            "Images that block arm64, most workloads first",
            (IMAGE, Column("HAS", 12, True), WORKLOADS, Column("VCPU", leave_out=1), *action),
            [cells(b.image, _platforms(b.platforms), str(b.workloads), _vcpu(b.cpu_millis),
                   *_action(report, b.image))
             for b in report.blockers],
        )  # fmt: skip
    if report.capacity:
        yield _Section(
            f"Workloads that {CANNOT_RUN} (their pods would wait Pending)",
            (NAMESPACE, KIND, NAME, why_column("WHY")),
            [cells(c.workload.namespace, c.workload.kind, c.workload.name, c.message)
             for c in report.capacity],
        )  # fmt: skip
    if report.unknown_images:
        yield _Section(
            "Images that could not be read",
            (IMAGE, why_column("REASON"), WORKLOADS),
            [cells(u.image, u.reason, str(u.workloads)) for u in report.unknown_images],
        )
    if report.broken:
        yield _Section(
            "Broken now",
            (Column("POD", shortest=16), IMAGE, Column("NODE", shortest=12, leave_out=1),
             why_column("PROBLEM")),
            [cells(f"{b.namespace}/{b.pod}", b.image, f"{b.node or '-'} ({b.node_arch})",
                   b.problem) for b in report.broken],
        )  # fmt: skip
    if report.disagreements:
        yield _Section(
            "Index entries their image configs contradict (--verify: the config is believed)",
            (IMAGE, Column("ENTRY"), why_column("PROBLEM")),
            [cells(d.image, d.digest, d.problem) for d in report.disagreements],
        )


def _footer(report: Report) -> list[str]:
    return [f"skipped: {snippet(reason, 300)}" for reason in report.skipped]


def write_table(report: Report, out: TextIO) -> None:
    """The terminal report: rich on a terminal; plain aligned lines, streamed, elsewhere."""
    if out.isatty():
        print_table(lambda width: table_parts(report, width), out)
        return
    # rich lays a table out whole, with every cell an object: 50,000 workloads took 40 s
    # and 400 MB. Plain lines, written as they are made, look the same in a file.
    out.write("".join(line + "\n" for line in headline(report)))
    for section in _sections(report):
        widths = section.widths
        out.write(f"\n{section.title}\n")
        out.write(_plain_row(section.headers, widths))
        out.write(_plain_row(["─" * width for width in widths], widths))
        for row in section.rows:
            out.write(_plain_row(row, widths))
    out.write("".join(line + "\n" for line in _footer(report)))


def _plain_row(cells: Sequence[str], widths: Sequence[int]) -> str:
    padded = [
        cell + " " * (width - cell_len(cell)) for cell, width in zip(cells, widths, strict=True)
    ]
    return ("  " + "  ".join(padded)).rstrip() + "\n"


def table_parts(report: Report, width: int) -> Iterator[RenderableType]:
    """The report for a terminal `width` columns wide: long tables come in chunks of rows
    with the same column widths (extender.tables.fitted)."""
    yield Group(*(Text(line) for line in headline(report)))
    for section in _sections(report):
        yield Text("")
        yield from fitted(section.columns, _texts(section), width, title=section.title)
    for line in _footer(report):
        yield Text(line)


def _texts(section: _Section) -> list[list[Text]]:
    rows = []
    for row in section.rows:
        # Text, not str: rich would read "[red]" in an image name as markup.
        texts = [Text(cell) for cell in row]
        if section.verdict_column is not None:
            verdict = row[section.verdict_column]
            texts[section.verdict_column].stylize(_STYLE.get(verdict, "yellow"))
        rows.append(texts)
    return rows


def as_markdown(report: Report) -> str:
    """Markdown to paste into a ticket: summary, then the same tables as the terminal."""
    parts = ["## arm64 readiness", "", *(f"- {line}" for line in headline(report)), ""]
    rows = [
        (
            _md(f"{w.workload.key.namespace}/{w.workload.key.name}"),
            _md(w.workload.key.kind),
            f"**{_md(w.verdict)}**",
            _md(_runs_on(w)),
            _md(_why(w) or "-"),
            _md(_running(w.running)),
            _vcpu(w.cpu_millis),
        )
        for w in report.workloads
    ]
    parts += _markdown_table(
        ("workload", "kind", "arm64", "runs on", "why", "pods now", "vCPU"), rows, "Workloads"
    )
    if report.blockers:
        parts += _markdown_table(
            ("image", "has", "workloads", "vCPU", *(("action",) if report.hints else ())),
            [(_code(b.image), _md(_platforms(b.platforms)), str(b.workloads),
              _vcpu(b.cpu_millis), *(_md(a) for a in _action(report, b.image)))
             for b in report.blockers],
            "Images that block arm64, most workloads first",
        )  # fmt: skip
    if report.capacity:
        parts += _markdown_table(
            ("workload", "kind", "why"),
            [(_md(f"{c.workload.namespace}/{c.workload.name}"), _md(c.workload.kind),
              _md(c.message)) for c in report.capacity],
            f"Workloads that {CANNOT_RUN}",
        )  # fmt: skip
    if report.unknown_images:
        parts += _markdown_table(
            ("image", "reason", "workloads"),
            [(_code(u.image), _md(u.reason), str(u.workloads)) for u in report.unknown_images],
            "Images that could not be read",
        )
    if report.broken:
        parts += _markdown_table(
            ("pod", "image", "node", "problem"),
            [(_md(f"{b.namespace}/{b.pod}"), _code(b.image),
              _md(f"{b.node or '-'} ({b.node_arch})"), _md(b.problem)) for b in report.broken],
            "Broken now",
        )  # fmt: skip
    return "\n".join(parts)


def as_csv(report: Report) -> str:
    """One row per workload, for spreadsheets."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for w in report.workloads:
        key = w.workload.key
        writer.writerow(
            [
                _csv_cell(key.namespace),
                _csv_cell(key.kind),
                _csv_cell(key.name),
                w.verdict,
                _csv_cell(" ".join(w.runs_on)),
                _csv_cell(" ".join(b.image for b in w.blockers["arm64"])),
                _csv_cell(" ".join(b.image for b in w.blockers["amd64"])),
                _csv_cell(" ".join(u.image for u in w.unknown)),
                _csv_cell(" ".join(f"{arch}={count}" for arch, count in w.running.items())),
                w.workload.replicas,
                f"{w.cpu_millis / 1000:g}",
                w.memory_bytes,
                len(w.broken),
            ]
        )
    return buffer.getvalue()


def _why(w: WorkloadReport) -> str:
    """What keeps the workload off arm64 (or unverified), one clause per image; the reasons
    of unknown images are in their own table, once per image."""
    clauses = [f"{b.image} has {_platforms(b.platforms)}" for b in w.blockers["arm64"]]
    clauses += [f"{u.image} unknown" for u in w.unknown]
    return "; ".join(clauses)


def _runs_on(w: WorkloadReport) -> str:
    # With an image unknown, the architectures are those of the images known: not certain.
    mark = "?" if w.unknown else ""
    return ", ".join(arch + mark for arch in w.runs_on) or "none"


def _code(image: str) -> str:
    # A code span renders no links or HTML; only its own delimiter and the table's need care.
    return "`" + snippet(image, 300).replace("`", "'").replace("|", "\\|") + "`"


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula (OWASP, CSV Injection)."""

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:&])")
"""ASCII punctuation CommonMark lets a backslash escape: links, HTML, emphasis, autolinks
(`http\\://` is no link) and table pipes all lose their meaning."""


def _csv_cell(text: str) -> str:
    """A cell no spreadsheet runs: control characters (ESC, CR, U+202E ...) become spaces,
    and a cell that starts like a formula gets a leading `'` (OWASP's rule)."""
    text = printable(text, " ")
    return "'" + text if text.startswith(_FORMULA_START) else text


def _md(text: str) -> str:
    """Cluster text as inert Markdown: printable, cut, every special character escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", snippet(text, 300))


def _table(*headers: str, title: str) -> Table:
    """An empty rich table of the report's look (the multi-cluster tables build their own)."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, highlight=False)
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def _cells(*values: str) -> list[Text]:
    # Text, not str: rich would read "[red]" in an image name as markup.
    return [Text(snippet(value, _CELL)) for value in values]


def _markdown_table(headers: Sequence[str], rows: Iterable[Sequence[str]], title: str) -> list[str]:
    lines = [f"### {title}", "", _markdown_row(headers), "|" + "---|" * len(headers)]
    lines += [_markdown_row(row) for row in rows]
    return [*lines, ""]


def _markdown_row(cells: Sequence[str]) -> str:
    # Cells come escaped (_md, _code) or are archfit's own text.
    return "| " + " | ".join(cells) + " |"


def _platforms(platforms: Sequence[str]) -> str:
    return ", ".join(platforms) or "no runnable platform"


def _running(running: Mapping[str, int]) -> str:
    return ", ".join(f"{arch} {count}" for arch, count in running.items()) or "-"


def _vcpu(millis: int) -> str:
    return f"{millis / 1000:g}"


def _memory(size: int) -> str:
    for unit, scale in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g}{unit}"
    return str(size)


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def _action(report: Report, image: str) -> tuple[str, ...]:
    """The blocker's ACTION cell when newer tags were looked up (audit.hints), else none."""
    if not report.hints:
        return ()
    hint = report.hint(image)
    return (hint.action if hint is not None else "rebuild for arm64",)


def verdict_text(verdict: str) -> Text:
    """A verdict, coloured for a terminal."""
    return Text(verdict, style=_STYLE.get(verdict, "yellow"))


# The cell helpers, shared with the multi-cluster tables (audit.render_fleet).
table, cells, markdown_table, code, md = _table, _cells, _markdown_table, _code, _md
csv_cell = _csv_cell
why, runs_on, running, platforms, vcpu = _why, _runs_on, _running, _platforms, _vcpu
