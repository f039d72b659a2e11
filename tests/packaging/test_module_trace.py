"""The pod webhook's decision reads the pod once and does not keep coming back to the modules
it left (bench/module_trace counts it: docs/architecture.md, "The pod's view")."""

from __future__ import annotations

from bench.module_trace import measure

MAIN_RETURNS = 32
"""Returns to a module already left, counted by bench/module_trace before the pod's view."""


def test_a_review_returns_to_modules_it_left_at_most_half_as_often_as_before_the_view() -> None:
    """One warm pod CREATE, traced: half the returns, and core/pods entered once to read it
    and once for the skip rules."""
    trace = measure(None)
    assert (True, 2) == (
        trace["returns_to_a_module_left"] <= MAIN_RETURNS // 2,
        trace["entries"]["extender.core.pods"],
    )
