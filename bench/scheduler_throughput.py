"""kube-scheduler throughput and CPU per pod: no extender, a do-nothing Go extender, archfit.

Issue 12, goal 1: archfit at >= 0.9x the pods/s of an extender that does nothing. Starts a
real etcd, kube-apiserver and registry on loopback (tests/e2e helpers) and registers N nodes,
half arm64 and half amd64. For each variant it creates the pods while no scheduler runs,
starts kube-scheduler with config/scheduler-config.yaml (percentageOfNodesToScore 100) and
waits for every pod by counting "Successfully bound" lines in the scheduler's own log, so
nothing polls the API server while it works. Throughput is (pods - 1) / (last bind - first
bind), from the klog microsecond timestamps of those lines: start-up is not counted.

CPU per pod, for kube-scheduler, the extender, kube-apiserver and etcd: each process's CPU
time (user + system) is read when the first bind is seen in the log and when the last one
is, and the difference is divided by the binds in between. The kernel counts it in 10 ms
ticks (0.02 ms a pod over 500 pods; coarse for small runs), and kube-apiserver's and etcd's
include their background work, which grows with the window.

Variants:
- no-extender: the shipped config without `extenders`;
- noop-extender: bench/noop-extender, Go, built like the control plane
  (bench/build-go.sh): filter echoes NodeNames, prioritize answers `[]`;
  nodeCacheCapable true. The honest reference, since two HTTP calls per pod cost the
  scheduler itself;
- archfit: nodeCacheCapable true, as shipped, with its node index; warm image cache;
- archfit-no-watcher: the same without the mismatch watcher (`watcher.enabled: false`): the
  watcher list-watches every pod, so each bind costs kube-apiserver one more encoding of the
  pod (archfit's watch is JSON, kube-scheduler's protobuf) and archfit one decoding, on the
  same two cores as everything else. In a real cluster the control plane has its own
  machines; this row is the extender alone;
- archfit-full-nodes: nodeCacheCapable false, full Node objects in every request;
- archfit-profiled: archfit as in the archfit row, with py-spy sampling its stacks from
  outside (bench/in_situ.py, non-blocking): its CPU per pod broken down by what it does
  (the calls' own work, logging and metrics per call, aiohttp's connection handling, the
  pod watches and the policy's pod index, the node index, Lease renewals, the event loop,
  and what no Python frame shows), printed under the table. The sampler's own CPU is on
  the same cores, so this row's pods/s is not the goal's; run once, skipped when py-spy is
  not installed;
- policy-no-extender: no extender; archfit's MutatingAdmissionPolicy (the shipped CRD, policy
  and binding) writes each pod's constraint at creation from the parameter an archfit
  publisher filled (it is stopped before the pods are made), so kube-scheduler's own
  NodeAffinity plugin does the filtering in process. Admission is not in the figure (the
  pods exist before the scheduler starts): bench/policy_latency measures what a CREATE costs.

The client rate limit is lifted to qps/burst 1000, so CPU is what limits. `--default-qps`
adds a round at the shipped limit (client-go's default, qps 50, burst 100), which caps
every fast variant at the same figure: the limiter's, not the extender's.

An empty HostPriorityList scores every node 0: kube-scheduler v1.36.3 adds extender scores
only for the hosts an extender returned (pkg/scheduler/schedule_one.go, prioritizeNodes,
which merges `allNodeExtendersScores` into the nodes it holds). Only tie-breaking differs:
a returned host gets `Randomizer = rand.Int()`, a host left out keeps 0 and loses ties to them.

`--source DIR` runs archfit from another checkout (DIR/extender first on PYTHONPATH, this
venv's Python), so one script measures two commits alike. `--before DIR` adds a variant,
archfit-before, that runs DIR's archfit on the same control plane beside this one's, and
archfit-before-profiled (once, when py-spy is here): its breakdown beside this one's.

`--runs N` measures the variants N times on one control plane, each run in a rotated order;
runs after the first measure only the rows the goal's ratio needs (the do-nothing extender
and archfit's). A 2-core machine shared with anything moves one run's figures by 10% or
more, so a figure to quote is the spread of three runs, printed under the table.

    .venv/bin/python -m bench.scheduler_throughput [--pods 500] [--nodes 500] [--source DIR]
        [--before DIR] [--runs N] [--default-qps] [--only VARIANT ...] [--output table|json]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol

import psutil
import yaml

from bench import harness, in_situ
from tests.e2e import binaries, cluster
from tests.e2e.archfit import Archfit
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.policy import AdmissionPolicy, required_arch
from tests.e2e.processes import Process, http_ok
from tests.e2e.scheduler import Scheduler
from tests.support.images import Pusher
from tests.support.prerequisites import BuildFailed, Unavailable
from tests.support.process import free_port
from tests.support.registry import RegistryProcess

KUBERNETES = "v1.36.3"
GO_BUILD_SCRIPT = Path(__file__).resolve().parent / "build-go.sh"
#: Client qps and burst of the headline round: high enough that the limiter never waits.
UNTHROTTLED_QPS = 1000
#: What the shipped config gets by leaving clientConnection.qps unset (burst 100).
SHIPPED_QPS = 50
#: No variant may take longer than this from scheduler start to its last bind.
BIND_TIMEOUT_SECONDS = 180.0
#: How often the scheduler's log is read for new bind lines while a variant runs.
LOG_POLL_SECONDS = 0.005
#: The processes whose CPU is reported, in table order.
PROCESSES = ("kube-scheduler", "extender", "kube-apiserver", "etcd")
#: Pods bound by an unreported scheduler run before the measured ones.
WARM_UP_PODS = 100
#: The extender verbs the shipped config registers.
VERBS = ("filter", "prioritize")
#: Parallel API calls while setting up nodes and pods (not while measuring).
SETUP_WORKERS = 8


class BindsMissing(RuntimeError):
    """A variant did not bind every pod in time: its figures would be wrong, so none."""


class ExtenderSkipped(RuntimeError):
    """kube-scheduler went on without the variant's extender for some pods."""


