"""The repository stands alone: nothing cites documents its maintainers do not have."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"DESIGN\s*§|\(DESIGN[:)]|see DESIGN|\.\./shared/|shared/(DESIGN|STYLE)")


def test_no_tracked_file_cites_the_design_notes_that_live_outside_the_repository():
    """Code and docs cite docs/ or upstream sources, never a DESIGN file nobody ships."""
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
    ).stdout.split()
    offenders = [
        f"{name}:{number}"
        for name in files
        if name.endswith((".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".txt", ".tpl"))
        and name != "tests/unit/test_repository.py"
        for number, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert [] == offenders
