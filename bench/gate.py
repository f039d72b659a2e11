"""A slow or failing registry against archfit's gate, with the real Karpenter (issue 17).

Starts the autoscaled cluster of the e2e tests (etcd, kube-apiserver, Karpenter with the kwok
provider: a `graviton` arm64 NodePool of weight 30 beside a `general` amd64 one of weight 10,
no nodes), the registry of the e2e catalog with a delaying proxy in front, and archfit with
its webhook registered (`webhook.unknownImages: gate`, or `admit` for the control rows).
For each fault and layout it creates one pod of a freshly pushed amd64-only image, waits
until it binds, and prints: wrong-architecture launches, whether the pod was held, CREATE
time, and the time from the registry's answer to the bind. Then a rollout: `--rollout` pods
of one cold image at once, with the registry's first answer 5 s late: registry requests, how
many were held, and how fast they were released.

    .venv/bin/python -m bench.gate [--rollout 200] [--quick]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.e2e import binaries, cluster
from tests.e2e.archfit import archfit_settings
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.catalog import TempFactory, published
from tests.e2e.controlplane import Binaries
from tests.e2e.gating import (
    FAULTS,
    fresh_amd64_image,
    gate_settings,
    logged,
    logged_at,
    run_case,
)
from tests.e2e.karpenter import KarpenterBuild
from tests.e2e.webhook import WebhookArchfit
from tests.support.delaying_proxy import DelayingProxy
from tests.support.waiting import wait_for


def cases(
    autoscaled: AutoscaledCluster,
    base: dict[str, Any],
    proxy: DelayingProxy,
    url: str,
    root: Path,
    faults: list[tuple[str, float]],
) -> None:
    print(
        "| unknownImages | fault | layout | wrong launches | held | CREATE s | answer to bind s |"
    )
    print("|---|---|---|---|---|---|---|")
    rows = [("gate", f, s, layout) for f, s in faults for layout in ("webhook", "extender")]
    rows.append(("admit", "first", 5.0, "webhook"))
    for index, (mode, fault, seconds, layout) in enumerate(rows):
        autoscaled.reset()
        namespace = autoscaled.create_namespace(f"gate-{index}")
        proxy.reset()
        hook = WebhookArchfit(
            autoscaled.control_plane.admin_kubeconfig,
            gate_settings(base, proxy, unknown_images=mode),
            root / f"archfit-{index}",
        ).start()
        try:
            hook.wait_called(namespace, fresh_amd64_image(url, proxy))
            proxy.reset()
            autoscaled.start_scheduler(hook.url_prefix if layout == "extender" else None)
            result = run_case(
                autoscaled, namespace, proxy, fresh_amd64_image(url, proxy), fault, seconds
            )
        finally:
            hook.stop()
        to_bind = "-" if result.answer_to_bind_s is None else f"{result.answer_to_bind_s:.1f}"
        label = (
            f"+{seconds:g} s first answer"
            if fault == "first"
            else (f"+{seconds:g} s every answer" if fault == "each" else f"503 for {seconds:g} s")
        )
        print(
            f"| {mode} | {label} | {layout} | {result.wrong_launches} | {result.held} | "
            f"{result.created_s:.2f} | {to_bind} |",
            flush=True,
        )


def rollout(
    autoscaled: AutoscaledCluster,
    base: dict[str, Any],
    proxy: DelayingProxy,
    url: str,
    root: Path,
    count: int,
) -> None:
    autoscaled.reset()
    namespace = autoscaled.create_namespace("rollout")
    proxy.reset()
    hook = WebhookArchfit(
        autoscaled.control_plane.admin_kubeconfig, gate_settings(base, proxy), root / "roll"
    ).start()
    try:
        hook.wait_called(namespace, fresh_amd64_image(url, proxy))
        autoscaled.start_scheduler(None)
        reference = fresh_amd64_image(url, proxy)
        proxy.reset()
        proxy.delay_first(5.0)
        manifests = [cluster.pod_manifest(f"r-{i}", [reference]) for i in range(count)]
        started = time.time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            list(pool.map(lambda m: cluster.create_pod(autoscaled.core, namespace, m), manifests))
        created = time.time() - started
        held = sum(1 for line in logged(hook, "pod_admitted") if line.get("outcome") == "gated")
        wait_for(lambda: len(logged(hook, "pod_released")) >= held, "releases", seconds=300)
        answered = proxy.first_answer() or started
        releases = sorted(logged_at(line) for line in logged(hook, "pod_released"))
        span = releases[-1] - releases[0] if len(releases) > 1 else 0.0
        print(
            f"rollout: {count} pods created in {created:.1f} s; {held} held; registry manifest "
            f"requests {proxy.relayed('manifest')}, blob requests {proxy.relayed('blob')}; "
            f"first release {releases[0] - answered:.2f} s, last "
            f"{releases[-1] - answered:.2f} s "
            f"after the registry's answer; {len(releases) / max(span, 1e-9):.0f} releases/s",
            flush=True,
        )
        for manifest in manifests:
            cluster.wait_scheduled(autoscaled.core, namespace, manifest["metadata"]["name"], 600)
        arches = sorted({launch.arch for launch in autoscaled.launches()})
        print(f"rollout: every pod bound; Karpenter launched {arches}")
    finally:
        hook.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollout", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="0 s and 5 s cases only")
    args = parser.parse_args()
    bins = Binaries(binaries.build())
    build = KarpenterBuild(binaries.build_karpenter())
    faults = [f for f in FAULTS if f[1] in (0.0, 5.0) and f[0] == "first"] if args.quick else FAULTS
    with tempfile.TemporaryDirectory(prefix="archfit-bench-gate-") as tmp:
        root = Path(tmp)
        autoscaled = AutoscaledCluster(bins, build, root / "autoscaled").start()
        try:
            with published(TempFactory(root)) as images:
                base = archfit_settings(autoscaled.control_plane.admin_kubeconfig, images)
                with DelayingProxy(images.public.url) as proxy:
                    url = images.public.url
                    cases(autoscaled, base, proxy, url, root, faults)
                    if args.rollout:
                        rollout(autoscaled, base, proxy, url, root, args.rollout)
        finally:
            autoscaled.stop()


if __name__ == "__main__":
    main()
