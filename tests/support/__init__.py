"""Shared test support; each module holds one kind of thing, so import it by what you need.

- `process`: free_port, waiting until a server process is ready, stopping it.
- `prerequisites`: CI detection; a missing real part fails under CI=true, else skips loudly.
- `waiting`: bounded polls (`wait_for`, `wait_for_async`) and `settle`, instead of sleeps.
- `clock`: FakeClock, for code that takes `clock=`.
- `tls`: every test certificate (serving certs via extender.serving.pure.certs; `issue` for others).
- `pull_secrets`: docker config `auth` fields, config JSON and pull Secrets.
- `static_nodes`: StaticNodes, a NodeSource without an API server.
- `function_resolver`: FunctionResolver, a PlatformResolver made of a plain function.
- `registry`, `redis`, `proxy`, `tokens`, `faults`, `archfit_process`, `credential_plugin`:
  the real (or deliberately faulty) parts tests run against; `fixtures` starts them.
"""
