"""`archfit lint`'s findings written for people (a table that fits 80 columns), for scripts
(JSON), for code scanning (SARIF 2.1.0: GitHub shows each finding on the pull request's line)
and for CI test reports (JUnit XML: GitLab, Jenkins).

Image names and messages come from the manifests, written by anyone who can open a pull
request: table cells are made printable and never read as markup; JSON, SARIF and XML are
written by their encoders, never by pasting text.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO
from xml.etree import ElementTree

import orjson
from rich.console import Console, RenderableType
from rich.text import Text

from extender import __version__
from extender.core.text import cut, printable
from extender.lint.pure.findings import RULES, Level, LintFinding
from extender.lint.pure.manifests import Skipped, WrittenWorkload
from extender.tables import Column, fitted, print_table

TABLE_WIDTH = 80
"""A table written to a file or a CI log fits this many columns (on a terminal: its width)."""
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
HELP_URI = "https://github.com/archfit/archfit/blob/main/docs/lint.md"
_CELL_WIDTH = 300


@dataclass(frozen=True, slots=True)
class Source:
    """One input and what lint found in it."""

    path: str
    """As given on the command line; `-` is standard input."""
    workloads: Sequence[WrittenWorkload]
    findings: Sequence[LintFinding]
    skipped: Sequence[Skipped] = ()

    @property
    def uri(self) -> str:
        """The path as SARIF locates it (`stdin` for `-`)."""
        return "stdin" if self.path == "-" else self.path


def write_findings(sources: Sequence[Source], output: str, fail_on: Level, out: TextIO) -> None:
    """Write every source's findings in one of extender.lint.pure.options.OUTPUTS."""
    if output == "json":
        out.write(
            orjson.dumps(findings_document(sources), option=orjson.OPT_INDENT_2).decode() + "\n"
        )
    elif output == "sarif":
        out.write(orjson.dumps(sarif(sources), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif output == "junit":
        out.write(junit(sources, fail_on))
    else:
        write_table(sources, out)


# --- people ---------------------------------------------------------------------------------

_COLUMNS = (
    Column("LEVEL"),
    Column("LINE"),
    Column("WORKLOAD", shortest=16),
    Column("CONTAINER", shortest=8, leave_out=1),
    Column("FINDING", shortest=24, wrap=True),
)


def write_table(sources: Sequence[Source], out: TextIO) -> None:
    """The findings as a table per input: the terminal's width there, TABLE_WIDTH columns
    elsewhere (a CI log)."""
    if out.isatty():
        print_table(lambda width: _table_parts(sources, width), out)
        return
    buffer = io.StringIO()
    console = Console(file=buffer, width=TABLE_WIDTH, no_color=True, highlight=False)
    for part in _table_parts(sources, TABLE_WIDTH):
        console.print(part)
    out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


def _table_parts(sources: Sequence[Source], width: int) -> Iterator[RenderableType]:
    for source in sources:
        shown = [f for f in source.findings if not f.silenced]
        if shown:
            rows = [
                [
                    Text(str(f.rule.level).upper()),
                    Text(str(f.line)),
                    Text(_cell(f.workload.title)),
                    Text(_cell(f.container.name if f.container else "-")),
                    Text(_cell(f"{f.message} [{f.rule.id}]")),
                ]
                for f in shown
            ]
            yield from fitted(_COLUMNS, rows, width, title=_cell(source.path), rule=False)
            yield Text("")
        for item in source.skipped:
            yield Text(_cell(f"{source.path}:{item.line}: skipped: {item.reason}"))
    yield Text(summary(sources))


def summary(sources: Sequence[Source]) -> str:
    """One line: what was checked and found."""
    workloads = sum(len(s.workloads) for s in sources)
    findings = [f for s in sources for f in s.findings]
    counts = dict.fromkeys(reversed(Level), 0)
    for item in findings:
        if not item.silenced:
            counts[item.rule.level] += 1
    silenced = sum(1 for item in findings if item.silenced)
    said = ", ".join(f"{n} {level}{'s' if n != 1 else ''}" for level, n in counts.items())
    return f"archfit lint: {workloads} workload{'s' if workloads != 1 else ''} checked: {said}" + (
        f" ({silenced} silenced by archfit.io/lint-ignore)" if silenced else ""
    )


def _cell(text: str) -> str:
    return printable(cut(text, _CELL_WIDTH), "?")


# --- scripts --------------------------------------------------------------------------------


def findings_document(sources: Sequence[Source]) -> dict[str, Any]:
    """The findings as JSON-ready data (camelCase keys)."""
    return {
        "summary": summary(sources),
        "findings": [_finding_document(s, f) for s in sources for f in s.findings],
        "skipped": [
            {"file": s.path, "document": item.document, "line": item.line, "reason": item.reason}
            for s in sources
            for item in s.skipped
        ],
    }


def _finding_document(source: Source, finding: LintFinding) -> dict[str, Any]:
    workload = finding.workload
    return {
        "rule": finding.rule.id,
        "level": str(finding.rule.level),
        "file": source.path,
        "document": workload.document,
        "line": finding.line,
        "kind": workload.kind,
        "namespace": workload.namespace,
        "name": workload.name,
        "container": finding.container.name if finding.container else None,
        "image": finding.container.image if finding.container else None,
        "message": finding.message,
        "silenced": finding.silenced,
    }


# --- code scanning --------------------------------------------------------------------------


def sarif(sources: Sequence[Source]) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: each finding a result located at its file, line and
    column, its document and workload as a logical location; a silenced one carries an
    in-source suppression (GitHub hides it)."""
    index = {rule.id: number for number, rule in enumerate(RULES)}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "archfit",
                        "version": __version__,
                        "informationUri": HELP_URI,
                        "rules": [
                            {
                                "id": rule.id,
                                "name": "".join(p.capitalize() for p in rule.id.split("-")),
                                "shortDescription": {"text": rule.summary},
                                "fullDescription": {"text": f"{rule.summary} {rule.fix}"},
                                "help": {"text": rule.fix},
                                "helpUri": f"{HELP_URI}#{rule.id}",
                                "defaultConfiguration": {"level": str(rule.level)},
                            }
                            for rule in RULES
                        ],
                    }
                },
                "artifacts": [{"location": {"uri": s.uri}} for s in sources],
                "results": [
                    _result(s, number, f, index[f.rule.id])
                    for number, s in enumerate(sources)
                    for f in s.findings
                ],
            }
        ],
    }


def _result(source: Source, artifact: int, finding: LintFinding, rule_index: int) -> dict[str, Any]:
    workload = finding.workload
    container = finding.container
    qualified = workload.title + (f"/{container.name}" if container else "")
    result: dict[str, Any] = {
        "ruleId": finding.rule.id,
        "ruleIndex": rule_index,
        "level": str(finding.rule.level),
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": source.uri, "index": artifact},
                    "region": {"startLine": finding.line, "startColumn": finding.column},
                },
                "logicalLocations": [
                    {"name": container.name if container else workload.name,
                     "fullyQualifiedName": qualified, "kind": "object"}
                ],
            }
        ],
        "partialFingerprints": {"archfitFinding/v1": f"{finding.rule.id}:{qualified}"},
        "properties": {
            "document": workload.document,
            "image": container.image if container else None,
        },
    }  # fmt: skip
    if finding.silenced:
        result["suppressions"] = [
            {"kind": "inSource", "justification": "archfit.io/lint-ignore on the workload"}
        ]
    return result


# --- CI test reports ------------------------------------------------------------------------


def junit(sources: Sequence[Source], fail_on: Level) -> str:
    """JUnit XML: a test suite per input, a test case per workload's container (and one for
    the template), failed by the findings at `fail_on` or above; those below are printed in
    its system-out, silenced ones make it skipped."""
    suites = ElementTree.Element("testsuites", name="archfit lint")
    for source in sources:
        suite = ElementTree.SubElement(suites, "testsuite", name=source.path)
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for name, classname, found in _cases(source):
            case = ElementTree.SubElement(suite, "testcase", name=name, classname=classname)
            counts["tests"] += 1
            failing = [f for f in found if not f.silenced and f.rule.level >= fail_on]
            for item in failing:
                failure = ElementTree.SubElement(
                    case, "failure", message=item.message, type=item.rule.id
                )
                failure.text = f"{source.path}:{item.line}: {item.rule.level}: {item.message}"
            counts["failures"] += bool(failing)
            others = [f for f in found if f not in failing]
            if others and all(f.silenced for f in found):
                ElementTree.SubElement(case, "skipped", message="archfit.io/lint-ignore")
                counts["skipped"] += 1
            elif others:
                out = ElementTree.SubElement(case, "system-out")
                out.text = "\n".join(
                    f"{f.rule.level}: {f.message} [{f.rule.id}]" for f in others if not f.silenced
                )
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failures"]))
        suite.set("errors", "0")
        suite.set("skipped", str(counts["skipped"]))
    ElementTree.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        + ElementTree.tostring(suites, encoding="unicode")
        + "\n"
    )


def _cases(source: Source) -> Iterable[tuple[str, str, list[LintFinding]]]:
    """(test name, class name, its findings) per checked container and workload template."""
    by_place: dict[tuple[int, str], list[LintFinding]] = {}
    for item in source.findings:
        key = (id(item.workload), item.container.name if item.container else "")
        by_place.setdefault(key, []).append(item)
    for workload in source.workloads:
        classname = workload.title.replace("/", ".")
        yield "pod template", classname, by_place.get((id(workload), ""), [])
        for container in workload.containers:
            name = f"{'init container' if container.init else 'container'} {container.name}"
            yield name, classname, by_place.get((id(workload), container.name), [])
