"""`archfit audit` and `archfit inspect` on a terminal 80, 100 and 160 columns wide: the
verdict and the name always show, no word is broken, a digest is never broken."""

from __future__ import annotations

import io
import re

import pytest

from extender.audit import output
from extender.audit.fleet_report import ClusterReport, combine
from extender.audit.options import Pricing
from extender.audit.report import build
from extender.cli import inspect_images as inspect
from extender.core.platforms import Unknown, parse
from extender.core.pods import PullSecretsRef
from extender.registry import reference
from extender.registry.resolver import ImageResolution
from extender.tables import Column, fit
from tests.unit.audit_objects import workload

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
    """Text wraps at spaces or is cut with an ellipsis; "Deployme/nt" never happens."""
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
        (50, 25, ((0, 2), (20, 28))),  # but not below its longest word: a column goes first
        (40, 8, ((0, 2), (20, 18))),  # the column that matters least goes
        (30, 8, ((0, 2), (10, 18))),  # then the name is cut
        (20, 8, None),  # and then no table fits
    ],
)
def test_a_table_gives_up_width_in_order_text_then_columns_then_names(
    width, longest_word, expected
):
    """Wrap, leave out, cut: the order in which a narrow terminal takes width."""
    columns = [Column("NAME", shortest=10), Column("NUMBER", leave_out=1), Column("WHY", 18, True)]
    layout = fit(columns, [20, 6, 30], width, firm=[20, 6, longest_word])
    assert expected == (None if layout is None else (layout.shown, layout.widths))
