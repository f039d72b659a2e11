"""The Helm chart's values.schema.json: the chart's own values written by hand, and under
`config` archfit's settings as `archfit config --schema` gives them, so the chart refuses what
archfit would refuse at start.

    python -m tests.deploy.chart_schema     # rewrites `config` after a setting changed
"""

from __future__ import annotations

import json
from pathlib import Path

from extender.config.docs import settings_schema

SCHEMA = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "archfit" / "values.schema.json"


def expected() -> str:
    """values.schema.json as it must read: the file with `config` from the settings."""
    schema = json.loads(SCHEMA.read_text())
    description = schema["properties"]["config"].get("description", "")
    schema["properties"]["config"] = {"description": description, **settings_schema()}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    SCHEMA.write_text(expected())
