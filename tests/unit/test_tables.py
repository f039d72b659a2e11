"""`archfit audit` and `archfit inspect` on a terminal 80, 100, 120 and 160 columns wide, and
piped: the verdict and the name always show, an image reference, a digest or a setting to paste
is never cut or broken, a word is broken only when it is wider than its column, and the
columns left out go in the documented order."""

from __future__ import annotations

import dataclasses
import io
import re

import pytest

from extender.audit import output
from extender.audit.pure.fleet_report import ClusterReport, combine
from extender.audit.pure.newer_tags import TagHint
from extender.audit.pure.options import Pricing
from extender.audit.pure.report import build, same_image
from extender.cli import inspect_images as inspect
from extender.core.platforms import Unknown, parse
from extender.core.pods import PullSecretsRef
from extender.registry.netguard import ALLOW_HINT
from extender.registry.pure import reference
from extender.registry.resolver import ImageResolution
from extender.tables import Column, fit
from tests.support.audit_objects import workload

PULL = PullSecretsRef("shop")
AMD64 = frozenset({parse("linux/amd64")})
BOTH = AMD64 | {parse("linux/arm64")}
GATEWAY = "registry.example.com/payments/gateway:2.14.1"
RECONCILER = "quay.io/acme/reconciler:v1.0.0-rc.3"
WIDTHS = (80, 100, 160)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _on_terminal(monkeypatch: pytest.MonkeyPatch, width: int, print_to) -> list[str]:
    """The lines a terminal `width` columns wide shows, without colours."""
    monkeypatch.setenv("COLUMNS", str(width))
    out = _Terminal()
    print_to(out)
    return [line.rstrip() for line in ANSI.sub("", out.getvalue()).splitlines()]


def _report():
    fleet = [
        workload("payments-api-gateway", GATEWAY, "docker.io/library/redis:7.2"),
        workload("checkout-worker-batch-reconciler", RECONCILER, kind="StatefulSet"),
        workload("web", "web:1"),
    ]
    answers = {
        (GATEWAY, PULL): AMD64,
        ("docker.io/library/redis:7.2", PULL): BOTH,
        (RECONCILER, PULL): BOTH,
        ("web:1", PULL): Unknown("401 Unauthorized: the pull secret shop/regcred is expired"),
    }
    return build(fleet, answers, {}, [], Pricing())


def _workload_rows(lines: list[str]) -> list[list[str]]:
    start = lines.index("Workloads")
    rows = []
    for line in lines[start + 3 :]:
        if not line.strip():
            break
        if line.startswith("shop"):
            rows.append(line.split())
    return rows


WORDS = {
    "Deployment", "StatefulSet", "blocked", "ready", "unknown", "payments-api-gateway",
    "checkout-worker-batch-reconciler", "linux/amd64", "401", "Unauthorized:",
}  # fmt: skip


def _broken_words(lines: list[str]) -> set[str]:
    """Words of the report that show only in part: cut without an ellipsis, or split."""
    shown = set(" ".join(lines).split())
    return {word for word in WORDS if any(word.startswith(s) and s != word for s in shown)} - {
        word for word in WORDS if word in shown
    }


@pytest.mark.parametrize("width", WIDTHS)
def test_every_audit_row_shows_its_name_and_verdict_whole_at_common_terminal_widths(
    monkeypatch, width
):
    """Each workload's row names it and its verdict in full, and no line is wider than the
    terminal."""
    lines = _on_terminal(monkeypatch, width, lambda out: output.write(_report(), "table", out))
    rows = _workload_rows(lines)
    expected = [
        ("payments-api-gateway", "blocked"),
        ("checkout-worker-batch-reconciler", "ready"),
        ("web", "unknown"),
    ]
    found = [
        next((name, verdict) for name, verdict in expected if name in row and verdict in row)
        for row in rows
        if any(name in row for name, _ in expected)
    ]
    assert (sorted(expected), 0) == (sorted(found), sum(len(line) > width for line in lines))


@pytest.mark.parametrize("width", WIDTHS)
def test_no_word_of_the_audit_is_broken_across_lines_at_common_terminal_widths(monkeypatch, width):
    """Text wraps at spaces; a word that fits its column is never broken ("Deployme/nt")."""
    lines = _on_terminal(monkeypatch, width, lambda out: output.write(_report(), "table", out))
    assert set() == _broken_words(lines)


