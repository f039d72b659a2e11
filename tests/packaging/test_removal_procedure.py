"""One removal procedure, in deploy/README.md; the other guides point to it rather than keep
an order of their own that can drift (one once left out `archfit release --all`)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = (ROOT / "deploy" / "README.md").read_text()


def _uninstalling() -> str:
    start = DEPLOY.index("## Uninstalling")
    return DEPLOY[start : DEPLOY.index("\n## ", start + 1)]


def test_the_procedure_gates_nothing_new_releases_unregisters_then_deletes() -> None:
    """The webhook configuration, `archfit release --all`, the extender entry, the rest."""
    text = _uninstalling()
    steps = [
        "delete mutatingwebhookconfiguration archfit",
        "archfit release --all",
        "extenders",
        "kubectl delete -k",
    ]
    positions = [text.find(step) for step in steps]
    assert (-1 not in positions, sorted(positions)) == (True, positions)


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
