"""One removal procedure, in deploy/README.md; every other place that speaks of removing archfit
(the rollback steps, the top-level README, the guides, the chart's NOTES) points to it rather
than keep an order of its own that can drift (one once left out `archfit release --all`, and the
rollback's last step once deleted the objects and left the binding holding every new pod)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = (ROOT / "deploy" / "README.md").read_text()
NOTES = ROOT / "deploy" / "helm" / "archfit" / "templates" / "NOTES.txt"


def _section(heading: str) -> str:
    start = DEPLOY.index(f"\n{heading}\n")
    return DEPLOY[start : DEPLOY.index("\n## ", start + 1)]


def test_the_procedure_stops_holding_and_releases_then_unregisters_then_deletes() -> None:
    """`archfit uninstall`, the check that nothing is held, the extender entry, the rest."""
    text = _section("## Uninstalling")
    steps = [
        "archfit uninstall",
        "kubectl get pods -A -l archfit.io/gated=true",
        "extenders",
        "kubectl delete -k",
    ]
    positions = [text.find(step) for step in steps]
    assert (-1 not in positions, sorted(positions)) == (True, positions)


def test_the_rollbacks_last_step_is_the_removal_procedure_and_deletes_nothing_itself() -> None:
    """Its most complete step links "Uninstalling" and names no `kubectl delete` of its own."""
    rollback = _section("## Roll back")
    last = rollback[rollback.rindex("\n3. ") :].split("\n\n", 1)[0]
    assert ("(#uninstalling)" in last, "kubectl delete -k deploy/" in last) == (True, False)


def test_the_operations_and_webhook_guides_point_to_it_without_an_order_of_their_own() -> None:
    """Each links deploy/README.md#uninstalling; neither spells out "first ... then"."""
    found = {}
    for name in ("operations.md", "webhook.md"):
        text = " ".join((ROOT / "docs" / name).read_text().split())
        found[name] = (
            "../deploy/README.md#uninstalling" in text,
            "MutatingWebhookConfiguration first" in text,
        )
    assert {"operations.md": (True, False), "webhook.md": (True, False)} == found


def test_the_readme_and_the_charts_notes_point_to_it_and_name_its_first_step() -> None:
    """Both name `archfit uninstall` and the deploy/README.md section it belongs to."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    notes = " ".join(NOTES.read_text().split())
    assert {
        "README": ("deploy/README.md#uninstalling" in readme, "`archfit uninstall`" in readme),
        "NOTES": ('deploy/README.md, "Uninstalling"' in notes, "`archfit uninstall`" in notes),
    } == {"README": (True, True), "NOTES": (True, True)}
