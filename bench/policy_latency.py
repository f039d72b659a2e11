"""What archfit's MutatingAdmissionPolicy adds to a pod CREATE, beside what its webhook adds.

Starts a real etcd, kube-apiserver and registry on loopback (tests/e2e helpers), archfit with
its webhook registered through the shipped configuration and publishing the policy's
parameter, and the shipped CRD, policy and binding. Then times `create pod` of an image
archfit knows (warm), one at a time, in rounds over the layouts:

- no admission: neither the webhook's configuration nor the policy's binding;
- webhook alone: what archfit's webhook adds;
- policy alone, with the parameter at 100, 1,000 and 10,000 images (archfit stopped, the
  parameter written by this script: archfit's own image and synthetic ones);
- policy and webhook: both, with the parameter archfit publishes.

Each layout is switched on and checked in effect (a probe pod) before its samples; the
figures are medians, and the "adds" column the difference from no admission in this run.

    .venv/bin/python -m bench.policy_latency [--pods 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.e2e import binaries, cluster
from tests.e2e.archfit import archfit_settings, merge
from tests.e2e.catalog import TempFactory, published
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.policy import GROUP, PARAMETER, PLURAL, VERSION, AdmissionPolicy
from tests.e2e.topology import NODES
from tests.e2e.webhook import PLATFORMS_ANNOTATION, WebhookArchfit
from tests.support.waiting import wait_for

SIZES = (100, 1_000, 10_000)
NAMESPACE = "bench-policy"


def synthetic(spec: dict[str, Any], size: int) -> dict[str, Any]:
    """archfit's published spec, with synthetic images up to `size` in all."""
    images = dict(spec["images"])
    for i in range(size - len(images)):
        images[f"registry.example.com/team-{i % 97}/app-{i:05d}:1.{i % 13}"] = 1 + i % 3
    return {**spec, "images": images}


def create_ms(core: Any, manifest: dict[str, Any]) -> float:
    started = time.perf_counter()
    core.create_namespaced_pod(NAMESPACE, manifest)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=200, help="creates per layout per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for line in run(args.pods, args.rounds):
        print(line)


def run(pods: int, rounds: int) -> list[str]:
    bins = Binaries(binaries.build())
    with tempfile.TemporaryDirectory(prefix="policy-latency-") as tmp:
        workdir = Path(tmp)
        plane = ControlPlane(bins, workdir / "control-plane").start()
        hook: WebhookArchfit | None = None
        try:
            (workdir / "images").mkdir()
            with published(TempFactory(workdir / "images")) as images:
                core = cluster.core_api(plane.admin_kubeconfig)
                for node in NODES:
                    cluster.create_node(core, node)
                cluster.create_namespace(core, NAMESPACE)
                policy = AdmissionPolicy(plane.admin_kubeconfig).install()
                settings = merge(
                    archfit_settings(plane.admin_kubeconfig, images),
                    {"admissionPolicy": {"enabled": True, "publishSeconds": 0.5}},
                )
                hook = WebhookArchfit(plane.admin_kubeconfig, settings, workdir).start()
                known = images.amd64_only.reference
                hook.wait_called(NAMESPACE, known)
                # The parameter lists the images pods name (the probe above is a dry-run,
                # never stored): one pod that names it keeps it there.
                cluster.create_pod(core, NAMESPACE, cluster.pod_manifest("names-it", [known]))
                spec = policy.wait_published(known)
                return _rounds(core, policy, hook, spec, known, pods, rounds)
        finally:
            if hook is not None:
                hook.stop()
            plane.stop()


def _rounds(
    core: Any,
    policy: AdmissionPolicy,
    hook: WebhookArchfit,
    spec: dict[str, Any],
    known: str,
    pods: int,
    rounds: int,
) -> list[str]:
    manifest = {**cluster.pod_manifest("p", [known]), "metadata": {"generateName": "p-"}}
    layouts = ["none", "webhook", *(f"policy-{n}" for n in SIZES), "both"]
    samples: dict[str, list[float]] = {layout: [] for layout in layouts}
    for _ in range(rounds):
        for layout in layouts:
            _use(core, policy, hook, spec, layout, manifest)
            for _ in range(10):  # warm the connection and the informers
                create_ms(core, manifest)
            samples[layout] += [create_ms(core, manifest) for _ in range(pods)]
            core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
    reference = statistics.median(samples["none"])
    lines = [
        f"pod CREATE of a known amd64-only image, {rounds} rounds x {pods} creates per layout",
        "",
        "| layout | median ms | adds ms |",
        "|---|---|---|",
    ]
    for layout, values in samples.items():
        median = statistics.median(values)
        lines.append(f"| {layout} | {median:.2f} | {median - reference:+.2f} |")
    return lines


def _use(
    core: Any,
    policy: AdmissionPolicy,
    hook: WebhookArchfit,
    spec: dict[str, Any],
    layout: str,
    manifest: dict[str, Any],
) -> None:
    """Switch to `layout` and wait until a probe CREATE shows it in effect."""
    webhook = layout in ("webhook", "both")
    policed = layout != "none" and layout != "webhook"
    if policed:
        policy.bind()
    else:
        policy.unbind()
    if layout.startswith("policy-"):
        if hook.archfit.process.running():
            hook.archfit.stop()
        size = int(layout.removeprefix("policy-"))
        current = policy.objects.get_cluster_custom_object(GROUP, VERSION, PLURAL, PARAMETER)
        current["spec"] = synthetic(spec, size)
        policy.objects.replace_cluster_custom_object(GROUP, VERSION, PLURAL, PARAMETER, current)
    elif not hook.archfit.process.running():
        hook.archfit.start()
    if webhook:
        hook.register()
    else:
        hook.unregister()

    def in_effect() -> bool:
        created = core.create_namespaced_pod(NAMESPACE, manifest, dry_run="All")
        annotated = PLATFORMS_ANNOTATION in (created.metadata.annotations or {})
        constrained = created.spec.affinity is not None
        return annotated == webhook and constrained == (webhook or policed)

    wait_for(in_effect, f"the layout {layout}")


if __name__ == "__main__":
    main()
