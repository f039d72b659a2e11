"""The audit report as a terminal table (rich), JSON, CSV or Markdown (HTML: html_report).

Image names, reasons and kubelet messages come from the cluster, written by anyone who can
create a pod: every cell is made printable, rich markup is never interpreted, and Markdown
pipes are escaped, so a hostile name cannot forge rows or styles.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import TextIO

import orjson
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from extender.audit.report import BLOCKED, READY, LeftOut, Report, WorkloadReport, document
from extender.registry.errors import snippet
from extender.tables import print_table

_STYLE = {READY: "green", BLOCKED: "red"}
_CELL = 120

CSV_COLUMNS = (
    "namespace", "kind", "name", "verdict", "runsOn", "arm64Blockers", "amd64Blockers",
    "unknown", "running", "replicas", "vcpu", "memoryBytes", "brokenNow",
)  # fmt: skip


def write(report: Report, output: str, out: TextIO) -> None:
    """Write the report in one of extender.audit.FORMATS."""
    if output == "json":
        out.write(orjson.dumps(document(report), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif output == "csv":
        out.write(as_csv(report))
    elif output == "markdown":
        out.write(as_markdown(report))
    elif output == "html":
        from extender.audit import fleet_report, html_report  # they build on this module

        out.write(html_report.page(fleet_report.single(report)))
    else:
        print_table(Group(*table_parts(report)), out)


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
    lines += [left_out_line(item) for item in s.left_out]
    return lines


def left_out_line(item: LeftOut) -> str:
    """What was not read and what that does to the figures: on stderr and in the summary."""
    return f"Not read: {item.kind}s ({snippet(item.reason, 200)}); {item.effect}."


def table_parts(report: Report) -> list[RenderableType]:
    """Tables for a terminal: summary, workloads, blockers, unknown images, broken pods."""
    parts: list[RenderableType] = [Text(line) for line in headline(report)]
    workloads = _table("NAMESPACE", "KIND", "NAME", "ARM64", "RUNS ON", "WHY", "PODS NOW",
                       "VCPU", "MEMORY", title="Workloads")  # fmt: skip
    for w in report.workloads:
        key = w.workload.key
        workloads.add_row(
            *_cells(key.namespace, key.kind, key.name),
            Text(w.verdict, style=_STYLE.get(w.verdict, "yellow")),
            *_cells(
                _runs_on(w),
                _why(w) or "-",
                _running(w.running),
                _vcpu(w.cpu_millis),
                _memory(w.memory_bytes),
            ),
        )
    parts.append(workloads)
    if report.blockers:
        action = ("ACTION",) if report.hints else ()
        blockers = _table("IMAGE", "HAS", "WORKLOADS", "VCPU", *action,
                          title="Images that block arm64, most workloads first")  # fmt: skip
        for b in report.blockers:
            blockers.add_row(*_cells(b.image, _platforms(b.platforms), str(b.workloads),
                                     _vcpu(b.cpu_millis), *_action(report, b.image)))  # fmt: skip
        parts.append(blockers)
    if report.unknown_images:
        unknown = _table("IMAGE", "REASON", "WORKLOADS", title="Images that could not be read")
        for u in report.unknown_images:
            unknown.add_row(*_cells(u.image, u.reason, str(u.workloads)))
        parts.append(unknown)
    if report.broken:
        broken = _table("POD", "IMAGE", "NODE", "PROBLEM", title="Broken now")
        for item in report.broken:
            node = f"{item.node or '-'} ({item.node_arch})"
            broken.add_row(*_cells(f"{item.namespace}/{item.pod}", item.image, node, item.problem))
        parts.append(broken)
    parts += [Text(f"skipped: {snippet(reason, 300)}") for reason in report.skipped]
    return parts


def as_markdown(report: Report) -> str:
    """Markdown to paste into a ticket: summary, then the same tables as the terminal."""
    parts = ["## arm64 readiness", "", *(f"- {line}" for line in headline(report)), ""]
    rows = [
        (
            f"{w.workload.key.namespace}/{w.workload.key.name}",
            w.workload.key.kind,
            f"**{w.verdict}**",
            _runs_on(w),
            _why(w) or "-",
            _running(w.running),
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
            [(_code(b.image), _platforms(b.platforms), str(b.workloads), _vcpu(b.cpu_millis),
              *_action(report, b.image)) for b in report.blockers],
            "Images that block arm64, most workloads first",
        )  # fmt: skip
    if report.unknown_images:
        parts += _markdown_table(
            ("image", "reason", "workloads"),
            [(_code(u.image), u.reason, str(u.workloads)) for u in report.unknown_images],
            "Images that could not be read",
        )
    if report.broken:
        parts += _markdown_table(
            ("pod", "image", "node", "problem"),
            [(f"{b.namespace}/{b.pod}", _code(b.image), f"{b.node or '-'} ({b.node_arch})",
              b.problem) for b in report.broken],
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
                key.namespace,
                key.kind,
                key.name,
                w.verdict,
                " ".join(w.runs_on),
                " ".join(b.image for b in w.blockers["arm64"]),
                " ".join(b.image for b in w.blockers["amd64"]),
                " ".join(u.image for u in w.unknown),
                " ".join(f"{arch}={count}" for arch, count in w.running.items()),
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
    return "`" + image.replace("`", "'") + "`"


def _table(*headers: str, title: str) -> Table:
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
    return "| " + " | ".join(snippet(c, 300).replace("|", "\\|") for c in cells) + " |"


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
table, cells, markdown_table, code = _table, _cells, _markdown_table, _code
why, runs_on, running, platforms, vcpu = _why, _runs_on, _running, _platforms, _vcpu
