"""The audit report as a table, Markdown and CSV: hostile names cannot forge rows or styles."""

import csv
import dataclasses
import io
import json
import re

from extender.audit.output import write
from extender.audit.pure.options import Pricing
from extender.audit.pure.report import Disagreement, LeftOut, build, document
from extender.audit.render import CSV_COLUMNS, headline
from extender.core.platforms import Unknown, parse
from extender.core.pods import PullSecretsRef
from tests.support.audit_objects import workload

PULL = PullSecretsRef("shop")
AMD64 = frozenset({parse("linux/amd64")})
HOSTILE = "evil|row\n| forged | row |[red]x[/red]"


def _report():
    fleet = [workload("api", HOSTILE), workload("web", "web:1")]
    answers = {(HOSTILE, PULL): AMD64, ("web:1", PULL): Unknown("401 Unauthorized")}
    return build(fleet, answers, {}, [], Pricing())


def _render(output):
    out = io.StringIO()
    write(_report(), output, out)
    return out.getvalue()


def test_markdown_escapes_pipes_and_keeps_one_line_per_row():
    """A pipe or newline in an image name stays inside its cell."""
    rows = [line for line in _render("markdown").splitlines() if line.startswith("| shop/")]
    assert [7, 7] == [line.replace("\\|", "").count("|") - 1 for line in rows]


def test_the_table_prints_markup_in_names_literally():
    """rich does not read "[red]" in an image name as a style."""
    assert "[red]x[/red]" in _render("table")


def test_csv_has_one_row_per_workload_with_the_verdict():
    """Spreadsheet columns, one workload a row."""
    rows = list(csv.reader(io.StringIO(_render("csv"))))
    expected = [list(CSV_COLUMNS), ["api", "blocked"], ["web", "unknown"]]
    assert expected == [rows[0], *([row[2], row[3]] for row in rows[1:])]


def test_figures_that_a_missing_right_bounds_say_so_and_name_what_was_not_read():
    """Without Nodes movable vCPU and the saving are upper bounds; without Events broken now
    is a lower bound: the summary marks them, in text and in JSON."""
    fleet = [workload("web", "multi:1", cpu_millis=500, replicas=2)]
    answers = {("multi:1", PULL): AMD64 | {parse("linux/arm64")}}
    left_out = [LeftOut("Node", "403 nodes is forbidden"), LeftOut("Event", "403 forbidden")]
    report = build(fleet, answers, {}, [], Pricing(0.1), left_out=left_out)
    lines = headline(report)
    summary = document(report)["summary"]
    assert (
        "Blocked: 0. Unknown (images that could not be read): 0. Broken now: at least 0.",
        "Estimated saving: at most 14.60 a month, moving at most 1 vCPU at 0.1 a vCPU-hour "
        "and a 20% arm64 discount.",
        "Not read: Nodes (403 nodes is forbidden); where pods run is unknown, so no replica "
        "counts as on arm64 already: movable vCPU and the saving are upper bounds.",
        "Not read: Events (403 forbidden); broken pods are found from their statuses alone: "
        "broken now is a lower bound.",
        [["movableVcpu", "monthlySaving"], ["brokenNow"]],
    ) == (*lines[1:], [item["bounds"] for item in summary["leftOut"]])


def test_with_every_right_no_figure_is_marked():
    """A complete read prints plain figures and an empty leftOut."""
    report = _report()
    assert ([], False) == (
        document(report)["summary"]["leftOut"],
        any("at most" in line or "at least" in line for line in headline(report)),
    )


FORMULAS = ['=HYPERLINK("http://evil")', "+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3"]


def _render_images(output, *images):
    fleet = [workload(f"w{i}", image) for i, image in enumerate(images)]
    answers = {(image, PULL): AMD64 for image in images}
    out = io.StringIO()
    write(build(fleet, answers, {}, [], Pricing()), output, out)
    return out.getvalue()


def test_csv_cells_never_start_a_formula_nor_carry_control_characters():
    """OWASP's rule: a cell starting with = + - @ gets a leading quote; ESC, CR and U+202E
    become spaces."""
    text = _render_images("csv", *FORMULAS, "acme/\x1b[31mred\r\u202eevil:1")
    blockers = [row[5] for row in list(csv.reader(io.StringIO(text)))[1:]]
    assert ["'" + f for f in FORMULAS] + ["acme/ [31mred  evil:1"] == blockers


