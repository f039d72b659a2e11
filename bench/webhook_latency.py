"""What the admission webhook adds to a pod CREATE, against what any webhook adds.

Starts a real etcd, kube-apiserver and registry on loopback (tests/e2e helpers), and
archfit with its webhook registered through the shipped MutatingWebhookConfiguration
(self-managed certificate, called over TLS). Beside it, bench/noop-webhook (Go, standard
library, built by bench/build-go.sh): the floor of a webhook call. Then times `create pod`
through the apiserver, one at a time, round-robin over the variants, one namespace each:

- no webhook call: a namespace no webhook selects (the reference);
- Go do-nothing webhook: allowed, unchanged (what calling any webhook costs);
- Go webhook, archfit's answer: allowed with the very patch and warnings archfit answers
  for the warm pod (what the apiserver's applying that mutation adds, with no archfit);
- archfit, warm cache: every pod names an image archfit has already resolved;
- with `--before DIR`: archfit from another checkout's extender/ (warm), its own listener
  and certificate, registered as a copy of the shipped configuration;
- then, in rounds of their own: archfit, cold cache, beside its own reference. Every pod
  names a new tag in one repository of a registry as production ones are
  (bench/token_registry.py: HTTPS, Bearer tokens), so a cold CREATE waits for one GET of
  the manifest; the first also for the registry's 401 and a token.

It also times archfit's handler alone (POST /mutate over TLS, warm), counts the connections
the apiserver held to each webhook server (one each: no call pays a TLS handshake), and
prints the added latency as medians' differences measured in this one run. "archfit's
share" is archfit's warm row less the Go webhook that gives archfit's answer.

Cost, beside the Go do-nothing webhook (issue 32):

- CPU per 1,000 warm pods: each server's process CPU (its threads' schedstat, in nanoseconds) while
  kube-apiserver sends it `--cpu-pods` CREATEs, in blocks of its own, rotated, each block
  read once the process has gone quiet, so archfit's count holds its admissions and its
  watches' handling of those pods, but not of the other servers' pods (it watches every
  pod in the cluster, as in production); the idle rate is printed beside it. Beside the
  Go floor, bench/aiohttp_webhook: the same do-nothing webhook on archfit's stack (aiohttp,
  uvloop and its TLS, archfit's default loop), so what is archfit's own shows apart from
  what its stack costs;
- RSS (VmRSS) of each server after all the pods;
- one registry round trip: a GET of a manifest (of a tag never read before, as a cold
  lookup's is) on a kept, authenticated TLS connection to the cold rounds' registry, timed
  in the same rounds, so the cold row can be judged against the warm row plus one round
  trip.

What a run on the 2-core bench machine, shared, said (issue 21 goal 6, <= 1 ms warm):
calling any webhook +0.4-0.8 ms, applying archfit's patch +0.4-1.0 ms more, so the Go
webhook with archfit's very answer already adds 0.8-1.9 ms; archfit's share on top
+0.5-1.0 ms. Over one connection, kept; of archfit's ~0.4 ms of CPU per call, aiohttp and
asyncio's TLS take about half (an aiohttp app answering a constant costs 0.2 ms here).

Issue 32, two runs at load 2-2.3: CPU per 1,000 warm pods, Go 0.25-0.33 s, the aiohttp
do-nothing webhook 1.5-1.6x that, archfit 3.1-3.2x (e003127: 3.8-3.9x; its pod watch was
sent every pod, bound or not). The stack's floor leaves archfit's own work well under half
a Go floor to reach 2x. Cold added p50 exceeds warm plus one round trip (about 1.4 ms) by
1.5 ms; archfit's handler alone, on a quiet loop, pays a cold tag the round trip and about
0.2 ms more, so most of the rest is the 2 shared cores' queue (apiserver, archfit, registry).

    .venv/bin/python -m bench.webhook_latency [--pods 100] [--cpu-pods 1000] [--before /work/old]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import ssl
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from kubernetes import client

from bench import harness, in_situ, peers
from bench.token_registry import RoundTrips, TokenRegistry, token_registry
from tests.e2e import binaries, cluster
from tests.e2e.archfit import Archfit, archfit_settings, merge
from tests.e2e.catalog import TempFactory, published
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.processes import Process, http_ok
from tests.e2e.topology import NODES
from tests.e2e.webhook import (
    ARM64_TAINT,
    NAMESPACE,
    PLATFORMS_ANNOTATION,
    WebhookArchfit,
    shipped_configuration,
)
from tests.support.process import free_port
from tests.support.tls import ServingCert, make_serving_cert
from tests.support.waiting import wait_for

#: The namespace label that picks a bench webhook; archfit's own configuration leaves out
#: every namespace that has it, so each namespace is sent to one webhook only.
VARIANT_LABEL = "bench.archfit.io/webhook"
BENCH_CONFIGURATION = "archfit-bench"
REFERENCE = "bench-none"
CPU_BLOCK = 50
"""CREATEs per block of the CPU rounds, each block's CPU read exactly (harness.proc_cpu_ns)."""
QUIET_SECONDS = 0.1
QUIET_NS = 300_000
"""A process that used less CPU than this in QUIET_SECONDS has handled the watch events of its
block (archfit's idle timers and Lease renewals use about 0.3 ms a second)."""
IDLE_SECONDS = 3.0
PROFILED_REQUESTS = 2000
"""Handler-alone requests sampled for `profile_handler`: a few thousand samples."""
# Issue 32's targets.
CPU_TARGET_TIMES_GO = 2.0
RSS_TARGET_MIB = 70.0


