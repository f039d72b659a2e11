"""What one pod admission costs archfit's process, alone, beside a webhook that decides nothing.

bench/webhook_latency measures the webhook through kube-apiserver, where each pod's CPU is a
few hundred microseconds read off a process that shares two cores with the apiserver, etcd
and the registry. This takes the apiserver out: the Go load generator (bench/loadgen) posts
AdmissionReviews over kept TLS connections, from core 0, to one server at a time pinned to
core 1, for `--seconds`, and reads the server's CPU time over the run:

- aiohttp do-nothing (bench/aiohttp_webhook): archfit's stack answering allowed, unchanged;
  the floor of any webhook written on aiohttp and asyncio's TLS; and the same on uvloop and
  its compiled TLS, the floor of archfit's uvloop rows;
- archfit (`archfit serve`, webhook on, kubernetes off, a real registry on loopback): each
  review is a new pod of a Deployment, as kube-apiserver sends it after its own defaulting,
  naming a multi-arch image archfit has already resolved (warm), so every call is
  answered with archfit's patch; and the same at log level info (the production default)
  beside the bench's warning.

"archfit's own" is archfit's CPU per call less the floor's on the same loop: what its
decisions, logs and metrics cost above the stack. With `--source DIR`, another checkout's
archfit is measured too, in the same run.

Then the cold rows (issue 32: a never-seen tag should cost one registry round trip and
almost nothing more): archfit against a registry as production ones are
(bench/token_registry: HTTPS, Bearer tokens), each review naming a tag of one repository
never read before, each body sent once (`loadgen -once`), `--cold-tags` of them, in chunks,
the rows' chunks taking turns (every archfit runs at once, one sent reviews at a time);
between the rounds, registry round trips (GETs of never-read manifests on a kept,
authenticated TLS connection, as bench/webhook_latency times them) on the same registry. Beside
them the same archfit answering a tag it has resolved (warm, in turns with the cold chunks),
so "added" is the cold p50 less the warm p50, to be judged against the round trip, and
"extra CPU" is what a cold lookup costs archfit's process above a warm answer.

    .venv/bin/python -m bench.webhook_cost [--seconds 5] [--cold-tags 1500] [--source DIR]
        [--output table|json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil

from bench import harness
from bench.token_registry import TokenRegistry, token_registry
from bench.webhook_latency import archfit_answer
from tests.e2e import binaries
from tests.e2e.processes import Process, http_ok
from tests.support.process import free_port
from tests.support.registry import RegistryProcess
from tests.support.tls import ServingCert, make_serving_cert

BODIES = 64
"""Distinct reviews sent in turn: each a new pod (name, uid), as a Deployment's are."""
NAMESPACE = "shop"
VARIANTS = (("warning", "asyncio"), ("info", "asyncio"), ("warning", "uvloop"))
"""(log level, server.eventLoop) of each archfit row."""


def pod_of(name: str, image: str) -> dict[str, Any]:
    """A Deployment's pod as kube-apiserver hands it to a mutating webhook: defaulted, with
    the ServiceAccount admission's token volume, owned by its ReplicaSet."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "web-5d9c8b7f6-",
            "name": name,
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid4()),
            "labels": {"app": "web", "pod-template-hash": "5d9c8b7f6"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-5d9c8b7f6",
                    "uid": "7f1e2d3c-0000-4000-8000-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "web",
                    "image": image,
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-x7k2p",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {},
    }


def review_body(index: int, image: str) -> bytes:
    """The AdmissionReview of one pod CREATE, as kube-apiserver sends it."""
    name = f"web-5d9c8b7f6-{index:05d}"
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": NAMESPACE,
        "operation": "CREATE",
        "userInfo": {
            "username": "system:serviceaccount:kube-system:replicaset-controller",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        },
        "object": pod_of(name, image),
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )


def archfit_settings(
    hosts: dict[str, Any], cert: ServingCert, level: str, loop: str
) -> dict[str, Any]:
    """archfit with its webhook on, Kubernetes off, reading registries `hosts` (by name)."""
    return {
        "server": {"eventLoop": loop},
        "kubernetes": {"mode": "off"},
        "registry": {"hosts": hosts, "allowedNetworks": ["127.0.0.1/32"]},
        "webhook": {
            "enabled": True,
            "host": "127.0.0.1",
            "port": free_port(),
            "certFile": str(cert.cert),
            "keyFile": str(cert.key),
        },
        "logging": {"level": level, "format": "json"},
    }


def measure(
    name: str, pid: int, url: str, cert: ServingCert, bodies: list[bytes], seconds: float
) -> dict[str, Any]:
    """Load `url` at concurrency 1 with `bodies` in turn; the server's CPU per call."""
    process = psutil.Process(pid)
    harness.load(url, bodies, 1, 1.0, ca_file=cert.ca_bundle)  # warm the connection path
    before = process.cpu_times()
    result = harness.load(url, bodies, 1, seconds, ca_file=cert.ca_bundle)
    after = process.cpu_times()
    spent = (after.user - before.user) + (after.system - before.system)
    calls = max(1, result["requests"])
    return {
        "server": name,
        "calls": result["requests"],
        "req_per_s": result["req_per_s"],
        "p50_ms": result["p50_ms"],
        "cpu_us": spent * 1e6 / calls,
        "system": (after.system - before.system) / spent if spent else 0.0,
    }


