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
- then, in rounds of their own: archfit, cold cache (every pod names a freshly pushed
  image: a HEAD and a GET at least), beside its own reference.

It also times archfit's handler alone (POST /mutate over TLS, warm), counts the connections
the apiserver held to each webhook server (one each: no call pays a TLS handshake), and
prints the added latency as medians' differences measured in this one run. "archfit's
share" is archfit's warm row less the Go webhook that gives archfit's answer.

What a run on the 2-core bench machine, shared, said (issue 21 goal 6, <= 1 ms warm):
calling any webhook +0.4-0.8 ms, applying archfit's patch +0.4-1.0 ms more, so the Go
webhook with archfit's very answer already adds 0.8-1.9 ms; archfit's share on top
+0.5-1.0 ms. Over one connection, kept; of archfit's ~0.4 ms of CPU per call, aiohttp and
asyncio's TLS take about half (an aiohttp app answering a constant costs 0.2 ms here).

    .venv/bin/python -m bench.webhook_latency [--pods 100] [--before /work/old]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import ssl
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from kubernetes import client

from bench import harness
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
from tests.support.images import Pusher
from tests.support.process import free_port
from tests.support.tls import ServingCert, make_serving_cert
from tests.support.waiting import wait_for

#: The namespace label that picks a bench webhook; archfit's own configuration leaves out
#: every namespace that has it, so each namespace is sent to one webhook only.
VARIANT_LABEL = "bench.archfit.io/webhook"
BENCH_CONFIGURATION = "archfit-bench"
REFERENCE = "bench-none"


@dataclass
class Variant:
    """One row: the namespace its pods go to, and their CREATE times (ms)."""

    name: str
    namespace: str
    image: Callable[[int], str]
    samples: list[float] = field(default_factory=list)


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
    }
    merged = merge(settings, {"webhook": hook})
    archfit = Archfit(workdir, merged, name="archfit-before", env=harness.source_env(source))
    return archfit.start(), cert, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--before", type=Path, help="a checkout whose archfit to measure too")
    args = parser.parse_args()
    bins = Binaries(binaries.build())
    connections: dict[str, int] = {}
    noop_dir = binaries.run_build_script(harness.GO_BUILD, ("noop-webhook",), ("noop-webhook",))
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = Path(tmp)
        plane = ControlPlane(bins, root / "plane").start()
        try:
            executable = noop_dir / "noop-webhook"
            rows, direct = run(plane, root, args.pods, executable, args.before, connections)
        finally:
            plane.stop()
    report(rows, direct, args.pods, args.before)
    counted = ", ".join(f"{name} {count}" for name, count in connections.items())
    print(f"connections kube-apiserver opened to each webhook server during the rounds: {counted}")


def run(
    plane: ControlPlane,
    root: Path,
    pods: int,
    noop_executable: Path,
    before: Path | None,
    connections: dict[str, int],
) -> tuple[list[Variant], list[float]]:
    """The rows' CREATE times and the handler's alone; `connections` gets how many
    connections the apiserver held to each webhook server over the rounds."""
    core = cluster.core_api(plane.admin_kubeconfig)
    api = client.ApiClient(client.Configuration())
    admission = client.AdmissionregistrationV1Api(core.api_client)
    for node in NODES:
        cluster.create_node(core, node)
    with published(TempFactory(root)) as images:
        pusher = Pusher(images.public.url)
        fresh = [
            pusher.index(f"bench/fresh-{i}", "1.0", ["linux/amd64", "linux/arm64"])[0]
            for i in range(pods)
        ]
        warm_ref = images.multi.reference
        settings = archfit_settings(plane.admin_kubeconfig, images)
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
            hooks = [
                bench_hook("allow", "allow", f"{noop_url}/allow", noop_ca),
                bench_hook("answer", "answer", f"{noop_url}/answer", noop_ca),
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
            # Round-robin, so a busy moment on the machine hits every variant alike.
            ports = {"archfit": hook.webhook_port, "noop": noop.port}
            if before is not None:
                ports["archfit --before"] = old_port
            seen: dict[str, set[int]] = {name: set() for name in ports}
            for i in range(pods):
                # Each round starts one variant later, so none always follows the same one.
                for row in rows[i % len(rows) :] + rows[: i % len(rows)]:
                    row.samples.append(create_ms(core, row.namespace, f"p{i}", row.image(i)))
                for name, port in ports.items():
                    seen[name] |= peer_ports(port)
            # Cold apart, after the warm rounds: a CREATE that follows a cold one meets the
            # apiserver and archfit still busy with it (the registry, watch events), so it
            # would blur the warm rows it is interleaved with. Its own reference beside it.
            cold = [
                Variant("no webhook (reference for cold)", REFERENCE, warm),
                Variant(
                    "archfit, cold cache (fresh image each)", "cold", lambda i: fresh[i].reference
                ),
            ]
            for i in range(pods):
                for row in cold[i % 2 :] + cold[: i % 2]:
                    row.samples.append(create_ms(core, row.namespace, f"c{i}", row.image(i)))
            connections.update({name: len(peers) for name, peers in seen.items()})
            check_same_answer(core, api, rows)
            direct = asyncio.run(handler_only(hook.webhook_port, ca, body, pods))
        finally:
            for stop in reversed(stack):
                stop()
    return rows + cold, direct


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


def report(rows: list[Variant], direct: list[float], pods: int, before: Path | None) -> None:
    p50 = {row.name: summary(row.samples)[0] for row in rows}
    ref50 = p50["no webhook (reference)"]
    print(f"pod CREATE through kube-apiserver, {pods} pods one at a time, round-robin")
    if before is not None:
        print(f"--before: {harness.git_commit(before)} ({before})")
    print(f"{'variant':<44} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13}")
    for row in rows:
        mid, p99 = summary(row.samples)
        if row.namespace == REFERENCE:
            ref50, added = mid, ""  # the rows after it are measured against it
        else:
            added = f"{mid - ref50:13.2f}"
        print(f"{row.name:<44} {mid:8.2f} {p99:8.2f} {added:>13}")
    ref50 = p50["no webhook (reference)"]
    mid, p99 = summary(direct)
    print(f"{'archfit handler alone, warm (TLS POST)':<44} {mid:8.2f} {p99:8.2f}")
    floor = p50["Go webhook, archfit's answer"]
    print(
        f"any webhook: +{p50['Go do-nothing webhook (allowed, no patch)'] - ref50:.2f} ms; "
        f"applying archfit's patch: +{floor - p50['Go do-nothing webhook (allowed, no patch)']:.2f}"
        f" ms; archfit's share (warm less Go with its answer): "
        f"{p50['archfit, warm cache'] - floor:+.2f} ms"
    )


if __name__ == "__main__":
    main()
