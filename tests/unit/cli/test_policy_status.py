"""`archfit policy status`: the published object as an operator reads it."""

from __future__ import annotations

import io
from typing import Any

import orjson

from extender.cli.policy_status import print_status, status_report
from extender.core.image_table import Rendered, Switches, parameter_spec
from extender.core.mutation import MutationRules
from extender.core.parameter import TIME_EPOCH
from extender.core.platforms import parse

AMD = frozenset({parse("linux/amd64")})
BOTH = AMD | frozenset({parse("linux/arm64")})
NOW = TIME_EPOCH + 10_000.0


def published() -> dict[str, Any]:
    spec = parameter_spec(
        [
            ("new:1", Rendered(BOTH, NOW - 10)),
            ("old:1", Rendered(AMD, NOW - 500)),
            ("@sha256:" + "e" * 64, Rendered(BOTH, NOW - 100)),
        ],
        MutationRules(platforms=BOTH, arch_preference={}),
        Switches(True, True, False, (), ()),
        100_000,
    ).spec
    status = {
        "publisher": "archfit-0-abc123",
        "publishedAt": "2026-11-22T10:00:05Z",
        "bytes": 900,
        "inUse": 5,
        "evicted": 2,
        "leftOut": {"ci": 2},
    }
    return {"metadata": {"name": "archfit"}, "spec": spec, "status": status}


def test_the_report_lists_the_oldest_entries_first_with_their_platforms() -> None:
    """JSON carries every entry, oldest first, with its exact platforms and age."""
    report = status_report(published(), 2, now=lambda: NOW)
    assert (3, 5, 2, {"ci": 2}) == (
        report["images"],
        report["inUse"],
        report["leftOut"],
        report["leftOutByNamespace"],
    )
    assert [
        ("old:1", ["linux/amd64"], 500),
        ("@sha256:" + "e" * 64, ["linux/amd64", "linux/arm64"], 100),
    ] == [(e["image"], e["platforms"], e["ageSeconds"]) for e in report["oldest"]]
    assert 3 == len(report["entries"])


def test_the_table_names_the_namespaces_left_out_and_json_is_the_report() -> None:
    """The table view says how many were left out and where; -o json prints the report."""
    report = status_report(published(), 10, now=lambda: NOW)
    out = io.StringIO()
    print_status(report, "table", out)
    text = out.getvalue()
    assert "3 images of 5 in use" in text
    assert "2 images left out" in text
    assert "ci" in text
    assert "old:1" in text
    out = io.StringIO()
    print_status(report, "json", out)
    assert report == orjson.loads(out.getvalue())