def run(seconds: float, source: Path | None) -> list[dict[str, Any]]:
    harness.loadgen_binary()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = Path(tmp)
        cert = make_serving_cert(root / "tls")
        registry = RegistryProcess.start(root / "registry")
        try:
            images = harness.push_kinds(registry)
            bodies = [review_body(index, images.multi) for index in range(BODIES)]
            rows.append(go_floor(root, cert, bodies, seconds))
            for loop in AIOHTTP_FLOOR_LOOPS:
                rows.append(aiohttp_floor(root, cert, bodies, seconds, loop))
            checkouts: list[tuple[str, Path | None]] = [("archfit", None)]
            if source is not None:
                checkouts.append((f"archfit {harness.git_commit(source)}", source))
            for label, checkout in checkouts:
                for level, loop in VARIANTS:
                    hosts = {registry.host: {"plainHttp": True}}
                    settings = archfit_settings(hosts, cert, level, loop)
                    server = harness.ArchfitServer(
                        root / f"archfit-{level}-{loop}", settings, source=checkout
                    )
                    with harness.running(server):
                        hook = settings["webhook"]
                        url = f"https://127.0.0.1:{hook['port']}/mutate"
                        # Resolves the image (the registry's one round trip), and checks
                        # that archfit mutates it: every timed call is a warm mutation.
                        archfit_answer(hook["port"], cert.ca_bundle.read_bytes(), bodies[0])
                        row = measure(label, server.ps.pid, url, cert, bodies, seconds)
                        row["server"] = f"{label}, {loop}, log level {level}"
                        row["event_loop"] = loop
                        rows.append(row)
        finally:
            registry.stop()
    go_us = rows[0]["cpu_us"]
    floor_us = {loop: rows[1 + i]["cpu_us"] for i, loop in enumerate(AIOHTTP_FLOOR_LOOPS)}
    for row in rows:
        row["x_go"] = row["cpu_us"] / go_us
        row["own_us"] = row["cpu_us"] - floor_us[row.get("event_loop", "asyncio")]
    return rows


AIOHTTP_FLOOR_LOOPS = ("asyncio", "uvloop")
"""The loops the aiohttp do-nothing webhook runs on, one row each (asyncio's first)."""


def aiohttp_floor(
    root: Path, cert: ServingCert, bodies: list[bytes], seconds: float, loop: str
) -> dict[str, Any]:
    """bench/aiohttp_webhook on `loop` answering allowed, unchanged: the stack's floor."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.aiohttp_webhook", f"--port={port}", f"--loop={loop}"]
    argv += [f"--cert={cert.cert}", f"--key={cert.key}"]
    pinned = ["taskset", "-c", str(harness.ARCHFIT_CORE), *argv]
    floor = Process(f"aiohttp-webhook-{loop}", pinned, root, harness.source_env(None)).start()
    try:
        context = ssl.create_default_context(cafile=str(cert.ca_bundle))
        floor.wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/readyz", context))
        assert floor.pid is not None
        url = f"https://127.0.0.1:{port}/allow"
        name = "aiohttp do-nothing" + ("" if loop == "asyncio" else f", {loop}")
        row = measure(name, floor.pid, url, cert, bodies, seconds)
        row["event_loop"] = loop
        return row
    finally:
        floor.stop()


def go_floor(root: Path, cert: ServingCert, bodies: list[bytes], seconds: float) -> dict[str, Any]:
    """bench/noop-webhook (Go, standard library) answering allowed, unchanged: the floor."""
    built = binaries.run_build_script(harness.GO_BUILD, ("noop-webhook",), ("noop-webhook",))
    port = free_port()
    argv = ["taskset", "-c", str(harness.ARCHFIT_CORE), str(built / "noop-webhook")]
    argv += [f"-listen=127.0.0.1:{port}", f"-cert={cert.cert}", f"-key={cert.key}"]
    process = Process("noop-webhook", argv, root).start()
    try:
        context = ssl.create_default_context(cafile=str(cert.ca_bundle))
        process.wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/readyz", context))
        assert process.pid is not None
        url = f"https://127.0.0.1:{port}/allow"
        return measure("Go do-nothing", process.pid, url, cert, bodies, seconds)
    finally:
        process.stop()


# -- cold rows: each review names a tag never read before ---------------------------------

COLD_CHUNK = 50
"""Cold calls per loadgen run. The rows' chunks take turns; after each round of them,
COLD_TRIPS_PER_CHUNK registry round trips are timed, so all meet the machine alike."""
COLD_TRIPS_PER_CHUNK = 5
COLD_LOOPS = ("asyncio", "uvloop")
"""server.eventLoop of each cold row: uvloop's TLS and loop are compiled, asyncio's TLS is
Python, and a cold lookup is a TLS request of its own."""


def cold_settings(registry: TokenRegistry, cert: ServingCert, loop: str) -> dict[str, Any]:
    """archfit's settings for the cold rows: the token registry trusted by its CA."""
    hosts = {registry.host: {"caBundle": str(registry.ca_bundle)}}
    return archfit_settings(hosts, cert, "warning", loop)


