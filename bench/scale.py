"""How archfit's cost grows with the cluster: nodes and pods created in a real kube-apiserver.

A real etcd and kube-apiserver (tests/e2e/controlplane.py), the shipped admission policy's
CRD, policy and binding, and a registry with the pods' images. Nodes and Pods are created
directly through the API, pods bound by `spec.nodeName` (no scheduler, no kubelet), spread
over NAMESPACES namespaces; each pod is bench/pod_watch's realistic one (a Deployment's pod:
probes, env, volumes, owner, managed fields), its status written through `/status` as a
kubelet would (container statuses, one pod in 50 failing on its platform). The sizes grow
in one control plane: each size adds nodes and pods to the last.

At each size a fresh `archfit serve` starts as shipped, leading (node index, mismatch
watcher, capacity check, the admission policy's publisher and its pod index, the webhook on
its own TLS listener), and the bench measures:

- `ready_s`: exec to the first 200 from /readyz; `listed_s`: to the policy's pod index
  holding every pod (`archfit_policy_pods_indexed`);
- `rss_mib` once it is quiet; `peak_mib`: VmHWM, its highest RSS through the first list,
  the two relists and the patches below;
- `relist`: kube-apiserver is restarted, so every watch meets a cache that starts after its
  version (410) and lists again, as after an apiserver upgrade; `relist_cpu_us_per_pod` is
  archfit's CPU from the restart until it is quiet again, per pod, less its idle rate
  (`idle_cpu_ms_per_s`: Lease renewals);
- `event_cpu_us`: archfit's CPU per pod event, over PATCHES label patches (a label every
  controller might change: archfit's watches see a MODIFIED pod they have no need to act on);
  both CPU figures are taken with nothing else asking archfit for anything;
- then a second relist and round of patches, with probes: `stall_*_ms` is the longest round
  trip of a GET /healthz sent every 10 ms on a kept connection, through the start, that
  relist and those patches (a loop that cannot run for X ms answers up to X ms late; a
  loaded machine adds its own queue to every figure); `webhook_relist_p99_ms` of POST
  /mutate (warm pod, TLS, kept connection, every 20 ms) during that relist, against
  `webhook_quiet_p99_ms` in WEBHOOK_QUIET_CALLS calls just before it; `gc_*_ms`: in the same
  three windows, the bucket of archfit_gc_pause_seconds its longest garbage collection fell
  in (a pause of that bound at most; `gc_max_ms` the largest of the three), so a stall can
  be told from a collection (None for a checkout without the metric);
- `relist_profile`, `events_profile` (JSON only): the relist and the patches sampled by
  bench/in_situ.py;
- `param_kib` and `param_images`: the ImagePlatforms parameter's size and entries; `publish_s`:
  exec to its first publish that holds every image.

Printed as a table, with the slope per 10,000 pods between the two largest sizes of the same
node count (where only pods grow) and whether a figure grows faster than the pods do.
Full run, the three sizes: creating 100,000 pods and their statuses dominates (about
25-40 minutes on 2 shared cores); `--quick`: two small sizes, a few minutes. Not part of CI.

    .venv/bin/python -m bench.scale [--quick] [--sizes 1000x10000 5000x50000 ...]
        [--patches 5000] [--no-statuses] [--output table|json] [--before DIR]

`--before DIR` measures DIR's archfit too (DIR first on PYTHONPATH), at each size, on the same
cluster, just before this one's: a ratio read off one run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench import harness, in_situ, pod_watch
from bench.webhook_latency import review_of
from tests.e2e import binaries
from tests.e2e.archfit import Archfit
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.policy import AdmissionPolicy
from tests.support.images import Pusher
from tests.support.process import free_port
from tests.support.registry import RegistryProcess
from tests.support.tls import make_serving_cert

SIZES = ((1000, 10_000), (5000, 50_000), (5000, 100_000))
QUICK_SIZES = ((200, 2000), (500, 5000))
NAMESPACES = 100
APPS = 300
"""Distinct images the pods name (pod_watch's apps), each pushed to the local registry."""
PATCHES = 5000
QUICK_PATCHES = 500
WORKERS = 8
"""Threads creating objects through the API (not while measuring)."""
QUIET_SECONDS = 1.0
QUIET_CPU_SECONDS = 0.03
"""archfit is quiet once it used less than this much CPU in QUIET_SECONDS above its idle
rate with the probes running (measured once it first went quiet)."""
HEALTH_PACE_SECONDS = 0.01
"""A GET /healthz every 10 ms: a stall of X ms shows as a round trip of at least X - 10."""
WEBHOOK_PACE_SECONDS = 0.02
SETTLE_TIMEOUT_SECONDS = 600.0
RESTART_READY_SECONDS = 600.0
"""kube-apiserver restarted with 100,000 pods in etcd while archfit lists them again took more
than the e2e tests' minute to be ready on 2 cores."""
WEBHOOK_QUIET_CALLS = 400
COLUMNS = (
    "nodes",
    "pods",
    "ready_s",
    "listed_s",
    "publish_s",
    "rss_mib",
    "peak_mib",
    "relist_s",
    "relist_cpu_us_per_pod",
    "idle_cpu_ms_per_s",
    "event_cpu_us",
    "stall_start_ms",
    "stall_relist_ms",
    "stall_events_ms",
    "gc_max_ms",
    "webhook_quiet_p99_ms",
    "webhook_relist_p99_ms",
    "param_kib",
    "param_images",
)


def pod_body(index: int, nodes: int, host: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod to create (no server-set fields) and its status, from pod_watch's pod."""
    full = pod_watch.pod(index, nodes, 1)
    meta = full["metadata"]
    app = f"app-{index % APPS}"
    image = f"{host}/bench/{app}:1.0"
    spec = full["spec"]
    spec["containers"][0]["image"] = image
    spec["nodeName"] = f"scale-node-{index % nodes}"
    spec["serviceAccountName"] = "default"
    status = full["status"]
    status["containerStatuses"][0]["image"] = image
    if status["containerStatuses"][0]["imageID"]:
        status["containerStatuses"][0]["imageID"] = f"{host}/bench/{app}@sha256:{index % APPS:064x}"
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta["name"],
            "namespace": namespace(index),
            "labels": meta["labels"],
            "annotations": meta["annotations"],
            "ownerReferences": [
                {**meta["ownerReferences"][0], "uid": "00000000-0000-4000-8000-000000000000"}
            ],
        },
        "spec": spec,
    }
    return body, status


