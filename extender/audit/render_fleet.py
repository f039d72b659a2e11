"""A multi-cluster audit as a terminal table, JSON, CSV or Markdown: the single-cluster
tables with a CLUSTER column, a table of the clusters, and the fleet's total.

Cells are made safe exactly as in `render` (whose helpers these are).
"""

from __future__ import annotations

import csv
import io
from typing import TextIO

from rich.console import RenderableType
from rich.text import Text

from extender.audit import render
from extender.audit.pure.fleet_report import FleetBlocker, FleetReport
from extender.audit.pure.report import Report, Summary
from extender.registry.errors import snippet
from extender.tables import Column, fitted, print_table

TOTAL = "fleet total"
"""The name of the clusters table's last row."""


def write_table(fleet: FleetReport, out: TextIO) -> None:
    """The terminal report of the fleet (extender.tables.print_table)."""
    print_table(lambda width: table_parts(fleet, width), out)


def headline(fleet: FleetReport) -> list[str]:
    """The fleet total in the single-cluster sentences, after how many clusters."""
    names = ", ".join(c.name for c in fleet.clusters)
    total = render.headline(Report(fleet.summary, (), (), (), ()))
    return [
        f"Clusters: {len(fleet.clusters)} ({names}); the figures are the fleet's total.",
        *total,
    ]


def cluster_rows(fleet: FleetReport) -> list[tuple[str, ...]]:
    """One row per cluster, then the fleet total."""
    rows = [(c.name, *_figures(c.report.summary)) for c in fleet.clusters]
    return [*rows, (TOTAL, *_figures(fleet.summary))]


CLUSTER_HEADERS = ("cluster", "workloads", "ready", "blocked", "unknown", "vCPU", "ready vCPU",
                   "movable vCPU", "saving/month", "broken now")  # fmt: skip


def _figures(s: Summary) -> tuple[str, ...]:
    saving = "-" if s.monthly_saving is None else f"{s.monthly_saving:,.2f}"
    return (str(s.workloads), str(s.ready), str(s.blocked), str(s.unknown),
            render.vcpu(s.cpu_millis), render.vcpu(s.ready_cpu_millis),
            render.vcpu(s.movable_cpu_millis), saving, str(s.broken))  # fmt: skip


def per_cluster(blocker: FleetBlocker) -> str:
    """`a 3, b 1`: workloads blocked in each cluster."""
    return ", ".join(f"{name} {count}" for name, count in blocker.clusters.items())


def action(fleet: FleetReport, image: str) -> str:
    """What to do about a blocker: the newer-tag hint, or rebuilding."""
    hint = fleet.hint(image)
    return hint.action if hint is not None else "rebuild for arm64"


_CLUSTER = Column("CLUSTER", shortest=12)


def table_parts(fleet: FleetReport, width: int) -> list[RenderableType]:
    """Summary, clusters, workloads, blockers, unknown images and broken pods, fitted to a
    terminal `width` columns wide (extender.tables.fitted)."""
    parts: list[RenderableType] = [Text(line) for line in headline(fleet)]

    def section(title: str, columns: tuple[Column, ...], rows: list[list[Text]]) -> None:
        parts.append(Text(""))
        parts.extend(fitted(columns, rows, width, title=title))

    # Each total is whole or left out; the figures that the others imply go first.
    leave_out = {"ready vCPU": 1, "vCPU": 2}
    figures = tuple(Column(h.upper(), leave_out=leave_out.get(h, 0)) for h in CLUSTER_HEADERS[1:])
    section(
        "Clusters",
        (_CLUSTER, *figures),
        [render.cells(*row) for row in cluster_rows(fleet)],
    )
    workloads = [
        [*render.cells(cluster.name, w.workload.key.namespace, w.workload.key.kind,
                       w.workload.key.name),
         render.verdict_text(w.verdict),
         *render.cells(render.runs_on(w), render.why(w) or "-", render.running(w.running),
                       render.vcpu(w.cpu_millis))]
        for cluster in fleet.clusters
        for w in cluster.report.workloads
    ]  # fmt: skip
    section(
        "Workloads",
        (_CLUSTER, render.NAMESPACE, render.KIND, render.NAME, Column("ARM64"),
         Column("RUNS ON", 7, True, leave_out=5), render.why_column("WHY"),
         Column("PODS NOW", 8, True, leave_out=3), Column("VCPU", leave_out=2)),
        workloads,
    )  # fmt: skip
    if fleet.blockers:
        section(
            "Images that block arm64, most workloads first",
            (render.IMAGE, Column("HAS", 12, True), render.WORKLOADS,
             Column("PER CLUSTER", 12, True, leave_out=2), Column("VCPU", leave_out=1),
             render.why_column("ACTION")),
            [render.cells(b.image, render.platforms(b.platforms), str(b.workloads),
                          per_cluster(b), render.vcpu(b.cpu_millis), action(fleet, b.image))
             for b in fleet.blockers],
        )  # fmt: skip
    if fleet.unknown_images:
        section(
            "Images that could not be read",
            (render.IMAGE, render.why_column("REASON"), render.WORKLOADS),
            [render.cells(u.image, u.reason, str(u.workloads)) for u in fleet.unknown_images],
        )
    broken_rows = _broken_rows(fleet)
    if broken_rows:
        section(
            "Broken now",
            (_CLUSTER, Column("POD", shortest=16), render.IMAGE,
             Column("NODE", shortest=12, leave_out=1), render.why_column("PROBLEM")),
            [render.cells(*row) for row in broken_rows],
        )  # fmt: skip
    parts += [Text(f"skipped: {snippet(reason, 300)}") for reason in _skipped(fleet)]
    return parts