@dataclass
class Variant:
    """One row: the namespace its pods go to, and their CREATE times (ms)."""

    name: str
    namespace: str
    image: Callable[[int], str]
    samples: list[float] = field(default_factory=list)


@dataclass
class Server:
    """One webhook server's process: its CPU over its blocks of CREATEs, its idle rate, RSS."""

    name: str
    namespace: str
    """Where its blocks' pods go: a namespace only it is called for."""
    pid: int
    cpu_ns: int = 0
    user_seconds: float = 0.0
    """The kernel's split of the CPU, in 10 ms ticks: only the system share reads it."""
    system_seconds: float = 0.0
    pods: int = 0
    idle_ms_per_second: float = 0.0
    rss_mib: float = 0.0
    image: str | None = None
    """The image its CPU rounds' pods name, when not archfit's warm one (a peer reads only
    the TLS registry)."""

    @property
    def cpu_per_thousand(self) -> float:
        """CPU seconds per 1,000 pods."""
        return self.cpu_ns / 1e6 / max(1, self.pods)

    @property
    def system_share(self) -> float:
        """The kernel's part of that CPU (sockets, TLS records' syscalls, wake-ups)."""
        spent = self.user_seconds + self.system_seconds
        return self.system_seconds / spent if spent else 0.0


@dataclass
class Measured:
    """Everything one run measured."""

    rows: list[Variant]
    cold: list[Variant]
    direct: list[float]
    servers: list[Server]
    round_trips: RoundTrips
    connections: dict[str, int]
    peers: list[str] = field(default_factory=list)
    """The peers' names, in the order given (`--peer`)."""
    profile: dict[str, Any] = field(default_factory=dict)
    """Where archfit's handler-alone requests spend their time (`profile_handler`)."""


def create_ms(core: Any, namespace: str, name: str, ref: str) -> float:
    """Milliseconds for one pod CREATE through kube-apiserver."""
    manifest = cluster.pod_manifest(name, [ref])
    started = time.perf_counter()
    core.create_namespaced_pod(namespace, manifest)
    return (time.perf_counter() - started) * 1000


def review_of(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The AdmissionReview kube-apiserver sends for a CREATE of `pod`."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "object": pod,
        },
    }


async def handler_only(port: int, ca: bytes, body: bytes, count: int) -> list[float]:
    """Milliseconds per POST /mutate straight to archfit over TLS (warm cache)."""
    url = f"https://127.0.0.1:{port}/mutate"
    samples = []
    context = ssl.create_default_context(cadata=ca.decode())
    async with aiohttp.ClientSession() as session:
        for _ in range(count + 5):
            started = time.perf_counter()
            async with session.post(url, data=body, ssl=context) as response:
                await response.read()
            samples.append((time.perf_counter() - started) * 1000)
    return samples[5:]


def archfit_answer(port: int, ca: bytes, body: bytes) -> dict[str, Any]:
    """archfit's AdmissionResponse to `body`, its patch decoded."""
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/mutate",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    context = ssl.create_default_context(cadata=ca.decode())
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:  # noqa: S310
        response: dict[str, Any] = json.load(answer)["response"]
    if "patch" not in response:
        raise harness.BenchError(f"archfit did not mutate the warm pod: {response}")
    return {
        "patch": json.loads(base64.b64decode(response["patch"])),
        "warnings": response.get("warnings") or [],
    }


