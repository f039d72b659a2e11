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

    .venv/bin/python -m bench.webhook_cost [--seconds 5] [--source DIR] [--output table|json]
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import orjson
import psutil

from bench import harness
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
    registry: RegistryProcess, cert: ServingCert, level: str, loop: str
) -> dict[str, Any]:
    return {
        "server": {"eventLoop": loop},
        "kubernetes": {"mode": "off"},
        "registry": {
            "hosts": {registry.host: {"plainHttp": True}},
            "allowedNetworks": ["127.0.0.1/32"],
        },
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
                    settings = archfit_settings(registry, cert, level, loop)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--source", type=Path, help="another checkout whose archfit to measure")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    rows = run(args.seconds, args.source)
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print(f"one pod admission per call, concurrency 1, {args.seconds:g} s per server, TLS kept")
    columns = ("server", "calls", "req_per_s", "p50_ms", "cpu_us", "x_go", "own_us", "system")
    harness.print_table(rows, columns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