def test_markdown_renders_no_link_html_or_emphasis_from_a_reason():
    """An unknown image's reason with a link, HTML and emphasis comes out escaped."""
    reason = "[click](http://evil) <img src=x onerror=alert(1)> **bold**"
    fleet = [workload("api", "web:1")]
    report = build(fleet, {("web:1", PULL): Unknown(reason)}, {}, [], Pricing())
    out = io.StringIO()
    write(report, "markdown", out)
    line = next(line for line in out.getvalue().splitlines() if line.startswith("| `web:1`"))
    expected = r"\[click\]\(http\://evil\) \<img src=x onerror=alert\(1\)\> \*\*bold\*\*"
    assert f"| `web:1` | {expected} | 1 |" == line


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_table_on_a_terminal_keeps_its_columns_across_chunks(monkeypatch):
    """2,500 workloads on a terminal: printed in chunks of rows, one header, every row there."""
    monkeypatch.setenv("COLUMNS", "200")
    fleet = [workload(f"w{i:04}", "web:1") for i in range(2500)]
    report = build(fleet, {("web:1", PULL): AMD64}, {}, [], Pricing())
    out = _Terminal()
    write(report, "table", out)
    rows = [line for line in out.getvalue().splitlines() if re.search(r" w\d{4} ", line)]
    headers = [line for line in out.getvalue().splitlines() if "NAMESPACE" in line]
    starts = {re.search(r" w\d{4} ", line).start() for line in rows}
    assert (2500, 1, 1) == (len(rows), len(headers), len(starts))


def _verified(output, disagreements):
    out = io.StringIO()
    write(dataclasses.replace(_report(), disagreements=disagreements), output, out)
    return out.getvalue()


LIE = Disagreement(
    "acme/agent:2.1", "sha256:" + "a" * 64, "index says linux/arm64; its config says linux/amd64"
)


def test_verify_lists_each_contradicted_entry_in_the_table_and_json():
    """The table gets a section naming the entry; JSON gets indexDisagreements."""
    table = _verified("table", (LIE,))
    found = json.loads(_verified("json", (LIE,)))["indexDisagreements"]
    expected = (True, [{"image": LIE.image, "digest": LIE.digest, "problem": LIE.problem}])
    assert expected == (f"{LIE.digest}  {LIE.problem}" in table, found)


def test_json_has_no_index_disagreements_key_unless_verify_was_asked():
    """Without --verify nothing was checked, so the report claims nothing either way."""
    assert ([], False) == (
        json.loads(_verified("json", ()))["indexDisagreements"],
        "indexDisagreements" in json.loads(_render("json")),
    )


def _split_report():
    """web's 4 live pods placed by an arm64 share (one of them finished, one pending)."""
    from extender.audit.pure.workloads import Owners, arch_choices
    from tests.support.audit_objects import running_pod

    fleet = [workload("web", "web:1"), workload("api", "api:1")]
    pods = []
    for index, (side, phase) in enumerate(
        [("arm64", "Running"), ("amd64", "Running"), ("amd64", "Pending"), ("arm64", "Succeeded")]
    ):
        pod = running_pod(f"web-{index}", "n1", "web", "Deployment", phase=phase)
        pod["metadata"]["labels"] = {"archfit.io/arch-choice": side}
        pods.append(pod)
    pods.append(running_pod("api-0", "n1", "api", "Deployment"))  # never placed by a share
    splits = arch_choices(pods, Owners(fleet, []))
    answers = {("web:1", PULL): AMD64, ("api:1", PULL): AMD64}
    return build(fleet, answers, {}, [], Pricing(), splits=splits)


def test_the_share_each_workload_reached_is_in_the_json_and_only_for_split_workloads():
    """Live pods per side and the arm64 share; null for a workload no share placed."""
    workloads = {w["name"]: w["archChoice"] for w in document(_split_report())["workloads"]}
    assert {"web": {"amd64": 2, "arm64": 1, "arm64Share": 0.3333}, "api": None} == workloads


def test_the_table_has_an_arm64_share_section_with_one_row_per_split_workload():
    """A section of its own: the sides' counts and the share reached."""
    out = io.StringIO()
    write(_split_report(), "table", out)
    text = out.getvalue()
    section = text[text.index("arm64 share reached") :].splitlines()
    rows = [line.split() for line in section if line.lstrip().startswith("shop")]
    assert [["shop", "Deployment", "web", "1", "2", "33%"]] == rows