class NoopWebhook:
    """bench/noop-webhook on a free loopback port, serving TLS with its own CA."""

    def __init__(self, executable: Path, workdir: Path, answer: dict[str, Any]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.cert: ServingCert = make_serving_cert(workdir / "tls")
        answer_file = workdir / "answer.json"
        answer_file.write_text(json.dumps(answer))
        argv = [
            str(executable),
            f"-listen=127.0.0.1:{self.port}",
            f"-cert={self.cert.cert}",
            f"-key={self.cert.key}",
            f"-answer={answer_file}",
        ]
        self.process = Process("noop-webhook", argv, workdir)

    def start(self) -> NoopWebhook:
        """Start it and wait until /readyz answers."""
        self.process.start()
        context = ssl.create_default_context(cafile=str(self.cert.ca_bundle))
        url = f"https://127.0.0.1:{self.port}/readyz"
        self.process.wait_ready(lambda: http_ok(url, context))
        return self

    def answered(self) -> dict[str, int]:
        """Reviews answered so far, by path (its GET /stats)."""
        context = ssl.create_default_context(cafile=str(self.cert.ca_bundle))
        url = f"https://127.0.0.1:{self.port}/stats"
        with urllib.request.urlopen(url, context=context, timeout=5) as response:
            return {path: int(count) for path, count in json.load(response).items()}

    def stop(self) -> None:
        self.process.stop()


def aiohttp_webhook(cert: ServingCert, workdir: Path) -> tuple[Process, int]:
    """bench/aiohttp_webhook on a free loopback port, started and answering."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "bench.aiohttp_webhook",
        f"--port={port}",
        f"--cert={cert.cert}",
        f"--key={cert.key}",
        "--loop=uvloop",  # archfit's own default (server.eventLoop: auto)
    ]
    process = Process("aiohttp-webhook", argv, workdir, harness.source_env(None)).start()
    context = ssl.create_default_context(cafile=str(cert.ca_bundle))
    process.wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/readyz", context))
    return process, port


def bench_hook(name: str, label: str, url: str, ca: bytes) -> dict[str, Any]:
    """A copy of the shipped webhook calling `url`, for namespaces labelled `label` only."""
    hook: dict[str, Any] = shipped_configuration(url)["webhooks"][0]
    hook["name"] = f"{name}.bench.archfit.io"
    hook["clientConfig"] = {"url": url, "caBundle": base64.b64encode(ca).decode()}
    hook["namespaceSelector"] = {"matchLabels": {VARIANT_LABEL: label}}
    return hook


def leave_bench_namespaces_out(admission: client.AdmissionregistrationV1Api) -> None:
    """archfit's own configuration skips the namespaces a bench webhook selects."""
    configuration = admission.read_mutating_webhook_configuration("archfit")
    patch = [
        {
            "op": "add",
            "path": f"/webhooks/{index}/namespaceSelector/matchExpressions/-",
            "value": {"key": VARIANT_LABEL, "operator": "DoesNotExist"},
        }
        for index in range(len(configuration.webhooks))
    ]
    admission.patch_mutating_webhook_configuration("archfit", patch)


def before_archfit(
    source: Path, settings: dict[str, Any], workdir: Path
) -> tuple[Archfit, ServingCert, int]:
    """archfit from `source`'s extender/, serving its webhook with a certificate of ours."""
    cert = make_serving_cert(workdir / "tls")
    port = free_port()
    hook = {
        "enabled": True,
        "host": "127.0.0.1",
        "port": port,
        "certFile": str(cert.cert),
        "keyFile": str(cert.key),
        "archTaints": [{"architecture": "arm64", **ARM64_TAINT}],
        "gate": {"leaseName": "archfit-releaser-before"},
    }
    # Leases of its own: it leads its own watcher and capacity check, which read pods as
    # archfit's do, rather than stand by while archfit holds the one Lease. With one shared
    # capacity Lease, the first to start judged every pending pod of the rounds (each CREATE
    # here makes one) and its CPU per 1,000 pods carried that work alone.
    watcher = {
        "leaseName": "archfit-watcher-before",
        "evidenceConfigMap": "archfit-evidence-before",
    }
    capacity = {"leaseName": "archfit-capacity-before"}
    merged = merge(settings, {"webhook": hook, "watcher": watcher, "capacity": capacity})
    archfit = Archfit(workdir, merged, name="archfit-before", env=harness.source_env(source))
    return archfit.start(), cert, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument(
        "--cpu-pods", type=int, default=1000, help="CREATEs per server in the CPU rounds"
    )
    parser.add_argument("--before", type=Path, help="a checkout whose archfit to measure too")
    parser.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="NAME=BINARY",
        help="another webhook to measure beside archfit (bench/build-peers.sh builds them)",
    )
    parser.add_argument(
        "--peer-arg", action="append", default=[], metavar="NAME=ARG", help="bench/peers.py"
    )
    parser.add_argument(
        "--peer-env", action="append", default=[], metavar="NAME=KEY=VALUE", help="bench/peers.py"
    )
    args = parser.parse_args()
    try:
        specs = peers.parse_peers(args.peer, args.peer_arg, args.peer_env)
    except ValueError as error:
        parser.error(str(error))
    bins = Binaries(binaries.build())
    noop_dir = binaries.run_build_script(harness.GO_BUILD, ("noop-webhook",), ("noop-webhook",))
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = Path(tmp)
        plane = ControlPlane(bins, root / "plane").start()
        try:
            executable = noop_dir / "noop-webhook"
            measured = run(plane, root, args.pods, args.cpu_pods, executable, args.before, specs)
        finally:
            plane.stop()
    report(measured, args.pods, args.before)


