"""What every benchmark that runs archfit shares: a control plane with N nodes, a registry
with images, `archfit serve` from any checkout, the Go load generator, process sampling.

Real parts only (docs/architecture.md): etcd, kube-apiserver and docker-registry are the
processes the e2e suite runs (tests/e2e, tests/support), and archfit is `python -m extender
serve` in a child process. `source` is a checkout whose `extender` package is put first
on PYTHONPATH, with this venv's Python, so one script measures two commits alike.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psutil
import yaml

from tests.e2e import binaries, cluster
from tests.e2e.archfit import merge
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.processes import Process, http_ok
from tests.objects import node as full_node
from tests.objects import pod as full_pod
from tests.support.images import Image, Pusher, index_entry, put_indexes
from tests.support.process import free_port
from tests.support.registry import RegistryProcess

ROOT = Path(__file__).resolve().parents[1]

GO_BUILD = Path(__file__).resolve().parent / "build-go.sh"
#: archfit runs on this core, the load generator on the other.
ARCHFIT_CORE = 1
CLIENT_CORE = 0
#: The namespace of every benchmark pod; it exists, with its default ServiceAccount.
NAMESPACE = "bench"
PREFIX = "/scheduler"


class BenchError(RuntimeError):
    """A benchmark could not measure what it promised (a wrong answer, a missing part)."""


# -- the control plane -------------------------------------------------------------------


def node_name(index: int) -> str:
    """The name of node `index`; even nodes are amd64, odd ones arm64."""
    return f"node-{index:05d}-{node_arch(index)}"


def node_arch(index: int) -> str:
    """Half the nodes amd64, half arm64, interleaved so any prefix is half and half."""
    return "arm64" if index % 2 else "amd64"


def node_object(index: int) -> dict[str, Any]:
    """Node `index` as a kubelet on a cloud VM reports it (tests/objects.py)."""
    return full_node(node_name(index), node_arch(index))


class Plane:
    """A running etcd + kube-apiserver with `nodes` realistic nodes and the bench namespace."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.plane = ControlPlane(Binaries(binaries.build()), workdir / "controlplane")
        self.nodes = 0

    def start(self) -> Plane:
        """Start the apiserver and create the bench namespace."""
        self.plane.start()
        self.core = cluster.core_api(self.plane.admin_kubeconfig)
        cluster.create_namespace(self.core, NAMESPACE)
        return self

    @property
    def kubeconfig(self) -> Path:
        """An admin kubeconfig for archfit."""
        return Path(self.plane.admin_kubeconfig)

    def grow_to(self, count: int, workers: int = 16) -> float:
        """Create nodes until there are `count`; return the seconds it took.

        Each node is created, then its status written (a create drops status): two
        calls, in a thread pool, since the apiserver, not this client, is the limit.
        """
        started = time.monotonic()
        wanted = range(self.nodes, count)

        def create(index: int) -> None:
            body = node_object(index)
            status = body.pop("status")
            for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
                body["metadata"].pop(key, None)
            self.core.create_node({"apiVersion": "v1", "kind": "Node", **body})  # type: ignore[arg-type]
            self.core.patch_node_status(body["metadata"]["name"], {"status": status})

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(create, wanted))
        self.nodes = max(self.nodes, count)
        return time.monotonic() - started

    def stop(self) -> None:
        """Stop etcd and the apiserver."""
        self.plane.stop()


# -- the registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Images:
    """The three image kinds the per-request cases name."""

    multi: str
    amd64: str
    arm64: str


def push_kinds(registry: RegistryProcess) -> Images:
    """Push a linux/amd64+arm64 index, an amd64-only and an arm64-only image."""
    pusher = Pusher(registry.url)
    multi, _ = pusher.index("bench/multi", "1.0", ["linux/amd64", "linux/arm64"])
    return Images(
        multi.reference,
        pusher.single("bench/amd64", "1.0", "linux/amd64").reference,
        pusher.single("bench/arm64", "1.0", "linux/arm64").reference,
    )


#: The platforms of every image push_many makes: multi-arch, but not arm64, so a node
#: list of one amd64 and one arm64 node tells a resolved image (one kept) from an unknown.
MANY_PLATFORMS = ("linux/amd64", "linux/s390x")
MANY_REPO = "bench/many"


def push_many(registry: RegistryProcess, count: int, workers: int = 16) -> tuple[list[str], float]:
    """Push `count` distinct multi-arch images; return their references and the seconds taken.

    The two platform manifests are pushed once; each image is then one PUT of an index over
    them with its own annotation (so its own digest), under its own tag, on keep-alive
    connections from a thread pool.
    """
    started = time.monotonic()
    pusher = Pusher(registry.url)
    children: list[Image] = [pusher.single(MANY_REPO, None, p) for p in MANY_PLATFORMS]
    entries = [index_entry(c, p) for c, p in zip(children, MANY_PLATFORMS, strict=True)]
    tags = [f"i{index:06d}" for index in range(count)]
    put_indexes(
        lambda: http.client.HTTPConnection(registry.host, timeout=30),
        MANY_REPO,
        entries,
        tags,
        workers=workers,
    )
    references = [f"{registry.host}/{MANY_REPO}:{tag}" for tag in tags]
    return references, time.monotonic() - started