def namespace(index: int) -> str:
    return f"scale-{index % NAMESPACES:03d}"


class Api:
    """Keep-alive HTTPS connections to kube-apiserver, one per thread, as the admin."""

    def __init__(self, plane: ControlPlane) -> None:
        self.host, _, port = plane.server.removeprefix("https://").partition(":")
        self.port = int(port)
        self.context = plane.admin_ssl_context()
        self.local = threading.local()

    def call(self, method: str, path: str, body: Any = None, content_type: str = "") -> int:
        """One request; its status (a dropped connection is opened again once)."""
        for attempt in (1, 2):
            connection = getattr(self.local, "connection", None)
            if connection is None:
                connection = http.client.HTTPSConnection(
                    self.host, self.port, context=self.context, timeout=60
                )
                self.local.connection = connection
            headers = {"Content-Type": content_type or "application/json"}
            try:
                connection.request(method, path, orjson.dumps(body), headers)
                response = connection.getresponse()
                text = response.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                if attempt == 2:
                    raise
                continue
            if response.status >= 400 and response.status != 409:
                raise harness.BenchError(f"{method} {path}: {response.status} {text[:300]!r}")
            return response.status
        raise AssertionError("unreachable")


def parallel(calls: Sequence[Callable[[], object]]) -> None:
    with ThreadPoolExecutor(WORKERS) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