def run(
    plane: ControlPlane,
    root: Path,
    pods: int,
    cpu_pods: int,
    noop_executable: Path,
    before: Path | None,
    peer_specs: Sequence[peers.PeerSpec] = (),
) -> Measured:
    """The rows' CREATE times, the handler's alone, and the servers' CPU and RSS."""
    core = cluster.core_api(plane.admin_kubeconfig)
    api = client.ApiClient(client.Configuration())
    admission = client.AdmissionregistrationV1Api(core.api_client)
    for node in NODES:
        cluster.create_node(core, node)
    with published(TempFactory(root)) as images, token_registry(root / "cold") as cold_registry:
        fresh = cold_registry.push_fresh([f"after-{i}" for i in range(pods)])
        fresh_before = cold_registry.push_fresh(
            [f"before-{i}" for i in range(pods)] if before else []
        )
        never_read = cold_registry.push_fresh([f"round-trip-{i}" for i in range(pods + 1)])
        # A peer reads only a TLS registry: its warm image and its new tags are there.
        peer_warm = cold_registry.push_many("peer-warm", 1)[0] if peer_specs else ""
        peer_fresh = {
            spec.name: cold_registry.push_many(f"peer-{spec.name}", pods) for spec in peer_specs
        }
        warm_ref = images.multi.reference
        settings = archfit_settings(plane.admin_kubeconfig, images)
        settings["registry"]["hosts"][cold_registry.host] = {
            "caBundle": str(cold_registry.ca_bundle)
        }
        settings["logging"] = {"level": "warning", "format": "json"}
        hook = WebhookArchfit(plane.admin_kubeconfig, settings, root / "archfit").start()
        stack: list[Callable[[], None]] = [hook.stop]
        try:
            # The webhook harness made archfit-system (outside archfit's namespaceSelector,
            # so its dry-run below is unmutated); pods need its default account.
            core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "default"}})
            for namespace in ("cold", "warm"):
                cluster.create_namespace(core, namespace)
            hook.wait_called("warm", warm_ref)
            ca = hook.ca_bundle()
            # The pod as the apiserver sends it to a webhook (defaulted, tolerations added).
            defaulted = core.create_namespaced_pod(
                NAMESPACE, cluster.pod_manifest("warm", [warm_ref]), dry_run="All"
            )
            body = orjson.dumps(review_of(api.sanitize_for_serialization(defaulted), "warm"))
            answer = archfit_answer(hook.webhook_port, ca, body)
            noop = NoopWebhook(noop_executable, root / "noop", answer).start()
            stack.append(noop.stop)
            noop_url = f"https://127.0.0.1:{noop.port}"
            noop_ca = noop.cert.ca_bundle.read_bytes()
            floor, floor_port = aiohttp_webhook(noop.cert, root / "noop")
            stack.append(floor.stop)
            hooks = [
                bench_hook("allow", "allow", f"{noop_url}/allow", noop_ca),
                bench_hook("answer", "answer", f"{noop_url}/answer", noop_ca),
                bench_hook("aiohttp", "aiohttp", f"https://127.0.0.1:{floor_port}/allow", noop_ca),
            ]
            servers = [
                Server("Go do-nothing webhook", "bench-allow", pid_of(noop.process)),
                Server("aiohttp do-nothing", "bench-aiohttp", pid_of(floor)),
                Server("archfit", "warm", pid_of(hook.archfit.process)),
            ]
            if before is not None:
                old, old_cert, old_port = before_archfit(before, settings, root / "before")
                stack.append(old.stop)
                hooks.append(
                    bench_hook(
                        "before",
                        "before",
                        f"https://127.0.0.1:{old_port}/mutate",
                        old_cert.ca_bundle.read_bytes(),
                    )
                )
                hooks.append(
                    bench_hook(
                        "before-cold",
                        "before-cold",
                        f"https://127.0.0.1:{old_port}/mutate",
                        old_cert.ca_bundle.read_bytes(),
                    )
                )
                servers.append(Server("archfit --before", "bench-before", pid_of(old.process)))
            for spec in peer_specs:
                peer = peers.Peer(
                    spec,
                    root / f"peer-{spec.name}",
                    plane.admin_kubeconfig,
                    cold_registry.ca_bundle,
                ).start()
                stack.append(peer.stop)
                peer_ca = peer.cert.ca_bundle.read_bytes()
                hooks.append(bench_hook(spec.name, spec.name, peer.url, peer_ca))
                hooks.append(
                    bench_hook(f"{spec.name}-cold", f"{spec.name}-cold", peer.url, peer_ca)
                )
                servers.append(
                    Server(spec.name, f"bench-{spec.name}", pid_of(peer.process), image=peer_warm)
                )
            leave_bench_namespaces_out(admission)
            admission.create_mutating_webhook_configuration(
                {"metadata": {"name": BENCH_CONFIGURATION}, "webhooks": hooks}
            )
            stack.append(
                lambda: admission.delete_mutating_webhook_configuration(BENCH_CONFIGURATION)
            )
            # "none": a namespace made as the others are that no webhook selects (the reference).
            labels = [h["namespaceSelector"]["matchLabels"][VARIANT_LABEL] for h in hooks]
            for label in ["none", *labels]:
                core.create_namespace(
                    {"metadata": {"name": f"bench-{label}", "labels": {VARIANT_LABEL: label}}}
                )
                core.create_namespaced_service_account(
                    f"bench-{label}",
                    {"metadata": {"name": "default"}, "automountServiceAccountToken": False},
                )
            wait_configured(core, noop, warm_ref, before is not None)
            for spec in peer_specs:
                wait_peer_called(core, api, spec.name, peer_warm)

            def warm(_: int) -> str:
                return warm_ref

            rows = [
                Variant("no webhook (reference)", REFERENCE, warm),
                Variant("Go do-nothing webhook (allowed, no patch)", "bench-allow", warm),
                Variant("Go webhook, archfit's answer", "bench-answer", warm),
                Variant("archfit, warm cache", "warm", warm),
            ]
            if before is not None:
                rows.append(Variant("archfit --before, warm cache", "bench-before", warm))
            for spec in peer_specs:
                rows.append(
                    Variant(f"{spec.name}, warm cache", f"bench-{spec.name}", lambda _: peer_warm)
                )
            # Round-robin, so a busy moment on the machine hits every variant alike.
            ports = {"archfit": hook.webhook_port, "noop": noop.port}
            if before is not None:
                ports["archfit --before"] = old_port
            seen: dict[str, set[int]] = {name: set() for name in ports}
            for i in range(pods):
                # Each round starts one variant later, so none always follows the same one.
                for row in rotated(rows, i):
                    row.samples.append(create_ms(core, row.namespace, f"p{i}", row.image(i)))
                for name, port in ports.items():
                    seen[name] |= peer_ports(port)
            idle(servers)
            cpu_rounds(core, servers, cpu_pods, warm_ref)
            cold, round_trips = cold_rounds(
                core, cold_registry, pods, (fresh, fresh_before, never_read), peer_fresh
            )
            for server in servers:
                server.rss_mib = harness.proc_memory(server.pid)[0] / 2**20
            check_same_answer(core, api, rows)
            direct = asyncio.run(handler_only(hook.webhook_port, ca, body, pods))
            profile = profile_handler(
                hook.archfit.process,
                root,
                lambda: handler_only(hook.webhook_port, ca, body, PROFILED_REQUESTS),
            )
        finally:
            for stop in reversed(stack):
                stop()
    connections = {name: len(peers) for name, peers in seen.items()}
    names = [spec.name for spec in peer_specs]
    return Measured(rows, cold, direct, servers, round_trips, connections, names, profile)


