"""Several clusters in one report, newer-tag hints, pull budgets and the HTML page (pure parts)."""

import csv
import dataclasses
import io
import json

import pytest

from extender.audit.budget import PullBudget, shortfalls
from extender.audit.html_report import page
from extender.audit.output import write
from extender.audit.pure import newer_tags
from extender.audit.pure.fleet_report import ClusterReport, combine, fleet_document, single
from extender.audit.pure.newer_tags import TagHint
from extender.audit.pure.options import Pricing
from extender.audit.pure.report import build
from extender.core.platforms import Unknown, parse
from extender.core.pods import PullSecretsRef
from tests.support.audit_objects import workload

PULL = PullSecretsRef("shop")
AMD64 = frozenset({parse("linux/amd64")})
BOTH = frozenset({parse("linux/amd64"), parse("linux/arm64")})
HOSTILE = '<script>alert(1)</script><img src="http://evil.example/x">'


@pytest.mark.parametrize(
    ("current", "tags", "expected"),
    [
        ("1.0", ["0.9", "1.0", "1.1", "1.2", "2.0", "latest"], ("1.1", "1.2", "2.0")),
        ("1.0", ["1.1", "1.2", "1.10", "1.9"], ("1.2", "1.9", "1.10")),
        ("v1.2.3", ["v1.2.4", "1.2.5", "v1.3.0", "v1.3"], ("v1.2.4", "v1.3.0")),
        (
            "1.2-alpine",
            ["1.3", "1.3-alpine", "1.4-slim", "2.0-alpine"],
            ("1.3-alpine", "2.0-alpine"),
        ),
        ("1.2", ["1.3-rc1", "1.3"], ("1.3",)),
        ("latest", ["1.0", "2.0"], ()),
        ("1.0", [], ()),
    ],
)
def test_newer_tags_are_the_highest_few_of_the_same_shape(current, tags, expected):
    """Same `v`, as many numbers, the same suffix, numerically higher; at most three."""
    assert expected == newer_tags.newer(current, tags)


def test_the_hint_says_which_newer_tag_to_take_or_that_a_rebuild_is_needed():
    """The action reads as advice for each outcome."""
    actions = [
        TagHint("app:1.0", "1.2", ("1.1", "1.2")).action,
        TagHint("app:1.0", None, ("1.1",)).action,
        TagHint("app:latest", None).action,
        TagHint("app:1.0", None, ("1.1",), note="401").action,
    ]
    assert [
        "upgrade to 1.2 (runs on arm64)",
        "no arm64 in newer tags 1.1: rebuild for arm64",
        "rebuild for arm64 (no newer version tag)",
        "newer tags unknown: 401",
    ] == actions


def test_a_budget_refuses_lookups_that_would_go_past_what_a_registry_said_is_left():
    """With 1 pull left, one lookup may run; a second at the same time is refused."""
    budget = PullBudget(lambda host: 1 if host == "registry-1.docker.io" else None)
    with (
        budget.spend("registry-1.docker.io") as first,
        budget.spend("registry-1.docker.io") as second,
        budget.spend("ghcr.io") as elsewhere,
    ):
        outcome = (first, second is not None, elsewhere)
    assert (None, True, None) == outcome


def test_a_shortfall_is_reported_only_where_the_audit_needs_more_than_is_left():
    """Hosts that said nothing, or have enough, are not mentioned."""
    left = {"registry-1.docker.io": 10, "ghcr.io": 500}
    found = shortfalls({"registry-1.docker.io": 40, "ghcr.io": 40, "quay.io": 9}, left.get)
    assert {"registry-1.docker.io": (40, 10)} == found


def _cluster(name, *workloads, answers):
    report = build(list(workloads), answers, {}, [], Pricing(price_per_vcpu_hour=0.04))
    return ClusterReport(name, report)