def load_once(url: str, bodies: list[bytes], ca_file: Path) -> dict[str, Any]:
    """POST each of `bodies` once, in order, at concurrency 1 (loadgen -once), from the client
    core; the load generator's JSON (harness.load sends bodies in turn for a time)."""
    with tempfile.TemporaryDirectory(prefix="archfit-bodies-") as tmp:
        paths = []
        for index, body in enumerate(bodies):
            path = Path(tmp) / f"{index}.json"
            path.write_bytes(body)
            paths.append(str(path))
        argv = ["taskset", "-c", str(harness.CLIENT_CORE), str(harness.loadgen_binary())]
        argv += ["-url", url, "-body", ",".join(paths), "-c", "1", "-once", "-latencies"]
        argv += ["-d", "600s"]
        argv += ["-cacert", str(ca_file)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise harness.BenchError(f"loadgen exited {done.returncode}: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    if result["non_200"] or result["errors"] or result["requests"] != len(bodies):
        raise harness.BenchError(f"loadgen saw failures against {url}: {result}")
    return result


@dataclass
class ColdServer:
    """One archfit of the cold rows, running, and what its chunks measured."""

    label: str
    server: harness.ArchfitServer
    url: str
    tags: list[str]
    warm_bodies: list[bytes]
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"cold": [], "warm": []})
    cpu_seconds: dict[str, float] = field(default_factory=lambda: {"cold": 0.0, "warm": 0.0})
    registry_ports: set[int] = field(default_factory=set)
    """Local ports of its connections to the registry, seen after each chunk: one for the
    whole run when it keeps its connection (and TLS session) to the host."""

    def chunk(self, number: int, cert: ServingCert) -> None:
        """Send chunk `number` of its tags, each once, and as many warm reviews, the two in
        turns; keep each kind's call times and CPU."""
        refs = self.tags[number * COLD_CHUNK : (number + 1) * COLD_CHUNK]
        kinds = {
            "cold": [review_body(number * COLD_CHUNK + i, ref) for i, ref in enumerate(refs)],
            "warm": [self.warm_bodies[i % len(self.warm_bodies)] for i in range(len(refs))],
        }
        order = ("cold", "warm") if number % 2 else ("warm", "cold")
        for kind in order:
            before = self.server.ps.cpu_times()
            result = load_once(self.url, kinds[kind], cert.ca_bundle)
            after = self.server.ps.cpu_times()
            spent = (after.user - before.user) + (after.system - before.system)
            self.cpu_seconds[kind] += spent
            self.latencies[kind] += result["latencies_ms"]
        registry = int(tag_host(self.tags[0]).rpartition(":")[2])
        for connection in self.server.ps.net_connections(kind="tcp"):
            if connection.raddr and connection.raddr.port == registry:
                self.registry_ports.add(connection.laddr.port)

    def row(self, round_trip: float, again: float) -> dict[str, Any]:
        cold, warm = (statistics.median(self.latencies[kind]) for kind in ("cold", "warm"))
        cpu = {
            kind: self.cpu_seconds[kind] * 1e6 / len(self.latencies[kind])
            for kind in ("cold", "warm")
        }
        return {
            "server": self.label,
            "cold_calls": len(self.latencies["cold"]),
            "cold_p50_ms": cold,
            "warm_p50_ms": warm,
            "added_ms": cold - warm,
            "round_trip_ms": round_trip,
            "over_ms": cold - warm - round_trip,
            "cold_cpu_us": cpu["cold"],
            "warm_cpu_us": cpu["warm"],
            "extra_cpu_us": cpu["cold"] - cpu["warm"],
            "trip_again_ms": again,
            "registry_conns": len(self.registry_ports),
        }


def tag_of(reference: str) -> str:
    return reference.rpartition(":")[2]


def tag_host(reference: str) -> str:
    """host:port of an image reference."""
    return reference.partition("/")[0]