def profile_handler(
    process: Process, root: Path, requests: Callable[[], Coroutine[Any, Any, list[float]]]
) -> dict[str, Any]:
    """archfit's handler alone again, sampled (bench/in_situ.py): per request, its latency,
    archfit's CPU (by library, perf), and the time archfit's GIL was held (by what, py-spy).
    Latency less archfit's CPU is what a request waits for (the client's own share, here a
    Python aiohttp client, included); GIL time above CPU is time held while off a core."""
    if not in_situ.available():
        return {}
    pid = pid_of(process)
    sampler = in_situ.Sampler(pid, root / "handler.py-spy").start()
    perf = in_situ.PerfSampler(pid, root / "handler.perf")
    perf = perf.start() if in_situ.perf_available() else None
    time.sleep(1.0)  # py-spy attaches
    before = harness.proc_cpu_ns(pid)
    samples = asyncio.run(requests())
    cpu_seconds = (harness.proc_cpu_ns(pid) - before) / 1e9
    stacks = sampler.stop()
    libraries = perf.stop() if perf is not None else {}
    count = len(samples)
    return {
        "requests": count,
        "latency_p50_ms": statistics.median(samples),
        "cpu_ms": 1000 * cpu_seconds / max(1, count),
        "gil": in_situ.breakdown(stacks, cpu_seconds, count).as_row(),
        "cpu_by_library": in_situ.by_library(libraries, cpu_seconds, count),
        "top_frames": in_situ.top_frames(stacks, 10),
    }


def rotated(rows: list[Variant], i: int) -> list[Variant]:
    """`rows`, starting `i` rows later."""
    return rows[i % len(rows) :] + rows[: i % len(rows)]


def pid_of(process: Process) -> int:
    pid = process.pid
    if pid is None:
        raise harness.BenchError(f"{process.name} is not running")
    return pid