def test_at_80_columns_the_audit_names_the_columns_it_left_out(monkeypatch):
    """What does not fit is said, not silently dropped."""
    lines = _on_terminal(monkeypatch, 80, lambda out: output.write(_report(), "table", out))
    notes = [line for line in lines if line.startswith("Left out at 80 columns")]
    assert [
        "Left out at 80 columns: KIND, RUNS ON, PODS NOW, VCPU, MEMORY (a wider terminal,"
    ] == notes


@pytest.mark.parametrize("width", WIDTHS)
def test_the_fleet_audit_shows_every_verdict_and_cuts_a_name_only_with_an_ellipsis(
    monkeypatch, width
):
    """The multi-cluster table (one more column) keeps the same promises."""
    fleet = combine([ClusterReport("production-eu-west-1", _report())])
    lines = _on_terminal(monkeypatch, width, lambda out: output.write(fleet, "table", out))
    rows = [line.split() for line in lines if line.startswith("production-") and " shop " in line]
    names = {"payments-api-gateway", "checkout-worker-batch-reconciler", "web"}
    shown = [
        next(
            word
            for word in row
            if word.rstrip("…") and any(n.startswith(word.rstrip("…")) for n in names)
        )
        for row in rows
    ]
    verdicts = sorted(next(w for w in row if w in ("ready", "blocked", "unknown")) for row in rows)
    assert (["blocked", "ready", "unknown"], set(), [], 0) == (
        verdicts,
        _broken_words(lines),
        [word for word in shown if word not in names and not word.endswith("…")],
        sum(len(line) > width for line in lines),
    )


DIGEST = "sha256:" + "0123456789abcdef" * 4
PLATFORMS = frozenset(
    parse(p)
    for p in ("linux/386", "linux/amd64", "linux/arm/v5", "linux/arm/v7", "linux/arm64",
              "linux/ppc64le", "linux/s390x", "linux/mips64le")
)  # fmt: skip


def _inspect(out: io.StringIO) -> None:
    image = "docker.io/library/nginx:1.27"
    resolution = ImageResolution(
        reference.parse(image), DIGEST, "application/vnd.oci.image.index.v1+json", PLATFORMS, False
    )
    inspect._table([(image, (resolution, None))], out, lambda digest: frozenset())


