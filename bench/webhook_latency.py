"""What the admission webhook adds to a pod CREATE, with a cold and a warm cache.

Starts a real etcd, kube-apiserver and registry on loopback (tests/e2e helpers), and
archfit with its webhook registered through the shipped MutatingWebhookConfiguration
(self-managed certificate, called over TLS). Then times `create pod` through the
apiserver, one at a time:

- no webhook call: a namespace the webhook's namespaceSelector leaves out (the reference);
- webhook, cold: every pod names a freshly pushed image (a HEAD and a GET at least);
- webhook, warm: every pod names an image archfit has already resolved.

It also times archfit's handler alone (POST /mutate over TLS, warm), and prints the
added latency as medians' differences measured in this one run.

    .venv/bin/python -m bench.webhook_latency [--pods 100]
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from tests.e2e import binaries, cluster
from tests.e2e.archfit import archfit_settings
from tests.e2e.catalog import TempFactory, published
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.topology import NODES
from tests.e2e.webhook import NAMESPACE, WebhookArchfit
from tests.support.images import Pusher


def create_ms(core: Any, namespace: str, name: str, ref: str) -> float:
    """Milliseconds for one pod CREATE through kube-apiserver."""
    manifest = cluster.pod_manifest(name, [ref])
    started = time.perf_counter()
    core.create_namespaced_pod(namespace, manifest)
    return (time.perf_counter() - started) * 1000


async def handler_only(hook: WebhookArchfit, ref: str, count: int) -> list[float]:
    """Milliseconds per POST /mutate straight to archfit over TLS (warm cache)."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "bench",
            "operation": "CREATE",
            "object": cluster.pod_manifest("bench", [ref]),
        },
    }
    body = orjson.dumps(review)
    url = f"https://127.0.0.1:{hook.webhook_port}/mutate"
    samples = []
    context = ssl.create_default_context(cadata=hook.ca_bundle().decode())
    async with aiohttp.ClientSession() as session:
        for _ in range(count + 5):
            started = time.perf_counter()
            async with session.post(url, data=body, ssl=context) as response:
                await response.read()
            samples.append((time.perf_counter() - started) * 1000)
    return samples[5:]


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    args = parser.parse_args()
    bins = Binaries(binaries.build())
    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = Path(tmp)
        plane = ControlPlane(bins, root / "plane").start()
        try:
            core = cluster.core_api(plane.admin_kubeconfig)
            for node in NODES:
                cluster.create_node(core, node)
            with published(TempFactory(root)) as images:
                pusher = Pusher(images.public.url)
                fresh = [
                    pusher.index(f"bench/fresh-{i}", "1.0", ["linux/amd64", "linux/arm64"])[0]
                    for i in range(args.pods)
                ]
                warm_ref = images.multi.reference
                settings = archfit_settings(plane.admin_kubeconfig, images)
                settings["logging"] = {"level": "warning", "format": "json"}
                hook = WebhookArchfit(plane.admin_kubeconfig, settings, root / "archfit").start()
                try:
                    for namespace in ("cold", "warm"):
                        cluster.create_namespace(core, namespace)
                    # The webhook harness made archfit-system; pods need its default account.
                    core.create_namespaced_service_account(
                        NAMESPACE, {"metadata": {"name": "default"}}
                    )
                    hook.wait_called("warm", warm_ref)
                    # Round-robin, so a busy moment on the machine hits every variant alike.
                    # archfit-system is outside the webhook's namespaceSelector: the reference.
                    reference, cold, warm = [], [], []
                    for i, image in enumerate(fresh):
                        reference.append(create_ms(core, NAMESPACE, f"ref-{i}", warm_ref))
                        cold.append(create_ms(core, "cold", f"p{i}", image.reference))
                        warm.append(create_ms(core, "warm", f"p{i}", warm_ref))
                    direct = asyncio.run(handler_only(hook, warm_ref, args.pods))
                finally:
                    hook.stop()
        finally:
            plane.stop()
    ref50, _ = summary(reference)
    rows = [
        ("no webhook (reference)", reference),
        ("webhook, cold cache (fresh image each)", cold),
        ("webhook, warm cache", warm),
        ("archfit's handler alone, warm (TLS POST)", direct),
    ]
    print(f"pod CREATE through kube-apiserver, {args.pods} pods one at a time")
    print(f"{'variant':<44} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13}")
    for name, samples in rows:
        p50, p99 = summary(samples)
        added = "" if samples is reference or samples is direct else f"{p50 - ref50:13.2f}"
        print(f"{name:<44} {p50:8.2f} {p99:8.2f} {added:>13}")


if __name__ == "__main__":
    main()
