"""The audit as one self-contained HTML page: inline CSS and SVG, no script, no outside asset.

Names, images, reasons and kubelet messages come from clusters and registries, written by
anyone who can create a pod: every one is HTML-escaped (and cut short) where it is written,
and the page's Content-Security-Policy forbids loading anything, so a hostile name can
neither run script nor make the browser fetch a URL.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from extender.audit import render, render_fleet
from extender.audit.pure.fleet_report import FleetReport
from extender.audit.pure.report import BLOCKED, READY, UNKNOWN
from extender.registry.errors import snippet

MAX_NAMESPACES = 60
"""Bars in the readiness chart; the namespaces with the most workloads are drawn."""
_CELL = 300
_BAR_WIDTH = 560
_ROW = 22
_LABEL = 260
_COLOURS = {READY: "#2e7d32", BLOCKED: "#c62828", UNKNOWN: "#f9a825"}
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1200px;padding:0 1rem;color:#1b1b1b;background:#fff}
h1{font-size:1.6rem;margin:0 0 .3rem}h2{font-size:1.2rem;margin:2rem 0 .5rem}
.meta{color:#555;margin:0 0 1rem}
.cards{display:flex;flex-wrap:wrap;gap:.8rem;margin:1rem 0}
.card{border:1px solid #ddd;border-radius:6px;padding:.6rem 1rem;min-width:10rem}
.card b{display:block;font-size:1.5rem}
table{border-collapse:collapse;width:100%;margin:.3rem 0 1rem}
th,td{border-bottom:1px solid #e3e3e3;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font-size:.9em;word-break:break-all}
.ready{color:#2e7d32;font-weight:600}.blocked{color:#c62828;font-weight:600}
.unknown{color:#8a6d00;font-weight:600}.action{color:#0d47a1}
.legend span{display:inline-block;margin-right:1rem}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px}
ul.notes{color:#555}
@media print{body{margin:0}}
"""


def page(fleet: FleetReport, generated: datetime | None = None) -> str:
    """The whole HTML document."""
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    names = ", ".join(c.name for c in fleet.clusters if c.name)
    title = "arm64 readiness" + (f": {names}" if names else "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">archfit audit, {_e(when)}</p>',
        _cards(fleet),
        "<ul>",
        *(f"<li>{_e(line)}</li>" for line in render_fleet.headline(fleet)[1:]),
        "</ul>",
    ]
    if not fleet.single:
        parts += [
            "<h2>Clusters</h2>",
            _table(render_fleet.CLUSTER_HEADERS, render_fleet.cluster_rows(fleet), "clusters"),
        ]
    parts += ["<h2>Readiness by namespace</h2>", chart(fleet)]
    parts += ["<h2>Images that block arm64</h2>", _blockers(fleet)]
    parts += ["<h2>Broken now</h2>", _broken(fleet)]
    if fleet.unknown_images:
        parts += [
            "<h2>Images that could not be read</h2>",
            _table(
                ("image", "reason", "workloads"),
                [(u.image, u.reason, str(u.workloads)) for u in fleet.unknown_images],
                "unknown-images",
                code=(0,),
            ),
        ]
    parts += ["<h2>Workloads</h2>", _workloads(fleet), "</body></html>", ""]
    return "\n".join(parts)


def _cards(fleet: FleetReport) -> str:
    s = fleet.summary
    share = "-" if s.ready_share is None else f"{s.ready_share:.0%}"
    if s.monthly_saving is not None:
        saving = (f"{s.monthly_saving:,.2f}", "estimated saving a month")
    else:
        saving = (render.vcpu(s.movable_cpu_millis), "vCPU movable now (no price given)")
    cards = [
        (share, f"ready for arm64 ({s.ready} of {s.workloads} workloads)"),
        (str(s.blocked), "workloads blocked"),
        (str(s.unknown), "workloads unknown"),
        saving,
        (str(s.broken), "pods broken now"),
    ]
    inner = "".join(f'<div class="card"><b>{_e(v)}</b>{_e(label)}</div>' for v, label in cards)
    return f'<div class="cards" id="summary">{inner}</div>'


def namespace_counts(fleet: FleetReport) -> list[tuple[str, Counter[str]]]:
    """(label, verdict counts) per namespace (per cluster and namespace with several
    clusters), the namespaces with most workloads first."""
    counts: dict[str, Counter[str]] = {}
    for cluster in fleet.clusters:
        for w in cluster.report.workloads:
            namespace = w.workload.key.namespace
            label = namespace if fleet.single else f"{cluster.name}/{namespace}"
            counts.setdefault(label, Counter())[w.verdict] += 1
    return sorted(counts.items(), key=lambda item: (-item[1].total(), item[0]))


