"""What the workload warnings add to an apply: DaemonSet CREATE and UPDATE through the apiserver.

Starts a real etcd, kube-apiserver and registry on loopback (tests/e2e helpers), and archfit
with its webhook and the shipped workload warnings' ValidatingWebhookConfiguration (called
over TLS). Then, one at a time and round-robin, times:

- the reference: the same request in archfit-system, which the namespaceSelector leaves out;
- CREATE of a DaemonSet whose amd64-only image archfit has resolved (warm: one warning);
- CREATE with a freshly pushed image (cold: a HEAD and a GET at least);
- UPDATE that only relabels (the template is unchanged: nothing looked up);
- UPDATE that changes the image (between two warm images: a lookup from the cache);
- the real `kubectl apply` of a new DaemonSet, and of a relabelling, with and without.

Prints p50 and p99 per variant and the added p50 (medians' differences in this one run).

    .venv/bin/python bench/workload_warnings_latency.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client  # noqa: E402

from bench.webhook_latency import summary  # noqa: E402
from tests.e2e import binaries, cluster  # noqa: E402
from tests.e2e.archfit import archfit_settings  # noqa: E402
from tests.e2e.catalog import TempFactory, published  # noqa: E402
from tests.e2e.controlplane import Binaries, ControlPlane  # noqa: E402
from tests.e2e.topology import NODES  # noqa: E402
from tests.e2e.webhook import NAMESPACE, WebhookArchfit  # noqa: E402
from tests.support.images import Pusher  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

KUBECTL = "/usr/bin/kubectl"


def daemonset(name: str, image: str, label: str = "a") -> dict[str, Any]:
    match = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "labels": {"round": label}},
        "spec": {
            "selector": {"matchLabels": match},
            "template": {
                "metadata": {"labels": match},
                "spec": {"containers": [{"name": "agent", "image": image}]},
            },
        },
    }


def timed(call: Callable[[], object]) -> float:
    """Milliseconds `call` takes."""
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def kubectl(kubeconfig: Path, namespace: str, manifest: dict[str, Any]) -> str:
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), "-n", namespace, "apply", "-f", "-"],
        input=json.dumps(manifest),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    bins = Binaries(binaries.build())
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    with tempfile.TemporaryDirectory(prefix="archfit-bench-") as tmp:
        root = Path(tmp)
        plane = ControlPlane(bins, root / "plane").start()
        try:
            kubeconfig = plane.admin_kubeconfig
            core = cluster.core_api(kubeconfig)
            apps = client.AppsV1Api(core.api_client)
            for node in NODES:
                cluster.create_node(core, node)
            with published(TempFactory(root)) as images:
                pusher = Pusher(images.public.url)
                fresh = [
                    pusher.single(f"bench/agent-{i}", "1.0", "linux/amd64").reference
                    for i in range(args.rounds)
                ]
                warm = [images.amd64_only.reference, images.multi.reference]
                settings = archfit_settings(kubeconfig, images)
                settings["logging"] = {"level": "warning", "format": "json"}
                hook = WebhookArchfit(kubeconfig, settings, root / "archfit").start()
                try:
                    for namespace in ("warm", "cold"):
                        cluster.create_namespace(core, namespace)
                    probe = daemonset("probe", warm[0])
                    wait_for(
                        lambda: "archfit:" in kubectl(kubeconfig, "warm", probe),
                        "archfit's workload warnings to be called",
                    )
                    for i in range(args.rounds):
                        name, relabel = f"ds-{i}", {"metadata": {"labels": {"round": f"r{i}"}}}
                        image = {"spec": {"template": {"spec": {"containers": [
                            {"name": "agent", "image": warm[1]}]}}}}  # fmt: skip
                        for where, label in ((NAMESPACE, "reference"), ("warm", "warnings")):
                            calls = {
                                "CREATE, warm image": partial(
                                    apps.create_namespaced_daemon_set, where,
                                    daemonset(name, warm[0])),
                                "UPDATE, relabel only": partial(
                                    apps.patch_namespaced_daemon_set, name, where, relabel),
                                "UPDATE, image changed, warm": partial(
                                    apps.patch_namespaced_daemon_set, name, where, image),
                                "kubectl apply, new DaemonSet": partial(
                                    kubectl, kubeconfig, where, daemonset(f"k-{i}", warm[0])),
                                "kubectl apply, relabel only": partial(
                                    kubectl, kubeconfig, where,
                                    daemonset(f"k-{i}", warm[0], f"r{i}")),
                            }  # fmt: skip
                            for variant, call in calls.items():
                                add(f"{variant} ({label})", timed(call))
                        cold = partial(
                            apps.create_namespaced_daemon_set, "cold", daemonset(name, fresh[i])
                        )
                        add("CREATE, fresh image (warnings, cold)", timed(cold))
                finally:
                    hook.stop()
        finally:
            plane.stop()
    print(f"DaemonSet requests through kube-apiserver, {args.rounds} rounds, one at a time")
    print(f"{'variant':<52} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13}")
    for name, values in samples.items():
        p50, p99 = summary(values)
        added = ""
        if "(warnings" in name:
            base = name.replace("(warnings, cold)", "(reference)").replace(
                "(warnings)", "(reference)"
            )
            base = base.replace("fresh image", "warm image")
            added = f"{p50 - summary(samples[base])[0]:13.2f}"
        print(f"{name:<52} {p50:8.2f} {p99:8.2f} {added:>13}")


if __name__ == "__main__":
    main()
