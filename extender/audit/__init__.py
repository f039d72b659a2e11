"""`archfit audit`: a fleet's readiness to move to arm64, from the images its workloads pull.

`workloads`, `quantities`, `breakage` and `report` are the pure core (plain data in, plain
data out); `resolve` looks images up, `render` writes the report, `run` wires them together.
"""

FORMATS = ("table", "json", "csv", "markdown", "html")
"""The report formats of `archfit audit -o` (audit.render writes each)."""