@dataclass
class Cluster:
    """The objects created so far."""

    api: Api
    host: str
    statuses: bool
    nodes: int = 0
    pods: int = 0

    def grow(self, nodes: int, pods: int, say: Callable[[str], None]) -> None:
        started = time.monotonic()
        parallel([lambda i=i: self._node(i) for i in range(self.nodes, nodes)])
        self.nodes = max(self.nodes, nodes)
        parallel([lambda i=i: self._pod(i) for i in range(self.pods, pods)])
        made = pods - self.pods
        self.pods = max(self.pods, pods)
        spent = time.monotonic() - started
        say(f"scale: {nodes} nodes, {pods} pods ({made} new in {spent:.0f} s)")

    def _node(self, index: int) -> None:
        arch = "arm64" if index % 2 else "amd64"
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"scale-node-{index}",
                "labels": {
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": arch,
                    "kubernetes.io/hostname": f"scale-node-{index}",
                    "node.kubernetes.io/instance-type": "m7g.large" if index % 2 else "m7i.large",
                    "topology.kubernetes.io/zone": f"zone-{index % 3}",
                },
            },
            "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"}},
        }
        self.api.call("POST", "/api/v1/nodes", body)

    def _pod(self, index: int) -> None:
        body, status = pod_body(index, self.nodes, self.host)
        ns = body["metadata"]["namespace"]
        self.api.call("POST", f"/api/v1/namespaces/{ns}/pods", body)
        if self.statuses:
            path = f"/api/v1/namespaces/{ns}/pods/{body['metadata']['name']}/status"
            patch = {"status": status}
            self.api.call("PATCH", path, patch, "application/strategic-merge-patch+json")


