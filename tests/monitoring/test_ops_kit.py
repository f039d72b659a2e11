"""The ops kit in deploy/monitoring: alert rules promtool accepts and fires, a dashboard, runbooks.

Every metric the rules and the dashboard name must be one archfit exports, so a renamed
metric cannot silently blind an alert.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from extender.metrics import Metrics
from tests.support.prerequisites import require_binary

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
RULE = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
OPERATIONS = ROOT / "docs" / "operations.md"
ALERT_TESTS = Path(__file__).with_name("alerts-test.yaml")
METRIC = re.compile(r"\b((?:archfit|process|python)_[a-z_]+)\b")


def promtool() -> str:
    return require_binary("promtool", "prometheus", "MONITORING TESTS")


def rules_file(tmp_path: Path, annotations: bool = True) -> Path:
    """The PrometheusRule's spec as a plain Prometheus rules file.

    `annotations=False` drops them: promtool's unit tests compare annotations too, and
    when an alert fires is a matter of expr, for and labels (runbooks are tested below).
    """
    spec = yaml.safe_load(RULE.read_text())["spec"]
    if not annotations:
        for group in spec["groups"]:
            for rule in group["rules"]:
                rule.pop("annotations", None)
    path = tmp_path / "archfit-rules.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def alerts() -> list[dict[str, Any]]:
    spec = yaml.safe_load(RULE.read_text())["spec"]
    return [rule for group in spec["groups"] for rule in group["rules"] if "alert" in rule]


def exported() -> set[str]:
    """Every series name archfit's /metrics can carry, with the suffixes Prometheus adds."""
    names: set[str] = set()
    for family in Metrics().registry.collect():
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_count", "_sum"),
            "info": ("_info",),
        }.get(family.type, ("",))
        names |= {family.name + suffix for suffix in suffixes}
        names |= {sample.name for sample in family.samples}
    return names


def test_promtool_accepts_the_alert_rules(tmp_path: Path) -> None:
    """`promtool check rules` on the PrometheusRule's groups."""
    done = subprocess.run(
        [promtool(), "check", "rules", str(rules_file(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_the_alerts_fire_on_series_that_should_fire_them_and_not_otherwise(tmp_path: Path) -> None:
    """`promtool test rules`: internal errors, unknown images, 429s, an expiring certificate."""
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    tests["rule_files"] = [str(rules_file(tmp_path, annotations=False))]
    path = tmp_path / "alerts-test.yaml"
    path.write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        [promtool(), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr


def test_every_metric_the_rules_and_the_dashboard_name_is_one_archfit_exports() -> None:
    """A renamed metric must break this test, not silently blind an alert or a panel."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [rule["expr"] for rule in alerts()] + [
        target["expr"] for panel in dashboard["panels"] for target in panel["targets"]
    ]
    named = {name for expr in exprs for name in METRIC.findall(expr)}
    assert len(named) >= 15  # the regex found the metrics, not nothing
    assert set() == named - exported()


def test_the_dashboard_loads_and_every_panel_queries_prometheus() -> None:
    """Valid JSON, a datasource variable, unique panel ids, a query in every panel."""
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(panel["targets"] and panel["targets"][0]["expr"] for panel in dashboard["panels"])
    assert ["datasource"] == [v["name"] for v in dashboard["templating"]["list"]]


def test_every_alert_links_to_a_runbook_section_that_exists() -> None:
    """runbook_url anchors are headings in docs/operations.md, as GitHub renders them."""
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in OPERATIONS.read_text().splitlines()
        if line.startswith("#")
    }
    anchors = {rule["alert"]: rule["annotations"]["runbook_url"].split("#")[1] for rule in alerts()}
    assert {} == {alert: a for alert, a in anchors.items() if a not in headings}
    assert {alert.lower() for alert in anchors} == set(anchors.values())