@dataclass(frozen=True)
class CpuReading:
    """A process's CPU so far: exact nanoseconds, and the kernel's user/system ticks."""

    ns: int
    user: float
    system: float

    @classmethod
    def of(cls, pid: int) -> CpuReading:
        return cls(harness.proc_cpu_ns(pid), *harness.proc_cpu_times(pid))


def quiet_cpu(pid: int) -> CpuReading:
    """The process's CPU once it used less than QUIET_NS in QUIET_SECONDS (or after 2 s)."""
    last = CpuReading.of(pid)
    deadline = time.monotonic() + 2.0
    while True:
        time.sleep(QUIET_SECONDS)
        now = CpuReading.of(pid)
        if now.ns - last.ns < QUIET_NS or time.monotonic() > deadline:
            return now
        last = now


def idle(servers: list[Server]) -> None:
    """Each server's CPU per second while no pod is created (Leases, timers, GC)."""
    started = {server.pid: quiet_cpu(server.pid).ns for server in servers}
    time.sleep(IDLE_SECONDS)
    for server in servers:
        spent = harness.proc_cpu_ns(server.pid) - started[server.pid]
        server.idle_ms_per_second = spent / 1e6 / IDLE_SECONDS


def cpu_rounds(core: Any, servers: list[Server], pods: int, image: str) -> None:
    """Each server's CPU over `pods` warm CREATEs of its own, in blocks, the order rotated."""
    for block in range(max(1, pods // CPU_BLOCK)):
        for server in servers[block % len(servers) :] + servers[: block % len(servers)]:
            # Quiet first: it watches the other servers' pods too, and that is not this block.
            before = quiet_cpu(server.pid)
            for i in range(CPU_BLOCK):
                manifest = cluster.pod_manifest(f"u{block}-{i}", [server.image or image])
                core.create_namespaced_pod(server.namespace, manifest)
            after = quiet_cpu(server.pid)
            server.cpu_ns += after.ns - before.ns
            server.user_seconds += after.user - before.user
            server.system_seconds += after.system - before.system
            server.pods += CPU_BLOCK


def cold_rounds(
    core: Any,
    registry: TokenRegistry,
    pods: int,
    images: tuple[list[Any], list[Any], list[Any]],
    peer_fresh: Mapping[str, list[str]],
) -> tuple[list[Variant], RoundTrips]:
    """Cold rows, each pod a new tag, beside their reference; and registry round trips,
    timed in the same rounds. `images`: archfit's new tags, --before's, and the round trips';
    `peer_fresh`: each peer's new tags (references).

    Apart, after the warm rounds: a CREATE that follows a cold one meets the apiserver and
    archfit still busy with it (the registry, watch events), so it would blur the warm rows
    it were interleaved with.
    """
    fresh, fresh_before, never_read = images
    cold = [
        Variant("no webhook (reference for cold)", REFERENCE, lambda _: fresh[0].reference),
        Variant("archfit, cold cache (new tag each)", "cold", lambda i: fresh[i].reference),
    ]
    if fresh_before:
        cold.append(
            Variant(
                "archfit --before, cold cache (new tag each)",
                "bench-before-cold",
                lambda i: fresh_before[i].reference,
            )
        )

    for name, references in peer_fresh.items():
        cold.append(
            Variant(
                f"{name}, cold cache (new tag each)",
                f"bench-{name}-cold",
                lambda i, refs=references: refs[i],  # type: ignore[misc]
            )
        )

    def tag(image: Any) -> str:
        return str(image.reference.rpartition(":")[2])

    with registry.round_trips(tag(never_read[0])) as trips:
        for i in range(pods):
            for row in rotated(cold, i):
                row.samples.append(create_ms(core, row.namespace, f"c{i}", row.image(i)))
            trips.time_both(tag(never_read[0]), tag(never_read[i + 1]))
    return cold, trips


def peer_ports(port: int) -> set[int]:
    """The client ports of the established IPv4 connections to local `port` (/proc/net/tcp):
    a new one is a new connection, so a TLS handshake, from kube-apiserver."""
    peers = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if state == "01" and int(local.split(":")[1], 16) == port:
            peers.add(int(remote.split(":")[1], 16))
    return peers


def wait_configured(core: Any, noop: NoopWebhook, image: str, before: bool) -> None:
    """Wait until the apiserver sends each bench namespace to its webhook, and not to
    archfit's: a dry-run CREATE shows who mutated the pod."""
    probe = cluster.pod_manifest("probe", [image])

    def annotations(namespace: str) -> dict[str, str]:
        created = core.create_namespaced_pod(namespace, probe, dry_run="All")
        return dict(created.metadata.annotations or {})

    def ready() -> bool:
        allowed = noop.answered()["allow"]
        if annotations("bench-allow") or noop.answered()["allow"] == allowed:
            return False  # archfit still called there, or the noop not yet
        if PLATFORMS_ANNOTATION not in annotations("bench-answer"):
            return False
        return not before or PLATFORMS_ANNOTATION in annotations("bench-before")

    wait_for(ready, "kube-apiserver to call the bench webhooks")


def wait_peer_called(core: Any, api: client.ApiClient, name: str, image: str) -> None:
    """Wait until a peer's namespace gets pods the peer changed (one real CREATE each try,
    which also fills its cache): its webhook fails open (failurePolicy Ignore), so a peer
    that errors would otherwise be measured as a webhook that does nothing."""
    tries = iter(range(1_000_000))

    def mutated() -> bool:
        pod = cluster.pod_manifest(f"probe-{next(tries)}", [image])
        created = api.sanitize_for_serialization(core.create_namespaced_pod(f"bench-{name}", pod))
        spec = created["spec"]
        return bool(spec.get("affinity") or spec.get("nodeSelector")) or any(
            t.get("key", "").startswith(("k8smultiarcher", "kubernetes.io/arch"))
            for t in spec.get("tolerations") or []
        )

    wait_for(mutated, f"kube-apiserver to call peer {name}, and {name} to mutate a pod")


def check_same_answer(core: Any, api: client.ApiClient, rows: list[Variant]) -> None:
    """The Go webhook's pods came out as archfit's did, or its row measures something else."""

    def mutated(namespace: str) -> Any:
        pod = api.sanitize_for_serialization(core.read_namespaced_pod("p0", namespace))
        return (
            pod["metadata"].get("annotations"),
            pod["spec"].get("affinity"),
            pod["spec"].get("tolerations"),
        )

    if mutated("warm") != mutated("bench-answer"):
        raise harness.BenchError(
            f"the Go webhook's answer differs: {mutated('warm')} != {mutated('bench-answer')}"
        )


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def report(measured: Measured, pods: int, before: Path | None) -> None:
    rows, cold = measured.rows, measured.cold
    p50 = {row.name: summary(row.samples)[0] for row in rows + cold}
    print(f"pod CREATE through kube-apiserver, {pods} pods one at a time, round-robin")
    if before is not None:
        print(f"--before: {harness.git_commit(before)} ({before})")
    print(f"{'variant':<44} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13}")
    added: dict[str, float] = {}
    ref50 = 0.0
    for row in rows + cold:
        mid, p99 = summary(row.samples)
        if row.namespace == REFERENCE:
            ref50, shown = mid, ""  # the rows after it are measured against it
        else:
            added[row.name] = mid - ref50
            shown = f"{mid - ref50:13.2f}"
        print(f"{row.name:<44} {mid:8.2f} {p99:8.2f} {shown:>13}")
    mid, p99 = summary(measured.direct)
    print(f"{'archfit handler alone, warm (TLS POST)':<44} {mid:8.2f} {p99:8.2f}")
    if measured.profile:
        print(render_profile(measured.profile))
    ref50 = p50["no webhook (reference)"]
    floor = p50["Go webhook, archfit's answer"]
    print(
        f"any webhook: +{p50['Go do-nothing webhook (allowed, no patch)'] - ref50:.2f} ms; "
        f"applying archfit's patch: +{floor - p50['Go do-nothing webhook (allowed, no patch)']:.2f}"
        f" ms; archfit's share (warm less Go with its answer): "
        f"{p50['archfit, warm cache'] - floor:+.2f} ms"
    )
    counted = ", ".join(f"{name} {count}" for name, count in measured.connections.items())
    print(f"connections kube-apiserver opened to each webhook server during the rounds: {counted}")
    print()
    servers = measured.servers
    go = servers[0]
    print(f"process cost: each server's own warm CREATEs, {go.pods} each, in blocks of {CPU_BLOCK}")
    head = ("CPU s per 1,000 pods", "x Go", "system", "idle CPU ms/s", "RSS MiB")
    print(f"{'server':<24} {head[0]:>21} {head[1]:>6} {head[2]:>7} {head[3]:>14} {head[4]:>8}")
    for server in servers:
        times = server.cpu_per_thousand / go.cpu_per_thousand if go.cpu_per_thousand else 0.0
        print(
            f"{server.name:<24} {server.cpu_per_thousand:21.2f} {times:6.2f}"
            f" {server.system_share:7.0%} {server.idle_ms_per_second:14.1f} {server.rss_mib:8.1f}"
        )
    trips = measured.round_trips
    round_trip = statistics.median(trips.new)
    print(
        "one registry round trip (GET of a manifest, kept TLS connection, Bearer), median: "
        f"a tag never read {round_trip:.2f} ms (what a cold lookup meets), "
        f"a tag read before {statistics.median(trips.again):.2f} ms"
    )
    print()
    print("targets (issue 32)")
    bound = go.cpu_per_thousand * CPU_TARGET_TIMES_GO
    for server in servers[2:]:
        if not server.name.startswith("archfit"):
            continue
        print(
            target(
                f"{server.name}: CPU per 1,000 warm pods <= {CPU_TARGET_TIMES_GO:g}x Go "
                f"({bound:.2f} s)",
                f"{server.cpu_per_thousand:.2f} s",
                server.cpu_per_thousand <= bound,
            )
        )
        print(
            target(
                f"{server.name}: RSS after the pods <= {RSS_TARGET_MIB:g} MiB",
                f"{server.rss_mib:.1f} MiB",
                server.rss_mib <= RSS_TARGET_MIB,
            )
        )
    for name, warm_row, cold_row in (
        ("archfit", "archfit, warm cache", "archfit, cold cache (new tag each)"),
        (
            "archfit --before",
            "archfit --before, warm cache",
            "archfit --before, cold cache (new tag each)",
        ),
    ):
        if cold_row not in added:
            continue
        bound = added[warm_row] + round_trip
        print(
            target(
                f"{name}: cold added p50 <= warm added p50 + one round trip ({bound:.2f} ms)",
                f"{added[cold_row]:.2f} ms",
                added[cold_row] <= bound,
            )
        )
    if measured.peers:
        print()
        print(peer_comparison(measured, added))


def peer_comparison(measured: Measured, added: Mapping[str, float]) -> str:
    """Issue 43's targets: archfit's warm and cold added p50 and CPU per 1,000 warm pods at
    most every peer's, measured in this run; with the p99s and RSS beside them."""
    cost = {server.name: server for server in measured.servers}
    p99 = {row.name: summary(row.samples)[1] for row in measured.rows + measured.cold}
    reference_p99 = {
        "warm": p99["no webhook (reference)"],
        "cold": p99["no webhook (reference for cold)"],
    }
    names = ["archfit", *measured.peers]
    head = (
        "webhook",
        "warm added p50",
        "warm added p99",
        "cold added p50",
        "cold added p99",
        "CPU s/1,000 pods",
        "RSS MiB",
    )
    lines = [
        "peers, this run (added: less the reference's p50 or p99; ms)",
        f"{head[0]:<20} " + " ".join(f"{h:>16}" for h in head[1:]),
    ]
    figures: dict[str, tuple[float, float, float]] = {}
    for name in names:
        warm_row, cold_row = f"{name}, warm cache", f"{name}, cold cache (new tag each)"
        warm, cold = added.get(warm_row, float("nan")), added.get(cold_row, float("nan"))
        server = cost.get(name)
        cpu = server.cpu_per_thousand if server else float("nan")
        figures[name] = (warm, cold, cpu)
        cells = (
            warm,
            p99.get(warm_row, float("nan")) - reference_p99["warm"],
            cold,
            p99.get(cold_row, float("nan")) - reference_p99["cold"],
            cpu,
            server.rss_mib if server else float("nan"),
        )
        lines.append(f"{name:<20} " + " ".join(f"{c:16.2f}" for c in cells))
    lines.append("targets (issue 43): archfit at most every peer, in this run")
    for index, what in enumerate(("warm added p50", "cold added p50", "CPU per 1,000 warm pods")):
        mine = figures["archfit"][index]
        worst = min(figures[name][index] for name in measured.peers)
        lines.append(
            target(
                f"archfit: {what} <= every peer's (lowest {worst:.2f})",
                f"{mine:.2f} ({mine - worst:+.2f})",
                mine <= worst,
            )
        )
    return "\n".join(lines)


def render_profile(profile: Mapping[str, Any]) -> str:
    """`profile_handler`'s figures, per request."""
    gil = profile["gil"]
    lines = [
        f"archfit handler alone, sampled ({profile['requests']} requests): latency p50 "
        f"{profile['latency_p50_ms']:.3f} ms, archfit's CPU {profile['cpu_ms']:.3f} ms, so "
        f"{profile['latency_p50_ms'] - profile['cpu_ms']:.3f} ms waiting (client included); "
        f"GIL held {gil['covered']:.2f}x the CPU",
        "  CPU by library, ms per request:",
        *(f"  {ms:7.3f}  {name}" for name, ms in profile["cpu_by_library"].items()),
        "  GIL held by what archfit does, ms per request:",
        *(f"  {ms:7.3f}  {name}" for name, ms in gil["ms_per_unit"].items()),
        "  most sampled frames (self):",
        *(f"  {count:7d}  {frame}" for frame, count in profile["top_frames"]),
    ]
    return "\n".join(lines)


def target(what: str, figure: str, met: bool) -> str:
    """One line of the targets: what, the figure measured, and whether it is met."""
    return f"  {what}: {figure}, {'met' if met else 'not met'}"


if __name__ == "__main__":
    main()