def as_markdown(fleet: FleetReport) -> str:
    """Markdown to paste into a ticket: the fleet's summary, then the tables."""
    parts = ["## arm64 readiness", "", *(f"- {line}" for line in headline(fleet)), ""]
    # Every cell that comes from a cluster or a registry is escaped (render.md), so a name
    # or reason cannot add links, HTML or emphasis to the ticket it is pasted into.
    md = render.md
    parts += render.markdown_table(
        CLUSTER_HEADERS, [[md(c) for c in row] for row in cluster_rows(fleet)], "Clusters"
    )
    rows = [
        (md(cluster.name), md(f"{w.workload.key.namespace}/{w.workload.key.name}"),
         md(w.workload.key.kind), f"**{w.verdict}**", md(render.runs_on(w)),
         md(render.why(w) or "-"), md(render.running(w.running)), render.vcpu(w.cpu_millis))
        for cluster in fleet.clusters
        for w in cluster.report.workloads
    ]  # fmt: skip
    parts += render.markdown_table(
        ("cluster", "workload", "kind", "arm64", "runs on", "why", "pods now", "vCPU"),
        rows,
        "Workloads",
    )
    if fleet.blockers:
        parts += render.markdown_table(
            ("image", "has", "workloads", "per cluster", "vCPU", "action"),
            [(render.code(b.image), md(render.platforms(b.platforms)), str(b.workloads),
              md(per_cluster(b)), render.vcpu(b.cpu_millis), md(action(fleet, b.image)))
             for b in fleet.blockers],
            "Images that block arm64, most workloads first",
        )  # fmt: skip
    if fleet.unknown_images:
        parts += render.markdown_table(
            ("image", "reason", "workloads"),
            [(render.code(u.image), md(u.reason), str(u.workloads)) for u in fleet.unknown_images],
            "Images that could not be read",
        )
    broken_rows = [[md(cell) for cell in row] for row in _broken_rows(fleet)]
    if broken_rows:
        parts += render.markdown_table(
            ("cluster", "pod", "image", "node", "problem"), broken_rows, "Broken now"
        )
    return "\n".join(parts)


def as_csv(fleet: FleetReport) -> str:
    """One row per workload, the single-cluster columns after `cluster`."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(("cluster", *render.CSV_COLUMNS))
    for cluster in fleet.clusters:
        rows = csv.reader(io.StringIO(render.as_csv(cluster.report)))
        next(rows)  # the header, written once above
        writer.writerows([render.csv_cell(cluster.name), *row] for row in rows)
    return buffer.getvalue()


def _broken_rows(fleet: FleetReport) -> list[tuple[str, ...]]:
    return [
        (c.name, f"{b.namespace}/{b.pod}", b.image, f"{b.node or '-'} ({b.node_arch})", b.problem)
        for c in fleet.clusters
        for b in c.report.broken
    ]


def _skipped(fleet: FleetReport) -> list[str]:
    return [f"{c.name}: {reason}" for c in fleet.clusters for reason in c.report.skipped]
