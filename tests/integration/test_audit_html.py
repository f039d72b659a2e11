"""`archfit audit -o html` in a real headless browser: it renders its tables and chart, with
no console error, no script and nothing loaded from outside, hostile names included."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser
from pathlib import Path

import pytest

from extender.audit.html_report import page
from extender.audit.pure.breakage import Breakage
from extender.audit.pure.fleet_report import ClusterReport, combine
from extender.audit.pure.newer_tags import TagHint
from extender.audit.pure.options import Pricing
from extender.audit.pure.report import build
from extender.audit.pure.workloads import WorkloadKey
from extender.core.platforms import Unknown, parse
from extender.core.pods import PullSecretsRef
from tests.support.audit_objects import workload
from tests.support.browser import load

pytestmark = pytest.mark.integration
AMD64 = frozenset({parse("linux/amd64")})
BOTH = frozenset({parse("linux/amd64"), parse("linux/arm64")})
HOSTILE = '<img src="http://127.0.0.1:9/x.png" onerror="console.error(1)">'


class _Elements(HTMLParser):
    """Counts elements by tag and collects ids."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.ids.update(value for name, value in attrs if name == "id" and value)


def sample_fleet():
    """Two clusters, three namespaces, a hinted blocker, an unknown image, a broken pod and
    hostile names everywhere the cluster or a registry writes."""
    pull = PullSecretsRef("shop")
    answers = {("legacy:1.0", pull): AMD64, ("web:1", pull): BOTH,
               (HOSTILE, pull): AMD64, ("private:2", pull): Unknown(f"401 {HOSTILE}")}  # fmt: skip
    broken = Breakage(
        namespace="shop", pod=HOSTILE, workload=WorkloadKey("Deployment", "shop", "legacy"),
        image="legacy:1.0", node="arm64-a", node_arch="arm64", problem="no matching manifest",
        message=HOSTILE,
    )  # fmt: skip
    fleets = []
    for name, workloads, broken_now in (
        ("prod-eu", [workload("legacy", "legacy:1.0"), workload("web", "web:1"),
                     workload(HOSTILE, HOSTILE)], [broken]),
        ("prod-us", [workload("web", "web:1", replicas=3), workload("vault", "private:2")], []),
    ):  # fmt: skip
        report = build(workloads, answers, {}, broken_now, Pricing(price_per_vcpu_hour=0.04))
        hints = {"docker.io/library/legacy:1.0": TagHint("legacy:1.0", "1.2", ("1.1", "1.2"))}
        fleets.append(ClusterReport(name, dataclasses.replace(report, hints=hints)))
    return combine(fleets)


def test_the_report_renders_its_tables_and_chart_with_no_console_error(tmp_path: Path) -> None:
    """chromium renders the summary, chart, blockers, broken pods and workloads; the hostile
    image's <img> stays text, so nothing is fetched and no console message appears."""
    report = tmp_path / "audit.html"
    report.write_text(page(sample_fleet()), encoding="utf-8")
    loaded = load(report, tmp_path)
    elements = _Elements()
    elements.feed(loaded.dom)
    expected = (
        [],
        {"summary", "clusters", "readiness-chart", "blockers", "broken", "unknown-images",
         "workloads"},
        0,
        0,
        True,
    )  # fmt: skip
    assert expected == (
        loaded.console,
        elements.ids & set(expected[1]),
        elements.tags.get("img", 0),
        elements.tags.get("script", 0),
        elements.tags.get("rect", 0) >= 3,
    )


def test_the_browser_check_sees_a_page_that_loads_from_outside(tmp_path: Path) -> None:
    """The check can fail: an unescaped <img> to another host is a console message."""
    report = tmp_path / "bad.html"
    report.write_text(page(sample_fleet()).replace("<body>", f"<body>{HOSTILE}", 1))
    assert 1 <= len(load(report, tmp_path).console)