# -- archfit -----------------------------------------------------------------------------


PYCACHE = Path.home() / ".cache" / "archfit-bench" / "pycache"
"""Bytecode for the processes the benchmarks start, outside the checkouts."""


def cluster_settings(kubeconfig: Path, registry_host: str) -> dict[str, Any]:
    """archfit's settings for a bench control plane: enforce, fail-open, the node index and
    pull secrets from `kubeconfig`, one plain-HTTP loopback registry."""
    return {
        "policy": {"mode": "enforce", "failurePolicy": "fail-open"},
        "kubernetes": {
            "mode": "kubeconfig",
            "kubeconfig": str(kubeconfig),
            "nodeIndex": True,
            "pullSecrets": True,
        },
        "registry": {
            "hosts": {registry_host: {"plainHttp": True}},
            "allowedNetworks": ["127.0.0.1/32"],
        },
    }


def source_env(source: Path | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with `source` first on PYTHONPATH, and bytecode on.

    The image runs from compiled bytecode (pip compiles at install); a machine with
    PYTHONDONTWRITEBYTECODE set would otherwise compile every module on every start,
    about 100 ms that no deployment pays.
    """
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = ""  # empty is unset
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(source), env.get("PYTHONPATH", "")) if p
        )
    env.update(extra or {})
    return env


def imported_from(source: Path | None) -> str:
    """Where `extender` comes from under source_env(source): proof of what is measured."""
    done = subprocess.run(
        [sys.executable, "-P", "-c", "import extender; print(extender.__file__)"],
        env=source_env(source),
        capture_output=True,
        text=True,
        check=True,
    )
    return str(Path(done.stdout.strip()).parent.parent)


def git_commit(directory: Path) -> str:
    """The short commit of a checkout, with `+dirty` when it has changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


class ArchfitServer:
    """`python -m extender serve --config FILE` from `source`, optionally pinned to one core."""

    def __init__(
        self,
        workdir: Path,
        settings: Mapping[str, Any],
        *,
        source: Path | None = None,
        core: int | None = ARCHFIT_CORE,
        name: str = "archfit",
        env: Mapping[str, str] | None = None,
        python_flags: Sequence[str] = (),
        python: str = sys.executable,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.settings = merge(
            settings, {"server": {"host": "127.0.0.1", "port": self.port, "prefix": PREFIX}}
        )
        self.config_path = workdir / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(self.settings))
        pin = ["taskset", "-c", str(core)] if core is not None else []
        # -P: `-m` would put the working directory before PYTHONPATH, and with it this
        # checkout's extender before the one under measurement.
        argv = [*pin, python, "-P", *python_flags, "-m", "extender", "serve"]
        argv += ["--config", str(self.config_path)]
        self.process = Process(name, argv, workdir, source_env(source, env))
        self._ps: psutil.Process | None = None

    def start(self, timeout: float = 120.0) -> ArchfitServer:
        """Start archfit and wait until /readyz answers 200."""
        self.process.start()
        url = f"http://127.0.0.1:{self.port}/readyz"
        self.process.wait_ready(lambda: http_ok(url), timeout)
        assert self.process.pid is not None
        self._ps = psutil.Process(self.process.pid)
        return self

    def stop(self) -> None:
        """Stop archfit (safe to call twice)."""
        self.process.stop()

    @property
    def ps(self) -> psutil.Process:
        """The running process, for CPU and memory samples."""
        if self._ps is None:
            raise BenchError("archfit is not running")
        return self._ps

    def url(self, verb: str) -> str:
        """The URL of an extender verb."""
        return f"http://127.0.0.1:{self.port}{PREFIX}/{verb}"

    def cpu_seconds(self) -> float:
        """User + system CPU time of archfit so far, all threads."""
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def memory(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) in bytes: resident now, and the peak since start."""
        return proc_memory(self.ps.pid)

    def metrics(self) -> str:
        """The /metrics text."""
        return get(f"http://127.0.0.1:{self.port}/metrics").decode()

    def metric(self, name: str, labels: str = "") -> float | None:
        """One sample of /metrics (`labels` as written there, `{a="b"}`), or None."""
        pattern = rf"^{re.escape(name + labels)} (\S+)$"
        found = re.search(pattern, self.metrics(), re.MULTILINE)
        return float(found.group(1)) if found else None

    def loads(self, module: str) -> bool:
        """Whether the process has a shared object of `module` mapped (uvloop, say)."""
        return module in Path(f"/proc/{self.ps.pid}/maps").read_text()


@contextlib.contextmanager
def running(server: ArchfitServer) -> Iterator[ArchfitServer]:
    """Start archfit, stop it on the way out."""
    try:
        yield server.start()
    finally:
        server.stop()


def proc_memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in bytes, from /proc/PID/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def proc_cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds a process has used so far, from /proc/PID/stat."""
    # The command name may hold spaces and parentheses; the fields after its last ")" do not.
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    # utime and stime are fields 14 and 15 of stat(5); fields[0] here is field 3.
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def proc_cpu_ns(pid: int) -> int:
    """Nanoseconds a process's threads have run so far, from each one's schedstat: exact where
    /proc/PID/stat counts whole 10 ms ticks (a thread that has exited is not counted: the
    servers measured keep theirs)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended between the listing and the read
    return total


# -- requests ----------------------------------------------------------------------------


def get(url: str) -> bytes:
    """GET url; the body."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=30)
    try:
        connection.request("GET", parts.path)
        response = connection.getresponse()
        return response.read()
    finally:
        connection.close()


class Client:
    """One keep-alive HTTP/1.1 connection to archfit, for checks and warm-ups."""

    def __init__(self, server: ArchfitServer) -> None:
        self.server = server
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)

    def post(self, verb: str, body: bytes) -> tuple[int, Any]:
        """POST an extender verb; (status, decoded JSON answer)."""
        self.connection.request(
            "POST", f"{PREFIX}/{verb}", body, {"Content-Type": "application/json"}
        )
        response = self.connection.getresponse()
        data = response.read()
        return response.status, orjson.loads(data) if data else None

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


