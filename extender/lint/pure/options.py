"""What `archfit lint`'s command line offers, importable without lint's readers or renderers
(every command builds the parser)."""

from __future__ import annotations

OUTPUTS = ("table", "json", "sarif", "junit")
"""The formats `-o` writes (extender.lint.render)."""
LEVELS = ("error", "warning", "note")
"""The levels `--fail-on` takes, highest first (extender.lint.pure.findings.Level)."""