def chart(fleet: FleetReport) -> str:
    """A horizontal stacked bar per namespace: ready, blocked, unknown workloads."""
    rows = namespace_counts(fleet)
    if not rows:
        return '<p id="readiness-chart">No workloads.</p>'
    shown = rows[:MAX_NAMESPACES]
    widest = max(counts.total() for _, counts in shown)
    height = _ROW * len(shown) + 8
    width = _LABEL + _BAR_WIDTH + 80
    bars = []
    for row, (label, counts) in enumerate(shown):
        y = row * _ROW + 4
        bars.append(
            f'<text x="{_LABEL - 8}" y="{y + 14}" text-anchor="end">{_e(snippet(label, 40))}</text>'
        )
        x = float(_LABEL)
        for verdict in (READY, BLOCKED, UNKNOWN):
            if not counts[verdict]:
                continue
            size = _BAR_WIDTH * counts[verdict] / widest
            tip = f"{label}: {counts[verdict]} {verdict}"
            bars.append(
                f'<rect class="bar-{verdict}" x="{x:.1f}" y="{y}" width="{size:.1f}" '
                f'height="{_ROW - 6}" fill="{_COLOURS[verdict]}"><title>{_e(tip)}</title></rect>'
            )
            x += size
        summary = f"{counts[READY]}/{counts.total()} ready"
        bars.append(f'<text x="{x + 6:.1f}" y="{y + 14}">{_e(summary)}</text>')
    legend = "".join(
        f'<span><i style="background:{colour}"></i>{verdict}</span>'
        for verdict, colour in _COLOURS.items()
    )
    more = ""
    if len(rows) > len(shown):
        more = f"<p>and {len(rows) - len(shown)} more namespaces (see Workloads).</p>"
    return (
        f'<div class="legend">{legend}</div>'
        f'<svg id="readiness-chart" role="img" aria-label="Readiness by namespace" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-size="12" font-family="sans-serif">'
        + "".join(bars)
        + f"</svg>{more}"
    )


def _blockers(fleet: FleetReport) -> str:
    if not fleet.blockers:
        return '<p id="blockers">No image blocks arm64.</p>'
    headers = ["image", "has", "workloads", "vCPU", "action"]
    if not fleet.single:
        headers.insert(3, "per cluster")
    rows = []
    for b in fleet.blockers:
        row = [b.image, render.platforms(b.platforms), str(b.workloads),
               render.vcpu(b.cpu_millis), render_fleet.action(fleet, b.image)]  # fmt: skip
        if not fleet.single:
            row.insert(3, render_fleet.per_cluster(b))
        rows.append(row)
    return _table(headers, rows, "blockers", code=(0,), action=len(headers) - 1)


def _broken(fleet: FleetReport) -> str:
    rows: list[Sequence[str]] = [
        (c.name, f"{b.namespace}/{b.pod}", b.image, f"{b.node or '-'} ({b.node_arch})",
         b.problem, b.message)
        for c in fleet.clusters
        for b in c.report.broken
    ]  # fmt: skip
    if not rows:
        return '<p id="broken">No pod is broken by its platform now.</p>'
    headers: Sequence[str] = ("cluster", "pod", "image", "node", "problem", "message")
    if fleet.single:
        headers, rows = headers[1:], [row[1:] for row in rows]
    return _table(headers, rows, "broken", code=(headers.index("image"),))


def _workloads(fleet: FleetReport) -> str:
    headers = ["namespace", "kind", "name", "arm64", "runs on", "why", "pods now", "vCPU"]
    if not fleet.single:
        headers.insert(0, "cluster")
    rows = []
    for c in fleet.clusters:
        for w in c.report.workloads:
            key = w.workload.key
            row = [key.namespace, key.kind, key.name, w.verdict, render.runs_on(w),
                   render.why(w) or "-", render.running(w.running),
                   render.vcpu(w.cpu_millis)]  # fmt: skip
            if not fleet.single:
                row.insert(0, c.name)
            rows.append(row)
    return _table(headers, rows, "workloads", verdict=headers.index("arm64"))


def _table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    ident: str,
    *,
    code: Sequence[int] = (),
    action: int = -1,
    verdict: int = -1,
) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for column, value in enumerate(row):
            text = _e(snippet(value, _CELL))
            if column in code:
                cells.append(f"<td><code>{text}</code></td>")
            elif column == action:
                cells.append(f'<td class="action">{text}</td>')
            elif column == verdict:
                cells.append(f'<td class="{_e(value)}">{text}</td>')
            elif value.replace(".", "", 1).replace(",", "").isdigit():
                cells.append(f'<td class="num">{text}</td>')
            else:
                cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<table id="{ident}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def _e(text: str) -> str:
    return html.escape(text, quote=True)