@dataclass(frozen=True)
class Variant:
    """One scheduler setup to measure."""

    name: str
    extender: Literal["none", "noop", "archfit"]
    """Which extender kube-scheduler calls; noop is bench/noop-extender."""
    node_cache_capable: bool = True
    watcher: bool = True
    """Whether archfit's mismatch watcher runs (as shipped): it list-watches every pod, so
    kube-apiserver encodes each pod change once more, for archfit, on the same two cores."""
    policy: bool = False
    """Whether archfit's admission policy constrains the pods as they are created."""
    before: bool = False
    """Whether archfit runs from the `--before` checkout."""
    profiled: bool = False
    """Whether py-spy samples archfit's stacks through the run (bench/in_situ.py): the row's
    CPU broken down by what archfit does per pod. Not a row of the goal's ratio: the sampler
    takes CPU on the same cores."""


VARIANTS = (
    Variant("no-extender", "none"),
    Variant("noop-extender", "noop"),
    Variant("archfit", "archfit"),
    Variant("archfit-no-watcher", "archfit", watcher=False),
    Variant("archfit-full-nodes", "archfit", node_cache_capable=False),
    Variant("policy-no-extender", "none", policy=True),
    Variant("archfit-profiled", "archfit", profiled=True),
)
BEFORE = Variant("archfit-before", "archfit", before=True)
BEFORE_PROFILED = Variant("archfit-before-profiled", "archfit", before=True, profiled=True)
REPEATED = frozenset({"noop-extender", "archfit", "archfit-no-watcher", BEFORE.name})
"""The variants the runs after the first measure again: the goal's ratio and its reference."""


class Extender(Protocol):
    """What a variant needs of an extender process: its URL and its pid."""

    process: Process

    @property
    def url_prefix(self) -> str: ...

    def stop(self) -> None: ...


class NoopExtender:
    """bench/noop-extender on a free loopback port."""

    prefix = "/scheduler"

    def __init__(self, executable: Path, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        argv = [str(executable), f"-listen=127.0.0.1:{self.port}", f"-prefix={self.prefix}"]
        self.process = Process("noop-extender", argv, workdir)

    @property
    def url_prefix(self) -> str:
        """What kube-scheduler's extender urlPrefix must be to reach it."""
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def start(self) -> NoopExtender:
        """Start it and wait until /readyz answers."""
        self.process.start()
        self.process.wait_ready(lambda: http_ok(f"http://127.0.0.1:{self.port}/readyz"))
        return self

    def answered(self) -> dict[str, int]:
        """Calls answered so far, by verb (its GET /stats)."""
        url = f"http://127.0.0.1:{self.port}/stats"
        with urllib.request.urlopen(url, timeout=5) as response:
            return {verb: int(count) for verb, count in json.load(response).items()}

    def stop(self) -> None:
        """Stop it."""
        self.process.stop()


def archfit_answered(archfit: Archfit) -> dict[str, int]:
    """Calls archfit answered so far, by verb, from its request-duration histogram."""
    url = f"http://127.0.0.1:{archfit.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    found = re.findall(
        r'^archfit_request_duration_seconds_count\{verb="(\w+)"\} (\S+)$', text, re.M
    )
    return {verb: int(float(count)) for verb, count in found}


