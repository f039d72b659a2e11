"""Validating a SARIF log against the SARIF 2.1.0 JSON schema shipped in tests/data."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = Path(__file__).resolve().parents[1] / "data" / "sarif-schema-2.1.0.json"


@functools.cache
def _validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def schema_errors(log: Any) -> list[str]:
    """Every way `log` breaks the schema, as `path: message` (empty when it is valid)."""
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in sorted(_validator().iter_errors(log), key=lambda e: list(e.absolute_path))
    ]
