"""`archfit audit`: a fleet's readiness to move to arm64, from the images its workloads pull.

`pure/` is the pure part (plain data in, plain data out): `options` is what the command
line asks for, `workloads`, `quantities`, `breakage` and `report` the report's model;
`resolving` looks images up, `output` writes the report (through `render`, `render_fleet` or
`html_report`), `run` (one cluster) and `clusters` (several) wire them together.
"""