def answered(extender: Extender) -> dict[str, int]:
    """Calls the extender answered so far, by verb."""
    if isinstance(extender, NoopExtender):
        return extender.answered()
    assert isinstance(extender, Archfit)
    return archfit_answered(extender)


@dataclass(frozen=True)
class Window:
    """What the scheduler log showed at the first and at the last bind seen."""

    binds: int
    """Binds logged after the first sample and up to the second."""
    cpu_seconds: dict[str, float]
    """CPU time each process spent between the two samples."""


def cpu_times(processes: Mapping[str, psutil.Process]) -> dict[str, float]:
    """User + system CPU seconds of each process, now."""
    sample = {}
    for label, process in processes.items():
        times = process.cpu_times()
        sample[label] = times.user + times.system
    return sample


def bound_needle(namespace: str) -> bytes:
    """The part of a kube-scheduler --v=2 log line that says a pod of namespace was bound."""
    return f'"Successfully bound pod to node" pod="{namespace}/'.encode()


def watch_binds(
    scheduler: Process,
    namespace: str,
    expected: int,
    sample: Callable[[], dict[str, float]],
    timeout: float = BIND_TIMEOUT_SECONDS,
) -> Window:
    """Follow the scheduler's log until `expected` pods of namespace are bound.

    CPU is sampled when the first bind line shows up and when the last one does. Raises
    BindsMissing when the scheduler exits or the timeout passes first.
    """
    needle = bound_needle(namespace)
    started = time.monotonic()
    count, partial = 0, b""
    first: tuple[int, dict[str, float]] | None = None
    with scheduler.log_path.open("rb") as log:
        while True:
            chunk = log.read()
            lines = (partial + chunk).split(b"\n")
            partial = lines.pop()
            count += sum(needle in line for line in lines)
            if count and first is None:
                first = (count, sample())
            if count >= expected and first is not None:
                last = sample()
                used = {label: last[label] - first[1][label] for label in last}
                return Window(binds=count - first[0], cpu_seconds=used)
            exited = not chunk and not scheduler.running()
            if exited or time.monotonic() - started > timeout:
                raise BindsMissing(
                    f"{namespace}: {count} of {expected} pods bound after "
                    f"{time.monotonic() - started:.0f} s "
                    f"(kube-scheduler {'exited' if exited else 'still running'}); "
                    f"log {scheduler.log_path} (--keep DIR keeps it) says:\n"
                    f"{why_unbound(scheduler, namespace)}"
                )
            if not chunk:
                time.sleep(LOG_POLL_SECONDS)


def why_unbound(scheduler: Process, namespace: str, lines: int = 6) -> str:
    """The scheduler's last log lines about the namespace's pods other than binds, or its tail."""
    needle, bound = f'pod="{namespace}/', bound_needle(namespace).decode()
    text = scheduler.log_path.read_text(errors="replace").splitlines()
    about = [line for line in text if needle in line and bound not in line]
    return "\n".join(about[-lines:]) or scheduler.log_tail(lines)


def bind_times(log: str, namespace: str) -> list[float]:
    """Seconds since midnight of each "Successfully bound" line (klog, --v=2), sorted."""
    stamps = []
    needle = bound_needle(namespace).decode()
    for line in log.splitlines():
        if needle in line:
            # I1122 02:26:28.632115 ...: the klog header carries microseconds.
            hours, minutes, seconds = line.split()[1].split(":")
            stamps.append(int(hours) * 3600 + int(minutes) * 60 + float(seconds))
    return sorted(stamps)


