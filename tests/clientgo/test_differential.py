"""archfit's kubeconfig and in-cluster loader against client-go's, case by case.

Each case of the seeded corpus (tests/clientgo/corpus.py) is set up twice, in two folders:
once for clientgo-observe (client-go's clientcmd, rest and transport: tests/clientgo/main.go)
and once for archfit's loader (tests/clientgo/observe.py). Both say what they would send: the
requests' URL and credential headers, the TLS trusted and presented, the proxy, the
namespace, or that they refuse. Every disagreement must be listed, with its reason, in
docs/kubeconfig.md; none may be security-relevant.
"""

from __future__ import annotations

import os
import queue
import re
import resource
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from tests import clientgo
from tests.clientgo.corpus import PLUGIN_PATH, Case, Materials, corpus, fill, materialize
from tests.support import tls
from tests.support.prerequisites import built

REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = REPO / "docs" / "kubeconfig.md"
_ROW = re.compile(r"^\| `([a-z0-9-]+)` \|", re.MULTILINE)
FAILED_STAGES = frozenset({"config", "transport", "rotate", "crash"})


@pytest.fixture(scope="module")
def observe_binary() -> Path:
    return built("client-go differential", clientgo.build)


@pytest.fixture(scope="module")
def materials(tmp_path_factory: pytest.TempPathFactory) -> Materials:
    folder = tmp_path_factory.mktemp("pki")
    server = tls.make_serving_cert(folder / "one")
    client = tls.make_client_cert(folder / "client")
    other = tls.make_client_cert(folder / "other", "someone-else")
    return Materials(
        ca=server.ca_bundle.read_bytes(),
        ca2=client.ca_bundle.read_bytes(),
        client_cert=client.cert.read_bytes(),
        client_key=client.key.read_bytes(),
        other_cert=other.cert.read_bytes(),
        other_key=other.key.read_bytes(),
    )


@dataclass(frozen=True)
class Prepared:
    case: Case
    root: Path
    env: dict[str, str]

    def path(self, name: str) -> str:
        return fill(name, {"root": str(self.root)})


def prepare(case: Case, root: Path, side: str) -> Prepared:
    root.mkdir(parents=True)
    values = {"root": str(root), "python": sys.executable, "plugin": str(PLUGIN_PATH)}
    env = materialize(case, root, values)
    env["ARCHFIT_PLUGIN_STATE"] = str(root / f".plugin-{side}")
    return Prepared(case, root, env)