def cold_run(cold_tags: int, source: Path | None) -> list[dict[str, Any]]:
    """The cold rows, each beside the same archfit's warm answer on the same registry.

    Every archfit runs at once (only one is sent reviews at a time), and their chunks take
    turns, a registry round trip timed between rounds: a busy moment of the shared machine
    meets every row alike.
    """
    harness.loadgen_binary()
    checkouts: list[tuple[str, Path | None]] = [("archfit", None)]
    if source is not None:
        checkouts.append((f"archfit {harness.git_commit(source)}", source))
    chunks = -(-cold_tags // COLD_CHUNK)
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = Path(tmp)
        cert = make_serving_cert(root / "tls")
        with token_registry(root / "cold") as registry, contextlib.ExitStack() as stack:
            # The registry on the load generator's core, every thread of it (Go's runtime
            # has started several): archfit's core keeps only archfit.
            pid = registry.registry.process.pid
            for task in Path(f"/proc/{pid}/task").iterdir():
                os.sched_setaffinity(int(task.name), {harness.CLIENT_CORE})
            trip_tags = [
                tag_of(ref) for ref in registry.push_many("trip", 1 + chunks * COLD_TRIPS_PER_CHUNK)
            ]
            runs: list[ColdServer] = []
            for position, (label, checkout, loop) in enumerate(
                (label, checkout, loop) for label, checkout in checkouts for loop in COLD_LOOPS
            ):
                settings = cold_settings(registry, cert, loop)
                server = harness.ArchfitServer(
                    root / f"archfit-cold-{position}", settings, source=checkout
                )
                stack.enter_context(harness.running(server))
                url = f"https://127.0.0.1:{settings['webhook']['port']}/mutate"
                tags = registry.push_many(f"cold{position}", cold_tags)
                warm_ref = registry.push_many(f"warm{position}", 1)[0]
                warm_bodies = [review_body(index, warm_ref) for index in range(BODIES)]
                # The first lookup pays the registry's 401, a token, the TLS handshake: a
                # Deployment's first release does, its next ones not.
                archfit_answer(
                    settings["webhook"]["port"], cert.ca_bundle.read_bytes(), warm_bodies[0]
                )
                harness.load(url, warm_bodies, 1, 1.0, ca_file=cert.ca_bundle)  # warm up
                runs.append(ColdServer(f"{label}, {loop}", server, url, tags, warm_bodies))
            left = iter(trip_tags[1:])
            with registry.round_trips(trip_tags[0]) as trips:
                for number in range(chunks):
                    for run in runs[number % len(runs) :] + runs[: number % len(runs)]:
                        run.chunk(number, cert)
                    for _ in range(COLD_TRIPS_PER_CHUNK):
                        trips.time_both(trip_tags[0], next(left))
            round_trip = statistics.median(trips.new)
            again = statistics.median(trips.again)
    return [run.row(round_trip, again) for run in runs]


def print_cold(rows: list[dict[str, Any]], cold_tags: int) -> None:
    print()
    print(
        f"cold: each review names a tag never read ({cold_tags} tags, each sent once, in"
        f" chunks of {COLD_CHUNK}), HTTPS registry with Bearer tokens; warm: the same archfit,"
        " a resolved tag, as many calls, in turns with the cold chunks; the rows' chunks in"
        " turns too"
    )
    print(
        "added = cold p50 - warm p50, to be <= one registry round trip (a GET of a never-read"
        " manifest on a kept, authenticated TLS connection, timed between the rounds); over ="
        " added - round trip; registry_conns: connections archfit held to the registry over"
        " the run (1: kept, one TLS handshake)"
    )
    columns = (
        "server",
        "cold_calls",
        "cold_p50_ms",
        "warm_p50_ms",
        "added_ms",
        "round_trip_ms",
        "over_ms",
        "cold_cpu_us",
        "warm_cpu_us",
        "extra_cpu_us",
        "trip_again_ms",
        "registry_conns",
    )
    harness.print_table(rows, columns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--source", type=Path, help="another checkout whose archfit to measure")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument(
        "--cold-tags", type=int, default=1500, help="never-read tags per cold row (0: none)"
    )
    parser.add_argument("--cold-only", action="store_true", help="measure the cold rows only")
    args = parser.parse_args(argv)
    rows = [] if args.cold_only else run(args.seconds, args.source)
    cold = cold_run(args.cold_tags, args.source) if args.cold_tags > 0 else []
    if args.output == "json":
        print(json.dumps(rows + cold, indent=2))
        return 0
    if rows:
        print(f"one pod admission per call, concurrency 1, {args.seconds:g} s per server, TLS kept")
        columns = ("server", "calls", "req_per_s", "p50_ms", "cpu_us", "x_go", "own_us", "system")
        harness.print_table(rows, columns)
    if cold:
        print_cold(cold, args.cold_tags)
    return 0


if __name__ == "__main__":
    sys.exit(main())