def limit_client(scheduler: Scheduler, qps: int) -> None:
    """Set the scheduler's client qps and burst, unless qps is what the shipped config gets."""
    if qps == SHIPPED_QPS:
        return
    document: dict[str, Any] = dict(scheduler.config)
    document["clientConnection"] = {**document["clientConnection"], "qps": qps, "burst": qps}
    scheduler.config_path.write_text(yaml.safe_dump(document))


def has_watcher(source: Path | None) -> bool:
    """Whether the archfit measured has the mismatch watcher (older checkouts, which have
    none, run only the rows that need none)."""
    package = (source or harness.ROOT) / "extender"
    # Settings moved from extender/config.py into the extender/config/ package.
    modules = (package / "config.py", *sorted((package / "config").glob("*.py")))
    return any("class WatcherSettings" in m.read_text() for m in modules if m.is_file())


def archfit_env(source: Path | None) -> dict[str, str] | None:
    """The environment that makes `archfit serve` import DIR/extender (None: this checkout).

    Checked, not assumed: a checkout without `extender` would otherwise measure this one.
    """
    if source is None:
        return None
    found = Path(harness.imported_from(source))
    if found != source.resolve():
        raise ValueError(f"--source {source}: `extender` imports from {found}, not from there")
    return harness.source_env(source)


