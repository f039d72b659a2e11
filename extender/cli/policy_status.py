"""`archfit policy status`: what the admission policy's parameter lists now, which namespaces
had images left out, and the entries resolved longest ago (docs/operations.md, "The admission
policy's parameter")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

import orjson

from extender.core.parameter import PublishedTable, read_spec
from extender.core.text import utc_text

OLDEST_SHOWN = 10
"""Entries `archfit policy status` shows, those resolved longest ago (--oldest)."""


def status_report(
    found: dict[str, Any], oldest: int, now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """The object read from the API as the report `-o json` prints: its status, every entry
    with its platforms and resolved-at time, oldest first."""
    spec = found.get("spec") or {}
    status = found.get("status") or {}
    table = PublishedTable.of(read_spec(spec))
    entries = []
    for key in table.images:
        packed = table.unpacked(key)
        assert packed is not None  # a listed key
        exact = table.platforms_of(key)
        if exact is not None:
            platforms = sorted(str(p) for p in exact)
        else:
            platforms = [str(p) for i, p in enumerate(table.platforms) if packed.supported >> i & 1]
        entries.append(
            {
                "image": key,
                "platforms": platforms,
                "exact": exact is not None,
                "resolvedAt": utc_text(packed.resolved_at) if packed.resolved_at else None,
                "ageSeconds": round(now() - packed.resolved_at) if packed.resolved_at else None,
            }
        )
    entries.sort(key=lambda e: (e["resolvedAt"] is not None, e["resolvedAt"] or "", e["image"]))
    left_out = status.get("leftOut") or {}
    return {
        "name": (found.get("metadata") or {}).get("name", ""),
        "publisher": status.get("publisher", ""),
        "publishedAt": status.get("publishedAt", ""),
        "images": len(table.images),
        "bytes": status.get("bytes", 0),
        "inUse": status.get("inUse"),
        "pods": status.get("pods"),
        "leftOut": status.get("evicted", 0),
        "leftOutByNamespace": left_out,
        "workloads": len(table.workloads),
        "oldest": entries[:oldest],
        "entries": entries,
    }


def print_status(report: dict[str, Any], output: str, out: TextIO) -> None:
    if output == "json":
        out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    from rich.table import Table

    from extender.tables import print_table

    in_use = report["inUse"]
    print(
        f"ImagePlatforms/{report['name']}: {report['images']} images"
        + (f" of {in_use} in use" if in_use is not None else "")
        + f", {report['bytes']} bytes, {report['workloads']} workloads with evidence; "
        f"published {report['publishedAt'] or 'never'} by {report['publisher'] or '?'}",
        file=out,
    )
    left_out = report["leftOutByNamespace"]
    if report["leftOut"]:
        print(
            f"{report['leftOut']} images left out (admissionPolicy.maxBytes): their new pods "
            "are held while archfit is down",
            file=out,
        )
        table = Table(box=None, title="namespaces with images left out (most first)")
        for column in ("NAMESPACE", "LEFT OUT"):
            table.add_column(column)
        for namespace, count in left_out.items():
            table.add_row(namespace, str(count))
        print_table(table, out)
    else:
        print("no image left out", file=out)
    oldest = report["oldest"]
    if oldest:
        table = Table(box=None, title=f"the {len(oldest)} entries resolved longest ago")
        for column in ("IMAGE", "PLATFORMS", "RESOLVED", "AGE"):
            table.add_column(column, overflow="fold" if column == "IMAGE" else "ignore")
        for entry in oldest:
            age = entry["ageSeconds"]
            table.add_row(
                entry["image"],
                ",".join(entry["platforms"]) + ("" if entry["exact"] else " (cluster's bits)"),
                entry["resolvedAt"] or "not known",
                "" if age is None else f"{age}s",
            )
        print_table(table, out)