def _fleet():
    answers = {("legacy:1.0", PULL): AMD64, ("web:1", PULL): BOTH, ("api:2", PULL): BOTH}
    a = _cluster("prod-eu", workload("legacy", "legacy:1.0"), workload("web", "web:1"),
                 answers=answers)  # fmt: skip
    b = _cluster("prod-us", workload("legacy", "docker.io/library/legacy:1.0", replicas=2),
                 workload("api", "api:2"), answers={
                     **answers, ("docker.io/library/legacy:1.0", PULL): AMD64})  # fmt: skip
    return combine([a, b])


def test_the_fleet_total_adds_the_clusters_up_and_counts_a_blocker_per_cluster():
    """Two clusters of two workloads: four in total, one image blocking one in each."""
    fleet = _fleet()
    s = fleet.summary
    blocker = fleet.blockers[0]
    expected = (4, 2, 2, 3, {"prod-eu": 1, "prod-us": 1})
    assert expected == (s.workloads, s.ready, s.blocked, blocker.cpu_millis // 1000,
                        dict(blocker.clusters))  # fmt: skip


def test_every_format_has_a_cluster_column_and_the_fleet_total():
    """JSON, CSV, Markdown and the table name each workload's cluster and sum the fleet."""
    fleet = _fleet()
    outputs = {}
    for output in ("json", "csv", "markdown", "table"):
        out = io.StringIO()
        write(fleet, output, out)
        outputs[output] = out.getvalue()
    document = json.loads(outputs["json"])
    rows = list(csv.DictReader(io.StringIO(outputs["csv"])))
    expected = (
        ["prod-eu", "prod-eu", "prod-us", "prod-us"],
        4,
        ["prod-eu", "prod-us"],
        ["prod-eu", "prod-eu", "prod-us", "prod-us"],
        True,
        True,
    )
    assert expected == (
        [w["cluster"] for w in document["workloads"]],
        document["summary"]["workloads"],
        [c["name"] for c in document["clusters"]],
        [row["cluster"] for row in rows],
        "| fleet total | 4 |" in outputs["markdown"],
        "fleet total" in outputs["table"] and "PER CLUSTER" in outputs["table"],
    )


def test_the_json_of_one_cluster_is_unchanged_by_the_fleet_shape():
    """fleet_document keeps the single-cluster keys, so scripts read both."""
    report = _fleet().clusters[0].report
    keys = set(fleet_document(single(report, "prod-eu"))) - {"clusters"}
    assert set(json.loads(_write(report, "json"))) == keys


def _write(report, output):
    out = io.StringIO()
    write(report, output, out)
    return out.getvalue()


def test_the_html_page_escapes_names_and_loads_nothing_from_outside():
    """A hostile image name is text, not markup; the page has no script and a strict CSP."""
    answers = {(HOSTILE, PULL): AMD64}
    report = build([workload("evil", HOSTILE)], answers, {}, [], Pricing())
    text = page(single(report))
    expected = (False, False, True, True)
    assert expected == (
        "<script" in text,
        'src="http://evil' in text,
        "&lt;script&gt;alert(1)&lt;/script&gt;" in text,
        "default-src 'none'" in text,
    )


def test_the_html_page_has_the_chart_the_blocker_action_and_the_clusters():
    """Readiness bars per cluster and namespace, the newer-tag action, a clusters table."""
    fleet = _fleet()
    hint = {"docker.io/library/legacy:1.0": TagHint("legacy:1.0", "1.2", ("1.2",))}
    hinted = combine(
        [ClusterReport(c.name, dataclasses.replace(c.report, hints=hint)) for c in fleet.clusters]
    )
    text = page(hinted)
    expected = (True, 2, True, True)
    assert expected == (
        'id="readiness-chart"' in text,
        text.count('class="bar-blocked"'),
        "upgrade to 1.2 (runs on arm64)" in text,
        '<table id="clusters">' in text,
    )


def test_an_unknown_image_is_in_its_own_table_with_the_reason():
    """Images nobody could read are listed, escaped, with why."""
    answers = {("web:1", PULL): Unknown("401 <Unauthorized>")}
    report = build([workload("web", "web:1")], answers, {}, [], Pricing())
    assert "401 &lt;Unauthorized&gt;" in page(single(report))
