"""A client-go credential plugin (ExecCredential) for tests, run as a program.

    exec_plugin.py BEHAVIOUR [ARG...]

It reads KUBERNETES_EXEC_INFO as client-go and archfit write it, and prints an ExecCredential
whose token names what it was given: the run's number (counted in $ARCHFIT_PLUGIN_STATE),
and a digest of the exec info (as canonical JSON), its arguments and $PLUGIN_VAR. Two clients
that ran it the same way, as often, with the same input, see the same tokens.

BEHAVIOUR: token, expired (expirationTimestamp in the past: every request runs it again),
future, cert (client certificate and key from the files ARG1 and ARG2, and no token), fail
(exit 3), garbage (no JSON), nostatus, empty (a status without a token), onlycert,
otherversion (the other apiVersion than the one asked for), yaml (the answer as YAML).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


def _run_number() -> int:
    state = os.environ.get("ARCHFIT_PLUGIN_STATE")
    if not state:
        return 1
    counter = Path(state) / "runs"
    counter.parent.mkdir(parents=True, exist_ok=True)
    runs = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(runs))
    return runs


def main(argv: list[str]) -> int:
    behaviour, args = (argv[0] if argv else "token"), argv[1:]
    info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{}")
    version = info.get("apiVersion") or _VERSIONS[0]
    runs = _run_number()
    seen = json.dumps([info, argv, os.environ.get("PLUGIN_VAR", "")], sort_keys=True)
    token = f"tok-{runs}-{hashlib.sha256(seen.encode()).hexdigest()[:12]}"
    status: dict[str, object] = {"token": token}
    if behaviour == "fail":
        print("the plugin failed on purpose", file=sys.stderr)
        return 3
    if behaviour == "garbage":
        print("this is not an ExecCredential")
        return 0
    if behaviour == "expired":
        status["expirationTimestamp"] = "2001-01-01T00:00:00Z"
    if behaviour == "future":
        status["expirationTimestamp"] = "2999-01-01T00:00:00Z"
    if behaviour == "cert":
        status = {
            "clientCertificateData": Path(args[0]).read_text(),
            "clientKeyData": Path(args[1]).read_text(),
        }
    if behaviour == "onlycert":
        status = {"clientCertificateData": Path(args[0]).read_text()}
    if behaviour == "empty":
        status = {}
    if behaviour == "otherversion":
        version = _VERSIONS[1] if version == _VERSIONS[0] else _VERSIONS[0]
    answer: dict[str, object] = {"apiVersion": version, "kind": "ExecCredential"}
    if behaviour != "nostatus":
        answer["status"] = status
    if behaviour == "yaml":
        print(f"apiVersion: {version}\nkind: ExecCredential\nstatus:\n  token: {token}")
        return 0
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