def post_json(url: str, body: Mapping[str, Any]) -> Any:
    """POST body as JSON; the decoded answer."""
    request = urllib.request.Request(  # noqa: S310 - a loopback URL this script built
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.load(response)


def parallel(calls: Iterable[Callable[[], object]]) -> None:
    """Run the calls on a few threads; the first failure is raised."""
    with ThreadPoolExecutor(SETUP_WORKERS) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


class Bench:
    """A control plane with nodes and a registry with images, and the variants to run on it."""

    def __init__(
        self,
        workdir: Path,
        pods: int,
        nodes: int,
        source: Path | None,
        before: Path | None = None,
    ) -> None:
        self.workdir = workdir
        self.pod_count, self.node_count = pods, nodes
        self.archfit_env = archfit_env(source)
        self.before_env = archfit_env(before) if before is not None else None
        self.binaries = Binaries(binaries.build())
        noop = binaries.run_build_script(GO_BUILD_SCRIPT, ("noop-extender",), ("noop-extender",))
        self.noop_executable = noop / "noop-extender"
        self.plane = ControlPlane(self.binaries, workdir / "controlplane")
        self.registry: RegistryProcess | None = None
        self.node_names = [
            f"node-{i:04d}-{'arm64' if i % 2 else 'amd64'}" for i in range(self.node_count)
        ]
        self.arm64_nodes = {name for name in self.node_names if name.endswith("arm64")}
        self.shapes: list[list[str]] = []
        self.settings: dict[str, Any] = {}
        self.policy: AdmissionPolicy | None = None

    def start(self) -> Bench:
        """Start etcd, kube-apiserver and the registry; create the nodes; push the images."""
        self.plane.start()
        self.core = cluster.core_api(self.plane.admin_kubeconfig)
        parallel(
            partial(cluster.create_node, self.core, cluster.NodeSpec(name, name.rsplit("-", 1)[1]))
            for name in self.node_names
        )
        self.registry = RegistryProcess.start(self.workdir / "registry")
        pusher = Pusher(self.registry.url)
        multi, _ = pusher.index("bench/multi", "1.0", ["linux/amd64", "linux/arm64"])
        amd64 = pusher.single("bench/amd64", "1.0", "linux/amd64").reference
        arm64 = pusher.single("bench/arm64", "1.0", "linux/arm64").reference
        # Half the pods are multi-arch (every node passes), a quarter multi-arch plus an
        # amd64-only sidecar, a quarter arm64-only: archfit filters half the nodes for those.
        self.shapes = [[multi.reference], [multi.reference, amd64], [multi.reference], [arm64]]
        self.settings = {
            **harness.cluster_settings(self.plane.admin_kubeconfig, self.registry.host),
            # Production logging, written to a file: one line per request is part of the cost.
            "logging": {"level": "info", "format": "json"},
        }
        return self

    def stop(self) -> None:
        """Stop the registry and the control plane."""
        if self.registry is not None:
            self.registry.stop()
        self.plane.stop()

    def pods(self, count: int) -> list[dict[str, Any]]:
        """The pod manifests of one variant, the shapes in turn."""
        return [
            cluster.pod_manifest(f"pod-{i:04d}", self.shapes[i % len(self.shapes)])
            for i in range(count)
        ]

    def measure(
        self, variant: Variant, qps: int, pods: int | None = None, number: int = 1
    ) -> dict[str, Any]:
        """Run one variant at one client qps in run `number`; its row without the ratios."""
        run = f"{variant.name}-qps{qps}" + (f"-r{number}" if number > 1 else "")
        namespace = f"bench-{run}"
        cluster.create_namespace(self.core, namespace)
        manifests = self.pods(pods or self.pod_count)
        if variant.policy:
            self.publish_policy(run, namespace)
        try:
            parallel(partial(cluster.create_pod, self.core, namespace, m) for m in manifests)
        finally:
            if self.policy is not None:
                self.policy.unbind()  # the other variants' pods are created without it
        if variant.policy:
            self.check_constrained(namespace, manifests)
        extender = self.start_extender(variant, run, namespace)
        sampler, stacks, perf, libraries = None, None, None, None
        if variant.profiled and extender is not None:
            output = self.workdir / run / "py-spy.txt"
            sampler = in_situ.Sampler(extender.process.pid, output).start()
            perf = in_situ.PerfSampler(extender.process.pid, output.with_suffix(".perf"))
            perf = perf.start() if in_situ.perf_available() else None
        try:
            scheduler = Scheduler(
                self.binaries,
                self.workdir / run,
                self.plane.scheduler_kubeconfig,
                extender.url_prefix if extender else None,
                node_cache_capable=variant.node_cache_capable if extender else None,
                name=f"kube-scheduler-{run}",
            )
            limit_client(scheduler, qps)
            # Not Scheduler.start(): binds may begin before /readyz answers, and the
            # first one must be seen as it is logged.
            scheduler.process.start()
            try:
                before = answered(extender) if extender else {}
                processes = self.processes(scheduler, extender)
                window = watch_binds(
                    scheduler.process, namespace, len(manifests), lambda: cpu_times(processes)
                )
                after = answered(extender) if extender else {}
                stacks = sampler.stop() if sampler is not None else None
                libraries = perf.stop() if perf is not None else None
            finally:
                scheduler.stop()
        finally:
            if extender is not None:
                extender.stop()
        cluster.delete_namespace_pods(self.core, namespace)
        log = scheduler.process.log_path.read_text(errors="replace")
        times = bind_times(log, namespace)
        if len(times) != len(manifests):
            raise BindsMissing(f"{run}: {len(times)} binds logged for {len(manifests)} pods")
        if extender is not None:
            self.check_called(run, log, before, after, len(manifests))
        span = times[-1] - times[0]
        per_pod = {
            label: round(1000 * seconds / max(1, window.binds), 3)
            for label, seconds in window.cpu_seconds.items()
        }
        row = {
            "variant": variant.name,
            "run": number,
            "qps": qps,
            "pods_per_s": round((len(times) - 1) / span, 1) if span > 0 else float("inf"),
            "span_s": round(span, 3),
            "cpu_ms_per_pod": per_pod,
        }
        if stacks is not None:
            parts = in_situ.breakdown(stacks, window.cpu_seconds["extender"], window.binds)
            row["cpu_breakdown"] = parts.as_row()
            row["top_frames"] = in_situ.top_frames(stacks)
        if libraries is not None:
            cpu = window.cpu_seconds["extender"]
            row["cpu_by_library"] = in_situ.by_library(libraries, cpu, window.binds)
        return row

    def publish_policy(self, run: str, namespace: str) -> None:
        """Install and bind archfit's admission policy, and have an archfit publish every
        image the pods name (seed pods name them: the publisher's table is the cluster's
        pods' images); that archfit is stopped before the pods are made."""
        if self.policy is None:
            self.policy = AdmissionPolicy(self.plane.admin_kubeconfig).install()
        else:
            self.policy.bind()
        settings = {
            **self.settings,
            "admissionPolicy": {"enabled": True, "publishSeconds": 0.5},
            "watcher": {"enabled": False},
        }
        name = f"archfit-publisher-{run}"
        archfit = Archfit(self.workdir / name, settings, name=name, env=self.archfit_env)
        # The publisher's table holds the images the cluster's pods name: a pod per shape,
        # bound to a node (so no scheduler takes it), in a namespace of its own.
        seeds = f"{namespace}-seeds"
        cluster.create_namespace(self.core, seeds)
        for index, shape in enumerate(self.shapes):
            seed = cluster.pod_manifest(f"seed-{index}", shape)
            seed["spec"]["nodeName"] = self.node_names[index]
            cluster.create_pod(self.core, seeds, seed)
        archfit.start()
        try:
            self.warm(archfit, Variant("publisher", "archfit"), namespace)
            self.policy.wait_published(*{image for shape in self.shapes for image in shape})
        finally:
            archfit.stop()
            cluster.delete_namespace_pods(self.core, seeds)

    def check_constrained(self, namespace: str, manifests: Sequence[Mapping[str, Any]]) -> None:
        """The arm64-only pods carry `kubernetes.io/arch In [arm64]`, or the policy did not
        apply and the row would be the no-extender one."""
        arm64_only = next(
            m for m in manifests if m["spec"]["containers"][0]["image"] == self.shapes[-1][0]
        )
        pod = self.core.read_namespaced_pod(arm64_only["metadata"]["name"], namespace)
        if [["arm64"]] != required_arch(pod):
            raise RuntimeError(f"the admission policy did not constrain {pod.metadata.name}")

    def start_extender(self, variant: Variant, run: str, namespace: str) -> Extender | None:
        """Start the variant's extender, warm and ready (None for no extender)."""
        if variant.extender == "none":
            return None
        if variant.extender == "noop":
            return NoopExtender(self.noop_executable, self.workdir / run).start()
        settings = {
            **self.settings,
            "kubernetes": {**self.settings["kubernetes"], "nodeIndex": variant.node_cache_capable},
            **({} if variant.watcher else {"watcher": {"enabled": False}}),
        }
        env = self.before_env if variant.before else self.archfit_env
        archfit = Archfit(self.workdir / run, settings, name=f"archfit-{run}", env=env)
        archfit.start()
        try:
            self.warm(archfit, variant, namespace)
        except BaseException:
            archfit.stop()
            raise
        return archfit

    def warm(self, archfit: Archfit, variant: Variant, namespace: str) -> None:
        """Fill archfit's node index and image cache, and check that it really filters."""
        if variant.node_cache_capable:
            deadline = time.monotonic() + 60
            while archfit.indexed_nodes() != self.node_count:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"archfit indexed {archfit.indexed_nodes()} nodes")
                time.sleep(0.2)
            candidates: dict[str, Any] = {"NodeNames": self.node_names}
        else:
            items = self.core.api_client.sanitize_for_serialization(self.core.list_node().items)
            candidates = {"Nodes": {"items": items}}
        for index, shape in enumerate(self.shapes):
            pod = cluster.pod_manifest(f"warm-up-{index}", shape)
            pod["metadata"]["namespace"] = namespace
            args = {"Pod": pod, "Nodes": None, "NodeNames": None, **candidates}
            answer = post_json(f"{archfit.url_prefix}/filter", args)
            post_json(f"{archfit.url_prefix}/prioritize", args)
            kept = answer["NodeNames"] or [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
            # The arm64-only shape must keep exactly the arm64 nodes, or archfit is failing
            # open and the figures would be a do-nothing extender's.
            if shape == self.shapes[-1] and set(kept) != self.arm64_nodes:
                raise RuntimeError(
                    f"archfit kept {len(kept)} nodes for an arm64-only pod, "
                    f"not the {len(self.arm64_nodes)} arm64 ones; log {archfit.process.log_path}"
                )

    def check_called(
        self, run: str, log: str, before: Mapping[str, int], after: Mapping[str, int], pods: int
    ) -> None:
        """Fail unless the extender answered every filter and prioritize call of the run.

        The shipped config is `ignorable: true`: a filter error is skipped with a log line,
        a prioritize error silently, and either would measure a scheduler without extender.
        """
        skipped = log.count("Skipping extender")
        calls = {verb: after.get(verb, 0) - before.get(verb, 0) for verb in VERBS}
        # Prioritize is not called for a pod with one feasible node.
        wanted = {"filter": pods, "prioritize": pods if self.node_count >= 4 else 0}
        if skipped or any(calls[verb] < wanted[verb] for verb in VERBS):
            raise ExtenderSkipped(
                f"{run}: the extender answered {calls} for {pods} pods and kube-scheduler "
                f"skipped it {skipped} times; logs in {self.workdir / run}"
            )

    def processes(
        self, scheduler: Scheduler, extender: Extender | None
    ) -> dict[str, psutil.Process]:
        """The processes whose CPU is sampled, by label (no extender: no "extender")."""
        children = {Path(p.cmdline()[0]).name: p for p in psutil.Process().children()}
        found = {
            "kube-scheduler": psutil.Process(scheduler.process.pid),
            "kube-apiserver": children["kube-apiserver"],
            "etcd": children["etcd"],
        }
        if extender is not None:
            found["extender"] = psutil.Process(extender.process.pid)
        return {label: found[label] for label in PROCESSES if label in found}


def with_ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with its pods/s as a ratio to the no-extender and noop rows at its qps."""
    # Each ratio is to the reference of the same run: a busy moment moves both alike.
    reference = {(r.get("run", 1), r["variant"], r["qps"]): r["pods_per_s"] for r in rows}
    out = []
    for row in rows:
        noop = reference.get((row.get("run", 1), "noop-extender", row["qps"]))
        none = reference.get((row.get("run", 1), "no-extender", row["qps"]))
        out.append(
            {
                **row,
                "ratio_noop": round(row["pods_per_s"] / noop, 3) if noop else None,
                "ratio_none": round(row["pods_per_s"] / none, 3) if none else None,
            }
        )
    return out


def run(
    pods: int = 500,
    nodes: int = 500,
    source: Path | None = None,
    default_qps: bool = False,
    keep: Path | None = None,
    runs: int = 1,
    before: Path | None = None,
    only: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Measure every variant unthrottled (and at the shipped qps with default_qps), `runs`
    times (the later runs only the REPEATED variants), with archfit-before from `before`.

    One row per variant and qps: variant, qps, pods_per_s, span_s (first to last bind),
    cpu_ms_per_pod {process: ms}, ratio_noop and ratio_none (pods/s over that reference's
    at the same qps). `source` is a checkout whose `extender` archfit runs; `keep` a
    directory that keeps the logs and configs. Raises BindsMissing when a variant does not
    bind every pod, ExtenderSkipped when the scheduler went on without its extender,
    ValueError for sizes or a source it cannot use, and Unavailable or BuildFailed when a
    binary cannot be built.
    """
    if pods < 2 or nodes < 2:
        raise ValueError(f"need at least 2 pods and 2 nodes, not {pods} and {nodes}")
    if runs < 1:
        raise ValueError(f"need at least 1 run, not {runs}")
    rounds = [UNTHROTTLED_QPS, SHIPPED_QPS] if default_qps else [UNTHROTTLED_QPS]
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        bench = Bench(keep or Path(tmp), pods, nodes, source, before)
        try:
            bench.start()
            # Unreported: the first scheduler on a fresh control plane meets a colder
            # kube-apiserver and etcd than the ones after it.
            bench.measure(Variant("warm-up", "none"), UNTHROTTLED_QPS, min(pods, WARM_UP_PODS))
            variants = [
                v
                for v in VARIANTS
                if (v.watcher or has_watcher(source)) and (not v.profiled or in_situ.available())
                if not only or v.name in {*only, "noop-extender"}
            ]
            if before is not None:
                variants.append(BEFORE)
                if in_situ.available() and (not only or BEFORE_PROFILED.name in only):
                    variants.append(BEFORE_PROFILED)
            rows = []
            for number in range(1, runs + 1):
                measured = variants if number == 1 else [v for v in variants if v.name in REPEATED]
                # Rotated, so no variant always follows the same one into a busy moment.
                turn = (number - 1) % len(measured)
                order = measured[turn:] + measured[:turn]
                rows += [bench.measure(v, qps, number=number) for qps in rounds for v in order]
        finally:
            bench.stop()
    return with_ratios(rows)


def spread(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per variant and qps measured in more than one run: the x-noop ratio's and archfit's
    CPU per pod's lowest, median and highest over the runs."""
    grouped: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for row in rows:
        grouped.setdefault((row["variant"], row["qps"]), []).append(row)
    out = []
    for (variant, qps), group in grouped.items():
        if len(group) < 2:
            continue
        ratios = sorted(r["ratio_noop"] for r in group if r.get("ratio_noop") is not None)
        cpu = sorted(
            r["cpu_ms_per_pod"]["extender"]
            for r in group
            if r["cpu_ms_per_pod"].get("extender") is not None
        )
        out.append(
            {
                "variant": variant,
                "qps": qps,
                "runs": len(group),
                "ratio_noop": _low_mid_high(ratios),
                "extender_cpu_ms": _low_mid_high(cpu),
            }
        )
    return out


def _low_mid_high(values: Sequence[float]) -> list[float] | None:
    return [values[0], statistics.median(values), values[-1]] if values else None


def render_spread(rows: Sequence[Mapping[str, Any]]) -> str:
    """The spread over the runs, one line per variant: low, median, high."""

    def span(values: Sequence[float] | None) -> str:
        return "-" if values is None else f"{values[0]:.2f} / {values[1]:.2f} / {values[2]:.2f}"

    return "\n".join(
        f"{r['variant']} (qps {r['qps']}, {r['runs']} runs): x noop {span(r['ratio_noop'])}, "
        f"extender ms/pod {span(r['extender_cpu_ms'])} (low / median / high)"
        for r in spread(rows)
    )


def render_breakdown(row: Mapping[str, Any]) -> str:
    """A profiled row's CPU per pod by library (perf), its GIL time by what archfit does
    (py-spy), and the most sampled frames."""
    parts = row["cpu_breakdown"]
    total = row["cpu_ms_per_pod"].get("extender", 0.0)
    lines = [f"{row['variant']} (run {row.get('run', 1)}): archfit's CPU {total:.3f} ms per pod"]
    if row.get("cpu_by_library"):
        lines.append("  CPU by library (perf cpu-clock, scaled to the CPU counted), ms per pod:")
        lines += [f"  {ms:7.3f}  {name}" for name, ms in row["cpu_by_library"].items()]
    lines += [
        f"  GIL held by what archfit does (py-spy --gil, {parts['samples']} samples, "
        f"{parts['covered']:.2f}x the CPU), ms per pod:",
        *(f"  {ms:7.3f}  {name}" for name, ms in parts["ms_per_unit"].items()),
        "  most sampled frames (self):",
        *(f"  {count:7d}  {frame}" for frame, count in row.get("top_frames", [])),
    ]
    return "\n".join(lines)


def render_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as an aligned text table, CPU per pod in one column per process."""
    header = ["variant", "run", "qps", "pods/s", "span s", "x noop", "x none"]
    header += [f"{p} ms/pod" for p in PROCESSES]

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    body = [
        [
            row["variant"],
            str(row.get("run", 1)),
            str(row["qps"]),
            f"{row['pods_per_s']:.1f}",
            f"{row['span_s']:.2f}",
            cell(row["ratio_noop"]),
            cell(row["ratio_none"]),
            *(cell(row["cpu_ms_per_pod"].get(p)) for p in PROCESSES),
        ]
        for row in rows
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *body]
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--source", type=Path, help="run archfit from this checkout's extender/")
    parser.add_argument(
        "--default-qps",
        action="store_true",
        help=f"also run every variant at the shipped client limit (qps {SHIPPED_QPS})",
    )
    parser.add_argument("--before", type=Path, help="also run this checkout's archfit beside")
    parser.add_argument("--runs", type=int, default=1, help="measure the ratio's rows N times")
    parser.add_argument(
        "--only",
        nargs="+",
        default=(),
        choices=[v.name for v in VARIANTS],
        help="measure only these variants (and noop-extender, the ratio's reference)",
    )
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--keep", type=Path, help="keep logs and configs in this directory")
    args = parser.parse_args()
    try:
        rows = run(
            args.pods,
            args.nodes,
            args.source,
            args.default_qps,
            args.keep,
            args.runs,
            args.before,
            args.only,
        )
    except (Unavailable, BuildFailed, ValueError) as error:
        print(f"scheduler_throughput: {error}", file=sys.stderr)
        return 2
    except (BindsMissing, ExtenderSkipped) as error:
        print(f"scheduler_throughput: FAILED, no figures: {error}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"kube-scheduler {KUBERNETES}, {args.pods} pods on {args.nodes} nodes (half arm64), "
        f"config/scheduler-config.yaml; archfit from {args.source or harness.ROOT}; "
        f"qps {SHIPPED_QPS} is the shipped client limit"
    )
    print(render_table(rows))
    if spread(rows):
        print()
        print(render_spread(rows))
    for row in rows:
        if row.get("cpu_breakdown"):
            print()
            print(render_breakdown(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