def names_args(images: Sequence[str], names: Sequence[str], pod_name: str = "") -> bytes:
    """ExtenderArgs in nodeCacheCapable mode for a pod naming `images`."""
    pod = full_pod(*images, namespace=NAMESPACE, name=pod_name or "api-7d9c6b5f4-x2x7q")
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": list(names)})


def nodes_args(images: Sequence[str], nodes: Sequence[Mapping[str, Any]]) -> bytes:
    """ExtenderArgs with full v1.Node objects (nodeCacheCapable: false)."""
    pod = full_pod(*images, namespace=NAMESPACE)
    return orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}})


def kept(answer: Any) -> int:
    """How many nodes a filter answer keeps, in either mode."""
    if answer.get("NodeNames") is not None:
        return len(answer["NodeNames"])
    return len((answer.get("Nodes") or {}).get("items") or ())


def unique_pod_name() -> str:
    """A pod name nobody used before (log lines and caches must not merge requests)."""
    return f"bench-{uuid.uuid4().hex[:10]}"


# -- the load generator ------------------------------------------------------------------


def loadgen_binary() -> Path:
    """Build bench/loadgen (a no-op when cached) and return the executable."""
    return binaries.run_build_script(GO_BUILD, ("loadgen",), ("loadgen",)) / "loadgen"


Bodies = bytes | Sequence[bytes]
"""One request body, or several sent in turn."""


def load(
    url: str, bodies: Bodies, concurrency: int, seconds: float, ca_file: Path | None = None
) -> dict[str, Any]:
    """POST `bodies` (in turn) to `url` at `concurrency` for `seconds` from the client core;
    an https `url` is trusted by `ca_file`.

    Returns the load generator's JSON: requests, req_per_s, p50/p90/p99/max_ms, non_200.
    """
    with tempfile.TemporaryDirectory(prefix="archfit-bodies-") as tmp:
        paths = []
        for index, body in enumerate([bodies] if isinstance(bodies, bytes) else bodies):
            path = Path(tmp) / f"{index}.json"
            path.write_bytes(body)
            paths.append(str(path))
        argv = ["taskset", "-c", str(CLIENT_CORE), str(loadgen_binary())]
        argv += ["-url", url, "-body", ",".join(paths), "-c", str(concurrency)]
        argv += ["-d", f"{seconds}s"]
        if ca_file is not None:
            argv += ["-cacert", str(ca_file)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"loadgen exited {done.returncode}: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    if result["non_200"] or result["errors"]:
        raise BenchError(f"loadgen saw failures against {url}: {result}")
    return result


def measured_load(
    server: ArchfitServer, verb: str, body: Bodies, concurrency: int, seconds: float
) -> dict[str, Any]:
    """load() plus archfit's CPU per request over the same window, in ms."""
    before = server.cpu_seconds()
    result = load(server.url(verb), body, concurrency, seconds)
    spent = server.cpu_seconds() - before
    result["cpu_ms_per_request"] = spent * 1000 / max(1, result["requests"])
    return result


# -- this machine --------------------------------------------------------------------------


def machine() -> dict[str, str]:
    """What a reader needs to compare figures: cores, CPU, kernel, Python, load."""
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": str(os.cpu_count()),
        "cpu": model,
        "kernel": os.uname().release,
        "python": sys.version.split()[0],
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """Rows as an aligned plain-text table."""
    cells = [[format_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def format_cell(value: Any) -> str:
    """A number with sensible digits, or the value as text; None is a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
