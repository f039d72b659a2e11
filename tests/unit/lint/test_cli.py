"""`archfit lint` from the command line, offline (--platforms): its four outputs, the SARIF
one valid against the SARIF 2.1.0 schema, the exit status by --fail-on, and a platforms file
from `inspect -o json` or `audit -o json`."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from extender.cli.main import main
from extender.lint.render import TABLE_WIDTH
from tests.support.sarif import schema_errors

API = "docker.io/acme/api:1.2"
PROXY = "docker.io/acme/proxy:3"
DIGEST = "sha256:" + "ab" * 32


pytestmark = pytest.mark.usefixtures("fresh_logging")


def _deployment(name: str, *images: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)],
                    **spec,
                }
            }
        },
    }


MANIFESTS = [
    _deployment("trap", API),  # error: may land on arm64
    _deployment("pinned", API, nodeSelector={"kubernetes.io/arch": "amd64"}),  # warning
    _deployment("needless", PROXY, nodeSelector={"kubernetes.io/arch": "amd64"}),  # note
]
INSPECTED = [
    {"image": API, "reference": API, "digest": DIGEST, "platforms": ["linux/amd64"]},
    {"image": "acme/proxy:3", "platforms": ["linux/amd64", "linux/arm64"]},
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    manifests = tmp_path / "rendered.yaml"
    manifests.write_text(yaml.safe_dump_all(MANIFESTS))
    known = tmp_path / "platforms.json"
    known.write_text(json.dumps(INSPECTED))
    return manifests, known


def lint(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["lint", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    ("fail_on", "status"), [("error", 1), ("warning", 1), ("note", 1), (None, 1)]
)
def test_the_exit_status_follows_fail_on(capsys, files, fail_on: str | None, status: int):
    """An error fails every level; the default is error."""
    manifests, known = files
    flags = ["--fail-on", fail_on] if fail_on else []
    assert status == lint(capsys, str(manifests), "--platforms", str(known), *flags)[0]


@pytest.mark.parametrize(("fail_on", "status"), [("error", 0), ("warning", 1), ("note", 1)])
def test_without_errors_the_lower_levels_fail_only_when_asked(
    capsys, tmp_path, files, fail_on, status
):
    """The pinned (warning) and needless (note) workloads alone."""
    _, known = files
    manifests = tmp_path / "calm.yaml"
    manifests.write_text(yaml.safe_dump_all(MANIFESTS[1:]))
    flags = [str(manifests), "--platforms", str(known), "--fail-on", fail_on]
    assert status == lint(capsys, *flags)[0]
    only_notes = tmp_path / "notes.yaml"
    only_notes.write_text(yaml.safe_dump_all(MANIFESTS[2:]))
    note_status = lint(capsys, str(only_notes), "--platforms", str(known), "--fail-on", "warning")
    assert 0 == note_status[0]


def test_the_table_fits_80_columns_and_names_file_line_workload_and_rule(capsys, files):
    """Written to a file (not a terminal): 80 columns at most."""
    manifests, known = files
    _, out, _ = lint(capsys, str(manifests), "--platforms", str(known))
    lines = out.splitlines()
    assert max(map(len, lines)) <= TABLE_WIDTH, out
    assert str(manifests) == lines[0], "each input's findings are titled by its path"
    for rule in ("platform-missing", "no-arm64", "unneeded-arch-pin"):
        assert rule in out.replace(" ", "").replace("\n", ""), rule
    assert "3 workloads checked: 1 error, 1 warning, 1 note" in " ".join(lines)


def test_sarif_is_valid_and_locates_each_finding(capsys, files):
    """SARIF 2.1.0, valid against the schema, each result at its file and image line."""
    manifests, known = files
    status, out, _ = lint(capsys, str(manifests), "--platforms", str(known), "-o", "sarif")
    log = json.loads(out)
    assert [] == schema_errors(log)
    results = log["runs"][0]["results"]
    located = [
        (
            r["ruleId"],
            r["level"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            r["properties"]["document"],
        )
        for r in results
    ]
    text = manifests.read_text().splitlines()
    image_lines = [n for n, line in enumerate(text, 1) if "image:" in line]
    assert [
        ("platform-missing", "error", str(manifests), image_lines[0], 1),
        ("no-arm64", "warning", str(manifests), image_lines[1], 2),
        ("unneeded-arch-pin", "note", str(manifests), located[2][3], 3),
    ] == located
    # The workload's own finding is located where its object starts.
    assert (1, "apiVersion: apps/v1") == (status, text[located[2][3] - 1])


def test_junit_fails_the_containers_at_the_fail_on_level(capsys, files):
    """One test case per container and template; failures at --fail-on or above."""
    manifests, known = files
    _, out, _ = lint(
        capsys, str(manifests), "--platforms", str(known), "-o", "junit", "--fail-on", "warning"
    )
    suite = ElementTree.fromstring(out).find("testsuite")  # noqa: S314 (archfit's own output)
    assert suite is not None
    failed = sorted(
        (case.get("classname"), case.get("name"), case.find("failure").get("type"))  # type: ignore[union-attr]
        for case in suite.iter("testcase")
        if case.find("failure") is not None
    )
    assert [
        ("shop.Deployment.pinned", "container c0", "no-arm64"),
        ("shop.Deployment.trap", "container c0", "platform-missing"),
    ] == failed
    assert ("6", "2") == (suite.get("tests"), suite.get("failures"))


def test_json_lists_every_finding_with_its_place(capsys, files):
    manifests, known = files
    _, out, err = lint(capsys, str(manifests), "--platforms", str(known), "-o", "json")
    document = json.loads(out)
    assert [("platform-missing", "trap", "c0"), ("no-arm64", "pinned", "c0"),
            ("unneeded-arch-pin", "needless", None)] == [
        (f["rule"], f["name"], f["container"]) for f in document["findings"]
    ]  # fmt: skip
    assert "3 workloads checked" in err


def test_a_digest_pinned_manifest_matches_what_inspect_wrote_for_its_tag(capsys, tmp_path, files):
    """The inspect entry's digest makes `name@digest` known: reproducible offline."""
    _, known = files
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(yaml.safe_dump(_deployment("p", f"acme/api@{DIGEST}")))
    _, out, _ = lint(capsys, str(pinned), "--platforms", str(known), "-o", "json")
    assert ["platform-missing"] == [f["rule"] for f in json.loads(out)["findings"]]