@pytest.mark.parametrize("width", WIDTHS)
def test_inspect_never_breaks_the_digest(monkeypatch, width):
    """The digest shows whole on one line, so it can be copied, at every width."""
    lines = _on_terminal(monkeypatch, width, _inspect)
    assert (1, 0) == (
        sum(DIGEST in line for line in lines),
        sum(len(line) > width for line in lines),
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_inspect_shows_the_image_and_every_platform(monkeypatch, width):
    """The platforms wrap at spaces; none is broken or left out."""
    lines = _on_terminal(monkeypatch, width, _inspect)
    shown = " ".join(lines).replace(",", " ").split()
    assert ("docker.io/library/nginx:1.27", sorted(map(str, PLATFORMS))) == (
        next(word for word in shown if word.startswith("docker.io")),
        sorted(word for word in shown if word.startswith("linux/")),
    )


@pytest.mark.parametrize(
    ("width", "longest_word", "expected"),
    [
        (60, 8, ((0, 1, 2), (20, 6, 30))),  # everything fits
        (50, 8, ((0, 1, 2), (20, 6, 20))),  # the text wraps down to its shortest
        (50, 25, ((0, 1, 2), (20, 6, 20))),  # then breaks its longest word: nothing is lost
        (40, 8, ((0, 2), (20, 18))),  # the column that matters least goes
        (30, 8, ((0, 2), (10, 18))),  # then the name is cut
        (20, 8, None),  # and then no table fits
    ],
)
def test_a_table_gives_up_width_in_order_text_then_columns_then_names(
    width, longest_word, expected
):
    """Wrap, break long words, leave out, cut: the order in which a narrow terminal takes
    width."""
    columns = [Column("NAME", shortest=10), Column("NUMBER", leave_out=1), Column("WHY", 18, True)]
    layout = fit(columns, [20, 6, 30], width, firm=[20, 6, longest_word])
    assert expected == (None if layout is None else (layout.shown, layout.widths))


def test_a_setting_to_paste_is_never_broken_so_a_column_goes_first():
    """A 25-cell `NAME=value` word in the text: the NUMBER column is left out for it."""
    columns = [Column("NAME", shortest=10), Column("NUMBER", leave_out=1), Column("WHY", 18, True)]
    layout = fit(columns, [20, 6, 30], 50, firm=[20, 6, 25], whole=[0, 0, 25])
    assert ((0, 2), (20, 28)) == (None if layout is None else (layout.shown, layout.widths))


ECR = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/shop/api:1.42"  # 62 characters
DEMO = "127.0.0.1:51775/demo/amd64-only:1.0"
LOOPBACK = "127.0.0.1:51775/demo/reports:7"
SETTING = "(ARCHFIT_REGISTRY__ALLOWED_NETWORKS=host,10.0.0.0/8)"
REFUSED = f"refusing to contact 127.0.0.1: not a public address; {ALLOW_HINT}"


def _issue_report():
    """A blocking 62-character ECR name, a blocking loopback image with a newer-tag action, and
    an image archfit refused to read, whose reason ends in the setting that lifts it."""
    fleet = [
        workload("api", ECR, kind="Deployment"),
        workload("web", DEMO, kind="Deployment"),
        workload("reports", LOOPBACK, kind="CronJob"),
    ]
    answers = {(ECR, PULL): AMD64, (DEMO, PULL): AMD64, (LOOPBACK, PULL): Unknown(REFUSED)}
    report = build(fleet, answers, {}, [], Pricing())
    hints = {same_image(DEMO): TagHint(DEMO, None, ("1.1", "1.2"))}
    return dataclasses.replace(report, hints=hints)


def _lines(monkeypatch, width: int) -> list[str]:
    return _on_terminal(monkeypatch, width, lambda out: output.write(_issue_report(), "table", out))


def _section(lines: list[str], title: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


@pytest.mark.parametrize("width", [80, 120])
def test_no_image_reference_or_setting_is_ever_cut_on_a_terminal(monkeypatch, width):
    """The blocking images stand whole in their table, the refused image's reason keeps the
    setting to paste on one line, and nothing is cut with an ellipsis."""
    lines = _lines(monkeypatch, width)
    blockers = " ".join(_section(lines, "Images that block arm64"))
    assert ([True, True], True, False, 0) == (
        [ECR in blockers, DEMO in blockers],
        any(SETTING in line for line in lines),
        "…" in "\n".join(lines),
        sum(len(line) > width for line in lines),
    )


def test_at_80_columns_the_least_useful_columns_go_first(monkeypatch):
    """MEMORY, VCPU, PODS NOW in that order (docs/audit.md); KIND and RUNS ON stay, and the
    long image wraps in WHY instead."""
    lines = _lines(monkeypatch, 80)
    notes = [line.split(" (")[0] for line in lines if line.startswith("Left out at 80")]
    assert ["Left out at 80 columns: PODS NOW, VCPU, MEMORY"] == notes


def test_at_120_columns_one_long_image_name_leaves_out_no_column(monkeypatch):
    """The 62-character ECR name wraps inside WHY: KIND, RUNS ON, PODS NOW, VCPU and MEMORY
    all stay."""
    lines = _lines(monkeypatch, 120)
    header = _section(lines, "Workloads")[1].split()
    every = ["NAMESPACE", "KIND", "NAME", "ARM64", "RUNS", "ON", "WHY", "PODS", "NOW", "VCPU"]
    left_out = [line for line in lines if line.startswith("Left out")]
    assert ([*every, "MEMORY"], []) == (header, left_out)


def test_piped_the_tables_write_every_cell_in_full(monkeypatch):
    """To a file or a pipe: the whole reason with its setting, every image, every column."""
    out = io.StringIO()
    output.write(_issue_report(), "table", out)
    text = out.getvalue()
    assert ([True, True, True], False, "MEMORY") == (
        [
            REFUSED in text,
            ECR in text,
            any(DEMO in ln and "amd64" in ln for ln in text.split("\n")),
        ],
        "…" in text or "..." in text,
        _section(text.splitlines(), "Workloads")[1].split()[-1],
    )
