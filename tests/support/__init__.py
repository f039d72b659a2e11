"""Shared test support; each module holds one kind of thing, so import it by what you need.

- `process`: free_port, waiting until a server process is ready, stopping it.
- `prerequisites`: CI detection; a missing real part fails under CI=true, else skips loudly.
- `waiting`: bounded polls (`wait_for`, `wait_for_async`) and `settle`, instead of sleeps.
- `clock`: FakeClock, for code that takes `clock=`.
- `tls`: every test certificate (serving certs via extender.serving.pure.certs; `issue` for others).
- `pull_secrets`: docker config `auth` fields, config JSON and pull Secrets.
- `fakes`: every stand-in for one of archfit's Protocols (held pods, Leases, the watcher's
  calls, node sources, resolvers, the parameter store, steering, an admission policy), each
  subclassing its Protocol and type-checked as strictly as the package. A fake goes here,
  never in a test module.
- `audit_objects`: Workload, ReplicaSet, Job, pod and event JSON for the audit's tests.
- `registry`, `redis`, `proxy`, `tokens`, `faults`, `archfit_process`, `credential_plugin`:
  the real (or deliberately faulty) parts tests run against; `fixtures` starts them.
"""