def test_an_image_missing_from_the_platforms_file_is_a_finding_not_a_pass(capsys, tmp_path, files):
    _, known = files
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(_deployment("o", "docker.io/acme/unlisted:9")))
    status, out, _ = lint(capsys, str(other), "--platforms", str(known), "-o", "json")
    assert (1, ["platforms-unknown"]) == (status, [f["rule"] for f in json.loads(out)["findings"]])


def test_audit_json_is_a_platforms_file_too_with_its_arm64_hints(capsys, tmp_path, files):
    """`archfit audit -o json` writes imagePlatforms; its blockers' arm64FromTag is the hint."""
    manifests, _ = files
    audit = {
        "summary": {},
        "blockers": [{"image": API, "platforms": ["linux/amd64"], "arm64FromTag": "1.4"}],
        "imagePlatforms": [
            {"image": API, "platforms": ["linux/amd64"]},
            {"image": PROXY, "platforms": ["linux/amd64", "linux/arm64"]},
        ],
    }
    known = tmp_path / "audit.json"
    known.write_text(json.dumps(audit))
    _, out, _ = lint(capsys, str(manifests), "--platforms", str(known), "-o", "json")
    messages = [f["message"] for f in json.loads(out)["findings"] if f["rule"] == "no-arm64"]
    assert [f"{API} has no linux/arm64; arm64 from tag 1.4"] == messages


def test_standard_input_is_read_for_a_dash(capsys, monkeypatch, files):
    manifests, known = files
    monkeypatch.setattr("sys.stdin", io.StringIO(manifests.read_text()))
    status, out, _ = lint(capsys, "-", "--platforms", str(known), "-o", "sarif")
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(out)["runs"][0]["results"]}  # fmt: skip
    assert (1, {"stdin"}) == (status, uris)


@pytest.mark.parametrize(
    ("content", "said"),
    [("kind: [unclosed", "not YAML"), (None, "No such file")],
)
def test_an_input_that_cannot_be_read_exits_2_saying_why(capsys, tmp_path, files, content, said):
    _, known = files
    path = tmp_path / "bad.yaml"
    if content is not None:
        path.write_text(content)
    status, _, err = lint(capsys, str(path), "--platforms", str(known))
    assert (2, True) == (status, said in err), err


def test_a_platforms_file_that_is_neither_inspect_nor_audit_output_exits_2(capsys, tmp_path, files):
    manifests, _ = files
    known = tmp_path / "bad.json"
    known.write_text('{"images": []}')
    status, _, err = lint(capsys, str(manifests), "--platforms", str(known))
    assert (2, True) == (status, "imagePlatforms" in err)


def test_an_unprintable_image_name_cannot_forge_table_rows(capsys, tmp_path, files):
    """A name with a line break and an escape sequence stays on its own row, shown as text."""
    _, known = files
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(yaml.safe_dump(_deployment("h", "acme/x:1\nERROR 99 forged\x1b[31m")))
    _, out, _ = lint(capsys, str(hostile), "--platforms", str(known))
    # The line break is shown as "?" inside the cell: it starts no line of its own.
    assert (True, False) == ("acme/x:1?ERROR" in out, "\x1b" in out)