def run_go(binary: Path, prepared: Prepared) -> dict[str, Any]:
    case = prepared.case
    argv = [str(binary), "-mode", case.mode]
    if case.kubeconfig:
        argv += ["-kubeconfig", prepared.path(case.kubeconfig)]
    if case.context:
        argv += ["-context", case.context]
    if case.mode == "in-cluster":
        argv += ["-service-account", str(prepared.root / case.account)]
    for source, target in case.rotate:
        argv += ["-rotate", f"{prepared.root / source}={prepared.root / target}"]
    done = subprocess.run(
        argv,
        env=prepared.env,
        cwd=prepared.root / case.cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        return {"stage": "crash", "error": done.stderr.decode(errors="replace")[-400:]}
    seen: dict[str, Any] = orjson.loads(done.stdout)
    return seen


HUNG_SECONDS = 120
"""A safety net, not a measure: a case archfit is still loading after this long (an alias
bomb read without a limit) is observed as hung, and the batch goes on without it."""
MEMORY_LIMIT = 1 << 30
"""The observing process's address space: a loader that expands an alias bomb fails there
instead of taking the machine's memory."""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


class ArchfitObserver:
    """tests/clientgo/observe.py as a process fed one case at a time, started again after a
    case it did not finish."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes] = queue.Queue()

    def _start(self) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.clientgo.observe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            preexec_fn=_limit_memory,
        )
        self._lines = queue.Queue()
        lines, stdout = self._lines, process.stdout
        assert stdout is not None

        def read() -> None:
            for line in stdout:
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        return process

    def observe(self, prepared: Prepared) -> dict[str, Any]:
        process = self._process = self._process or self._start()
        assert process.stdin is not None
        process.stdin.write(_case_line(prepared))
        process.stdin.flush()
        try:
            seen: dict[str, Any] = orjson.loads(self._lines.get(timeout=HUNG_SECONDS))
        except queue.Empty:
            self.close()
            return {"stage": "crash", "error": f"hung for {HUNG_SECONDS} s"}
        return seen

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            for pipe in (self._process.stdin, self._process.stdout):
                if pipe is not None:
                    pipe.close()
            self._process = None


def _case_line(p: Prepared) -> bytes:
    case = {
        "name": p.case.name,
        "mode": p.case.mode,
        "kubeconfig": p.path(p.case.kubeconfig) if p.case.kubeconfig else "",
        "context": p.case.context,
        "env": p.env,
        "cwd": str(p.root / p.case.cwd),
        "account": str(p.root / p.case.account),
        "rotate": [[str(p.root / s), str(p.root / t)] for s, t in p.case.rotate],
    }
    return orjson.dumps(case) + b"\n"


def run_archfit(prepared: Sequence[Prepared]) -> list[dict[str, Any]]:
    """archfit's observations of every case (tests/clientgo/observe.py)."""
    observer = ArchfitObserver()
    try:
        return [observer.observe(p) for p in prepared]
    finally:
        observer.close()


def comparable(seen: Mapping[str, Any]) -> dict[str, Any]:
    """What is compared: whether it refused, else what it would send and where."""
    if seen.get("stage") in FAILED_STAGES:
        return {"outcome": "refused"}
    found_tls = seen.get("tls")
    if found_tls is not None:
        found_tls = {
            "insecure": found_tls["insecure"],
            "server_name": found_tls["server_name"],
            "ca": "system" if found_tls["system"] else sorted(found_tls["ca"] or []),
            "client_cert": list(found_tls.get("client_cert") or []),
            "client_cert_refused": bool(found_tls.get("client_cert_error")),
        }
    return {
        "outcome": "ok",
        "tls": found_tls,
        "proxy": seen.get("proxy") or "",
        "requests": [
            {"refused": True}
            if request.get("error")
            else {
                "url": request.get("url", ""),
                "headers": {k: list(v) for k, v in sorted(request.get("headers", {}).items())},
                "refused": False,
            }
            for request in seen.get("requests", [])
        ],
        "namespace": "refused" if seen.get("namespace_error") else seen.get("namespace", ""),
    }


def _sends_credentials(seen: Mapping[str, Any]) -> bool:
    tls_seen = seen.get("tls") or {}
    return bool(tls_seen.get("client_cert")) or any(
        request["headers"] and not request["refused"] for request in seen.get("requests", [])
    )


def security_relevant(go: Mapping[str, Any], archfit: Mapping[str, Any]) -> list[str]:
    """Why a disagreement matters for security: archfit sends credentials, trusts a server,
    acts as someone or routes traffic where client-go would not. Refusing where client-go
    works, or another namespace, is not."""
    if archfit["outcome"] == "refused":
        return []
    if go["outcome"] == "refused":
        weaker = (archfit.get("tls") or {}).get("insecure")
        return ["proceeds where client-go refuses"] if _sends_credentials(archfit) or weaker else []
    reasons = []
    go_tls, our_tls = go.get("tls"), archfit.get("tls")
    if (go_tls is None) != (our_tls is None):
        reasons.append("TLS or not")
    elif go_tls is not None and our_tls is not None:
        if our_tls["insecure"] and not go_tls["insecure"]:
            reasons.append("verification off")
        if our_tls["server_name"] != go_tls["server_name"]:
            reasons.append("server name")
        if our_tls["ca"] != go_tls["ca"] and (
            our_tls["ca"] == "system" or not set(our_tls["ca"]) <= set(go_tls["ca"] or [])
        ):
            reasons.append("trusts other CAs")
        if our_tls["client_cert"] and our_tls["client_cert"] != go_tls["client_cert"]:
            reasons.append("another client certificate")
    if archfit["proxy"] != go["proxy"]:
        reasons.append("another proxy")
    for ours, theirs in zip(archfit["requests"], go["requests"], strict=False):
        if ours["refused"] or not ours["headers"]:
            continue
        if theirs["refused"]:
            reasons.append("sends where client-go refuses")
            continue
        if _server(ours["url"]) != _server(theirs["url"]):
            reasons.append("credentials to another server")
        if theirs["refused"] or ours["headers"] != theirs["headers"]:
            reasons.append("other credentials or identity")
    return sorted(set(reasons))


def _server(url: str) -> tuple[str, str, int | None]:
    """Where a request goes: scheme, host and port (the path stays on the same server)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    return parts.scheme, parts.hostname or "", port or {"http": 80, "https": 443}.get(parts.scheme)


def documented() -> set[str]:
    """The cases docs/kubeconfig.md lists as known disagreements."""
    if not DOCUMENTED.exists():
        return set()
    text = DOCUMENTED.read_text(encoding="utf-8")
    begin, end = "<!-- differential:begin -->", "<!-- differential:end -->"
    if begin not in text:
        return set()
    return set(_ROW.findall(text.split(begin, 1)[1].split(end, 1)[0]))


def test_archfit_sends_what_client_go_sends_for_every_case_of_the_corpus(
    observe_binary: Path, materials: Materials, tmp_path: Path
) -> None:
    """0 security-relevant disagreements; every other one is documented, and no more."""
    cases = corpus(materials)
    go_side = [prepare(case, tmp_path / "go" / case.name, "go") for case in cases]
    ours = [prepare(case, tmp_path / "archfit" / case.name, "archfit") for case in cases]
    with ThreadPoolExecutor(max_workers=4) as pool:
        go_seen = list(pool.map(lambda p: run_go(observe_binary, p), go_side))
    archfit_seen = run_archfit(ours)
    assert len(cases) == len(archfit_seen)
    crashed = [c.name for c, seen in zip(cases, go_seen, strict=True) if seen["stage"] == "crash"]
    assert [] == crashed, f"clientgo-observe crashed: {crashed}"
    differing: dict[str, dict[str, Any]] = {}
    for case, theirs, mine in zip(cases, go_seen, archfit_seen, strict=True):
        go, archfit = comparable(theirs), comparable(mine)
        if go != archfit:
            differing[case.name] = {
                "topic": case.topic,
                "security": security_relevant(go, archfit),
                "client-go": theirs,
                "archfit": mine,
            }
    report = tmp_path / "disagreements.json"
    report.write_bytes(orjson.dumps(differing, option=orjson.OPT_INDENT_2))
    security = sorted(name for name, found in differing.items() if found["security"])
    summary = (
        f"{len(cases)} cases, {len(differing)} disagreements, {len(security)} security-relevant"
        f" (details: {report})"
    )
    print(summary)
    assert [] == security, summary
    assert documented() == set(differing), summary