@dataclass
class Prober:
    """Requests sent from a thread every `pace` seconds, each one's start and round trip
    kept. Paced, not back to back: a probe costs archfit CPU, and the figures around it
    (CPU per event, a relist's CPU) are of the watches, not of the probes."""

    send: Callable[[], None]
    pace: float
    refused: int = 0
    samples: list[tuple[float, float]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.wait(self.pace):
            started = time.monotonic()
            try:
                self.send()
            except Exception:  # refused (not listening yet): counted, not a sample
                self.refused += 1
            else:
                self.samples.append((started, (time.monotonic() - started) * 1000))

    def between(self, start: float, end: float) -> list[float]:
        return [ms for at, ms in self.samples if start <= at <= end]


@contextmanager
def probing(prober: Prober) -> Iterator[Prober]:
    """The prober running for the block (again, after an earlier block)."""
    prober.stop.clear()
    thread = threading.Thread(target=prober.run, daemon=True)
    thread.start()
    try:
        yield prober
    finally:
        prober.stop.set()
        thread.join(10)


def keep_alive_get(port: int, path: str) -> Callable[[], None]:
    holder: dict[str, http.client.HTTPConnection] = {}

    def send() -> None:
        connection = holder.get("c")
        if connection is None:
            connection = holder["c"] = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            connection.request("GET", path)
            connection.getresponse().read()
        except Exception:
            holder.pop("c").close()
            raise

    return send


def keep_alive_post(port: int, context: ssl.SSLContext, body: bytes) -> Callable[[], None]:
    holder: dict[str, http.client.HTTPSConnection] = {}

    def send() -> None:
        connection = holder.get("c")
        if connection is None:
            connection = holder["c"] = http.client.HTTPSConnection(
                "127.0.0.1", port, context=context, timeout=30
            )
        try:
            connection.request("POST", "/mutate", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
        except Exception:
            holder.pop("c").close()
            raise
        if response.status != 200:
            raise harness.BenchError(f"POST /mutate: {response.status}")

    return send


def cpu_seconds(pid: int) -> float:
    user, system = harness.proc_cpu_times(pid)
    return user + system


def settle(pid: int, idle_rate: float = 0.0) -> float:
    """Wait until the process is quiet (QUIET_CPU_SECONDS in QUIET_SECONDS above
    `idle_rate`, CPU seconds per second); when it became so (monotonic), before the quiet
    second that showed it."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(QUIET_SECONDS)
        now = cpu_seconds(pid)
        if now - last < QUIET_CPU_SECONDS + idle_rate * QUIET_SECONDS:
            return time.monotonic() - QUIET_SECONDS
        last = now
    raise harness.BenchError(f"archfit still busy after {SETTLE_TIMEOUT_SECONDS:.0f} s")


def metric(archfit: Archfit, series: str) -> float | None:
    try:
        return archfit.metric(series)
    except OSError:
        return None


def wait_metric(archfit: Archfit, series: str, at_least: float, timeout: float) -> float:
    """Monotonic time when `series` first reads at least `at_least`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = metric(archfit, series)
        if value is not None and value >= at_least:
            return time.monotonic()
        time.sleep(0.05)
    raise harness.BenchError(f"{series} below {at_least} after {timeout:.0f} s")


def review(host: str) -> bytes:
    """An AdmissionReview of a CREATE of a pod naming an image archfit has resolved."""
    body, _ = pod_body(1, 1, host)
    body["spec"].pop("nodeName")
    return orjson.dumps(review_of(body, body["metadata"]["namespace"]))


def p99(samples: Sequence[float]) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2)


def longest(samples: Sequence[float]) -> float | None:
    return round(max(samples), 1) if samples else None


GcReading = dict[float, float]
"""archfit_gc_pause_seconds so far: collections of every generation by bucket bound (s)."""


def gc_reading(archfit: Archfit) -> GcReading:
    """The collections timed so far (empty for an archfit without the metric)."""
    try:
        text = archfit.metrics_text()
    except OSError:
        return {}
    found: GcReading = {}
    for family in text_string_to_metric_families(text):
        if family.name != "archfit_gc_pause_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                found[bound] = found.get(bound, 0.0) + sample.value
    return found


def longest_gc_ms(since: GcReading, now: GcReading) -> float | None:
    """The smallest bucket bound (ms) that every collection between two readings fell
    under: the longest pause was at most that. None without the metric."""
    if not now:
        return None
    collections = now[float("inf")] - since.get(float("inf"), 0.0)
    for bound in sorted(now):
        if now[bound] - since.get(bound, 0.0) >= collections:
            return 0.0 if collections == 0 else round(bound * 1000, 1)
    return None


@dataclass
class Bench:
    plane: ControlPlane
    workdir: Path
    registry: RegistryProcess
    policy: AdmissionPolicy
    cluster: Cluster
    say: Callable[[str], None]
    patched: int = 0

    def settings(self, webhook_port: int, cert: Any) -> dict[str, Any]:
        return {
            **harness.cluster_settings(self.plane.admin_kubeconfig, self.registry.host),
            # Each image's platforms refreshed once an hour, not every 5 minutes: the
            # refreshes' registry calls are not the pods' cost, and landed in the windows
            # measured (the events' CPU, the quiet p99) at random.
            "admissionPolicy": {"enabled": True, "refreshSeconds": 3600},
            "webhook": {
                "enabled": True,
                "host": "127.0.0.1",
                "port": webhook_port,
                "certFile": str(cert.cert),
                "keyFile": str(cert.key),
            },
            "logging": {"level": "info", "format": "json"},
        }

    def measure(
        self, nodes: int, pods: int, patches: int, source: Path | None = None
    ) -> dict[str, Any]:
        """One size: a fresh archfit (of the checkout `source`, else this one), its start,
        relist and pod events."""
        name = f"archfit-{nodes}x{pods}" + ("-before" if source is not None else "")
        cert = make_serving_cert(self.workdir / name / "tls")
        webhook_port = free_port()
        env = harness.source_env(source) if source is not None else None
        archfit = Archfit(
            self.workdir / name, self.settings(webhook_port, cert), name=name, env=env
        )
        context = ssl.create_default_context(cafile=str(cert.ca_bundle))
        body = review(self.registry.host)
        row: dict[str, Any] = {"nodes": nodes, "pods": pods}
        if source is not None:
            row["archfit"] = "before"
        health = Prober(keep_alive_get(archfit.port, "/healthz"), HEALTH_PACE_SECONDS)
        hook = Prober(keep_alive_post(webhook_port, context, body), WEBHOOK_PACE_SECONDS)
        exec_at = time.monotonic()
        try:
            with probing(health):
                archfit.start()
                pid = archfit.process.pid
                assert pid is not None
                row["ready_s"] = round(time.monotonic() - exec_at, 2)
                listed = wait_metric(
                    archfit, "archfit_policy_pods_indexed", pods, SETTLE_TIMEOUT_SECONDS
                )
                row["listed_s"] = round(listed - exec_at, 2)
                row.update(self.parameter(archfit, exec_at))
                quiet = settle(pid)
                row["stall_start_ms"] = longest(health.between(exec_at, quiet))
                row["gc_start_ms"] = longest_gc_ms({}, gc_reading(archfit))
            row["rss_mib"] = round(harness.proc_memory(pid)[0] / 2**20, 1)
            # CPU first, with nothing else asking archfit for anything: a probe every 10 ms
            # costs more than the pods do at the small sizes, and its cost under load is not
            # its cost at rest, so taking an idle rate off left mostly noise.
            idle_at, idle_cpu = time.monotonic(), cpu_seconds(pid)
            time.sleep(2 * QUIET_SECONDS)
            idle_rate = (cpu_seconds(pid) - idle_cpu) / (time.monotonic() - idle_at)
            row["idle_cpu_ms_per_s"] = round(idle_rate * 1000, 1)
            samplers = self.samplers(pid, f"{name}/relist")
            relist_at, relist_cpu = time.monotonic(), cpu_seconds(pid)
            self.restart_apiserver()
            settled = settle(pid, idle_rate)
            row["relist_profile"] = self.profile(samplers, cpu_seconds(pid) - relist_cpu)
            spent = cpu_seconds(pid) - relist_cpu - idle_rate * (settled - relist_at)
            row["relist_s"] = round(settled - relist_at, 1)
            row["relist_cpu_us_per_pod"] = round(spent * 1e6 / pods, 1)
            samplers = self.samplers(pid, f"{name}/events")
            events_at, events_cpu = time.monotonic(), cpu_seconds(pid)
            self.patch_labels(patches, pods)
            done = settle(pid, idle_rate)
            row["events_profile"] = self.profile(samplers, cpu_seconds(pid) - events_cpu)
            spent = cpu_seconds(pid) - events_cpu - idle_rate * (done - events_at)
            row["event_cpu_us"] = round(spent * 1e6 / patches, 1)
            # Then the same again with the probes: how late archfit answers meanwhile.
            with probing(health), probing(hook):
                probed_at, probed_cpu = time.monotonic(), cpu_seconds(pid)
                while len(hook.samples) < WEBHOOK_QUIET_CALLS:
                    time.sleep(0.1)
                # Quiet now means quiet but for the probes.
                probed_rate = (cpu_seconds(pid) - probed_cpu) / (time.monotonic() - probed_at)
                row["probes_cpu_ms_per_s"] = round((probed_rate - idle_rate) * 1000, 1)
                row["webhook_quiet_p99_ms"] = p99([ms for _, ms in hook.samples])
                relist_at, gc_at = time.monotonic(), gc_reading(archfit)
                self.restart_apiserver()
                settled = settle(pid, probed_rate)
                relisted = gc_reading(archfit)
                row["gc_relist_ms"] = longest_gc_ms(gc_at, relisted)
                row["webhook_relist_p99_ms"] = p99(hook.between(relist_at, settled))
                row["webhook_relist_calls"] = len(hook.between(relist_at, settled))
                row["stall_relist_ms"] = longest(health.between(relist_at, settled))
                events_at = time.monotonic()
                self.patch_labels(patches, pods)
                done = settle(pid, probed_rate)
                row["stall_events_ms"] = longest(health.between(events_at, done))
                row["gc_events_ms"] = longest_gc_ms(relisted, gc_reading(archfit))
            windows = [row.get(f"gc_{w}_ms") for w in ("start", "relist", "events")]
            row["gc_max_ms"] = max((w for w in windows if w is not None), default=None)
            row["peak_mib"] = round(harness.proc_memory(pid)[1] / 2**20, 1)
        finally:
            archfit.stop()
        self.say(f"scale: {json.dumps(row)}")
        return row

    def samplers(self, pid: int, name: str) -> tuple[Any, Any] | None:
        """py-spy and perf on archfit (bench/in_situ.py), when here, into `name`'s folder."""
        if not in_situ.available():
            return None
        (self.workdir / name).mkdir(parents=True, exist_ok=True)
        stacks = in_situ.Sampler(pid, self.workdir / name / "py-spy").start()
        perf = in_situ.PerfSampler(pid, self.workdir / name / "perf")
        return stacks, perf.start() if in_situ.perf_available() else None

    def profile(self, samplers: tuple[Any, Any] | None, cpu: float) -> dict[str, Any] | None:
        """The CPU by library and the GIL time by what archfit did, in ms (whole), since
        `samplers` started."""
        if samplers is None:
            return None
        stacks = samplers[0].stop()
        libraries = samplers[1].stop() if samplers[1] is not None else {}
        return {
            "cpu_ms_by_library": in_situ.by_library(libraries, cpu, 1),
            "gil": in_situ.breakdown(stacks, cpu, 1).as_row(),
            "top_frames": in_situ.top_frames(stacks, 12),
        }

    def parameter(self, archfit: Archfit, exec_at: float) -> dict[str, Any]:
        """The ImagePlatforms parameter: when archfit first published it with every image (the
        timestamp moves at each publish round, so it is read as soon as the count is full),
        its size."""
        wait_metric(archfit, "archfit_policy_parameter_images", APPS, SETTLE_TIMEOUT_SECONDS)
        published = metric(archfit, "archfit_policy_parameter_published_timestamp_seconds")
        spec = self.policy.parameter()
        started_wall = time.time() - (time.monotonic() - exec_at)
        return {
            "publish_s": round(published - started_wall, 2) if published else None,
            "param_kib": round(len(orjson.dumps(spec)) / 1024, 1),
            "param_images": len(spec.get("images") or {}),
        }

    def restart_apiserver(self) -> None:
        self.plane.restart_apiserver(RESTART_READY_SECONDS)

    def patch_labels(self, count: int, pods: int) -> None:
        """`count` label patches over the pods, a new value each time."""
        self.patched += 1
        step = max(1, pods // count)

        def patch(i: int) -> None:
            index = (i * step) % pods
            body, _ = pod_body(index, self.cluster.nodes, self.registry.host)
            ns, pod_name = body["metadata"]["namespace"], body["metadata"]["name"]
            patch = {"metadata": {"labels": {"bench.archfit.io/round": str(self.patched)}}}
            self.cluster.api.call(
                "PATCH",
                f"/api/v1/namespaces/{ns}/pods/{pod_name}",
                patch,
                "application/merge-patch+json",
            )

        parallel([lambda i=i: patch(i) for i in range(count)])


def run(
    sizes: Sequence[tuple[int, int]] = SIZES,
    patches: int = PATCHES,
    statuses: bool = True,
    progress: Callable[[str], None] = lambda _: None,
    before: Path | None = None,
) -> dict[str, Any]:
    """Every size measured in one control plane: {"rows": [...], "slopes": [...]}; with
    `before` (a checkout), its archfit is measured at each size too, first, in "before"
    rows (the slopes are this checkout's)."""
    with tempfile.TemporaryDirectory(prefix="archfit-scale-") as tmp:
        root = Path(tmp)
        plane = ControlPlane(Binaries(binaries.build()), root / "plane").start()
        registry = RegistryProcess.start(root / "registry")
        try:
            pusher = Pusher(registry.url)
            platforms = ("linux/amd64", "linux/arm64")
            for index in range(APPS):
                if index % 3 == 2:
                    pusher.index(f"bench/app-{index}", "1.0", list(platforms))
                else:
                    pusher.single(f"bench/app-{index}", "1.0", platforms[index % 2])
            api = Api(plane)
            for index in range(NAMESPACES):
                ns = namespace(index)
                api.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
                account = {"metadata": {"name": "default"}}
                api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", account)
            policy = AdmissionPolicy(plane.admin_kubeconfig).install()
            cluster = Cluster(api, registry.host, statuses)
            bench = Bench(plane, root, registry, policy, cluster, progress)
            rows: list[dict[str, Any]] = []
            before_rows: list[dict[str, Any]] = []
            problems: list[str] = []
            for nodes, pods in sizes:
                # Unbound while the pods are made: its CEL would run at every CREATE, on the
                # cores the creation already saturates; archfit publishes to it all the same.
                policy.unbind()
                cluster.grow(nodes, pods, progress)
                policy.bind()
                try:
                    if before is not None:
                        before_rows.append(bench.measure(nodes, pods, min(patches, pods), before))
                    rows.append(bench.measure(nodes, pods, min(patches, pods)))
                except Exception as error:  # the sizes measured so far are kept and shown
                    problems.append(f"{nodes}x{pods}: {type(error).__name__}: {error}"[:500])
                    progress(f"scale: {problems[-1]}")
                    break
        finally:
            registry.stop()
            plane.stop()
    return {"rows": rows, "slopes": slopes(rows), "before_rows": before_rows, "problems": problems}


def slopes(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per figure, its change per 10,000 pods between the two largest sizes with the same
    node count, and whether it grows faster than the pods (its ratio over the pods' ratio)."""
    pairs = [
        (a, b) for a in rows for b in rows if a["nodes"] == b["nodes"] and b["pods"] > a["pods"]
    ]
    if not pairs:
        return []
    low, high = max(pairs, key=lambda pair: pair[1]["pods"])
    found = []
    growth = high["pods"] / low["pods"]
    for column in COLUMNS[2:]:
        a, b = low.get(column), high.get(column)
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            continue
        per_10k = (b - a) / (high["pods"] - low["pods"]) * 10_000
        # A figure that is a fixed cost plus a per-pod cost grows slower than the pods;
        # one whose ratio exceeds the pods' grows faster than linear.
        faster = a > 0 and b / a > growth * 1.1
        found.append(
            {
                "figure": column,
                "from": f"{low['nodes']}x{low['pods']}",
                "to": f"{high['nodes']}x{high['pods']}",
                "per_10k_pods": round(per_10k, 3),
                "faster_than_linear": faster,
            }
        )
    return found


def with_before(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The rows and columns to show: with `--before`, each size's "before" row above this
    checkout's, in an `archfit` column."""
    before = result.get("before_rows") or []
    if not before:
        return list(result["rows"]), COLUMNS
    rows = [
        row
        for pair in zip(before, result["rows"], strict=False)
        for row in (pair[0], {"archfit": "this", **pair[1]})
    ]
    return rows, ("archfit", *COLUMNS)


def render(result: dict[str, Any]) -> str:
    rows, header = with_before(result)
    body = [
        [harness.format_cell(r.get(c)) if r.get(c) is not None else "-" for c in header]
        for r in rows
    ]
    widths = [max(len(x) for x in [h, *(b[i] for b in body)]) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    lines += [f"not measured: {problem}" for problem in result.get("problems") or ()]
    if result["slopes"]:
        lines += ["", "per 10,000 pods (same node count):"]
        lines += [
            f"  {s['figure']:<24} {s['per_10k_pods']:>10}  {s['from']} -> {s['to']}"
            + ("  faster than linear" if s["faster_than_linear"] else "")
            for s in result["slopes"]
        ]
    return "\n".join(lines)


def parse_size(text: str) -> tuple[int, int]:
    nodes, _, pods = text.partition("x")
    return int(nodes), int(pods)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small sizes")
    parser.add_argument("--sizes", nargs="+", type=parse_size, help="NODESxPODS, growing")
    parser.add_argument("--patches", type=int)
    parser.add_argument("--no-statuses", action="store_true", help="pods without a status")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--before", type=Path, help="a checkout measured at each size too")
    args = parser.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    patches = args.patches or (QUICK_PATCHES if args.quick else PATCHES)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    before = args.before.resolve() if args.before else None
    result = run(sizes, patches, not args.no_statuses, say, before)
    print(json.dumps(result, indent=2) if args.output == "json" else render(result))
    for row in result["rows"] if args.output == "table" else ():
        if row.get("relist_profile"):
            print(f"\nrelist at {row['nodes']}x{row['pods']}, where archfit's CPU went (ms):")
            print(json.dumps(row["relist_profile"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
