"""A seeded property of learned evidence: whatever one tenant's pods do to crash, no pod of
another namespace loses a platform its images really run on.

The watcher (extender.controllers.watcher), its evidence book and the resolver that believes it
are the real ones; the pods are decoded as the pod watch decodes them. What stands in for kubelet
writes only what a real kubelet could write for that pod: a tenant controls its spec, its
logs and its termination message, and can cause a genuine start error by executing a file
it chose (a command, a volume, a working directory, PATH), but cannot make the runtime fail
to start an image's own entrypoint on a platform the image really runs on.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import orjson

from extender.config.registry_settings import CacheSettings
from extender.config.settings import WatcherSettings
from extender.controllers.watcher import Watcher
from extender.core.node_facts import NodeFacts
from extender.core.platforms import Platform, Rule, normalize
from extender.core.pods import PullSecretsRef, WorkloadId
from extender.kube.pod_watch import decode_pod
from extender.metrics import Metrics
from extender.registry.pure.reference import parse
from extender.resolution.evidence_book import EvidenceBook
from extender.resolution.learned_resolver import LearnedResolver, runs_on_some_node
from extender.resolution.within_deadline import RECENT_SECONDS, Resolution
from tests.support.clock import FakeClock
from tests.support.fakes import AnsweringRegistry, RecordingPodCalls, StaticNodes

SEED = 20261126
PODS = 2_000
NAMESPACES = [f"ns-{index}" for index in range(10)]
ARM64, AMD64 = normalize("linux", "arm64"), normalize("linux", "amd64")
TRUTH: dict[str, frozenset[Platform]] = {
    "registry.example/public/multi:1": frozenset({AMD64, ARM64}),
    "registry.example/public/multi:2": frozenset({AMD64, ARM64}),
    "registry.example/public/amd64-only:1": frozenset({AMD64}),
    "registry.example/public/arm64-only:1": frozenset({ARM64}),
}
"""What each public image really runs on; every index tells the truth."""
NODES: dict[str, NodeFacts] = {
    "amd-1": (AMD64, Rule.STRICT, False),
    "amd-2": (AMD64, Rule.STRICT, False),
    "arm-1": (ARM64, Rule.STRICT, False),
    "arm-2": (ARM64, Rule.STRICT, False),
}
START = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    'runc create failed: unable to start container process: exec: "{path}": exec format error'
)
CRASHES = ("log", "command", "args", "volume", "workdir", "path", "envfrom", "message", "honest")
"""How a tenant's container fails: its log says so; a start error of a file the pod chose
(command, args, an emptyDir an init container wrote, workingDir, PATH, envFrom); its
termination message says so; or honestly (the image lacks the node's platform)."""


def _digest(image: str) -> str:
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


HONEST = AnsweringRegistry({i: (_digest(i), p) for i, p in TRUTH.items()}, configs_agree=True)
"""Honest indexes: each entry's config agrees with its claim."""


def _pod(
    rng: random.Random,
    index: int,
    namespace: str,
    target: Platform | None,
    kubelet: RecordingPodCalls,
) -> Any:
    """A pod as kubelet reports it; `target`: the tenant's, aiming at that platform's nodes."""
    tenant = target is not None
    image = rng.choice(list(TRUTH))
    aimed = [n for n, facts in NODES.items() if facts[0] == target]
    node = rng.choice(aimed or list(NODES))
    runs = NODES[node][0] in TRUTH[image]
    workload = rng.choice(["ReplicaSet/web-5d9c", "ReplicaSet/api-77f1", "StatefulSet/db", ""])
    kind, _, owner = workload.partition("/")
    uid = f"uid-{index}"
    container: dict[str, Any] = {"name": "c0", "image": image}
    status: dict[str, Any] = {
        "name": "c0",
        "image": image,
        "imageID": f"{parse(image).name}@{_digest(image)}",
    }
    crash = rng.choice(CRASHES) if tenant else rng.choice(["honest", "app", "", ""])
    if crash == "honest" and runs:
        crash = ""  # a real runtime starts an image's own entrypoint where it runs
    if crash == "app":  # crash-loops for its own reasons: not Ready, failing
        status |= {"restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        kubelet.logs[(uid, "c0")] = "panic: config missing\n"
    elif crash in ("log", "message"):
        said = rng.choice(["exec format error", "Exec format error", "EXEC FORMAT ERROR: /app"])
        status |= {"restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        status["lastState"] = {
            "terminated": {"reason": "Error", "message": said if crash == "message" else ""}
        }
        kubelet.logs[(uid, "c0")] = f"starting\n{said}\n" if crash == "log" else ""
    elif crash:
        path = "/app"
        if crash == "command":
            container["command"] = ["/bin/sh", "-c", "/tmp/x"]
        elif crash == "args":
            container["args"] = ["/work/x"]
        elif crash == "volume":
            container["volumeMounts"] = [{"name": "w", "mountPath": "/usr/local/bin"}]
            path = "/usr/local/bin/app"
        elif crash == "workdir":
            container["workingDir"] = "/tmp"
        elif crash == "path":
            container["env"] = [{"name": "PATH", "value": "/tmp"}]
        elif crash == "envfrom":
            container["envFrom"] = [{"configMapRef": {"name": "env"}}]
        status |= {"restartCount": 1}
        status["state"] = {
            "terminated": {"reason": "StartError", "message": START.format(path=path)}
        }
    metadata: dict[str, Any] = {"name": f"p{index}", "namespace": namespace, "uid": uid}
    if owner:
        metadata["ownerReferences"] = [{"kind": kind, "name": owner, "controller": True}]
    return {
        "metadata": metadata,
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"containerStatuses": [status]},
    }


async def test_no_tenant_takes_a_platform_from_another_namespaces_pods() -> None:
    """2,000 random pods in 10 namespaces; one tenant's pods crash every way a pod spec can
    make them; every pod elsewhere still resolves to every platform its image runs on."""
    rng = random.Random(SEED)
    tenant = rng.choice(NAMESPACES)
    target = rng.choice([AMD64, ARM64])
    kubelet = RecordingPodCalls()
    book = EvidenceBook(CacheSettings())
    learned = LearnedResolver(HONEST, book, runnable=runs_on_some_node(lambda: NODES.values()))
    clock = FakeClock()
    resolution = Resolution(learned, evidence=learned, clock=clock)
    settings = WatcherSettings(
        logs_per_second=1e9, events_per_second=1e9, evictions_per_minute=1e9, remediate=True
    )
    watcher = Watcher(
        settings, Metrics(), kubelet, resolution, StaticNodes.of_facts(NODES), book, learned
    )
    pods = []
    for index in range(PODS):
        namespace = tenant if rng.random() < 0.5 else rng.choice(NAMESPACES)
        raw = _pod(rng, index, namespace, target if namespace == tenant else None, kubelet)
        pod = decode_pod(orjson.dumps(raw))
        pods.append(pod)
        watcher.on_pod("ADDED", pod)
    await watcher.drain()
    assert watcher.findings > 0, "the tenant's crashes were seen"
    assert any(entry.namespace == tenant for entry in book.entries()), "and taught its workloads"

    clock.advance(RECENT_SECONDS + 1)  # what the next pods are told, not the answers of before
    lost = {}
    for pod in pods:
        namespace = pod.metadata.namespace
        if namespace == tenant:
            continue
        resolved = await resolution.resolve(pod.images(), pod.pull(), 1.0, workload=pod.workload())
        for image, found in resolved.items():
            if found != TRUTH[image]:
                lost[(namespace, pod.workload().name, image)] = found
    for namespace in NAMESPACES:
        if namespace != tenant:  # a new workload of every image, in every other namespace
            fresh = WorkloadId(namespace, "ReplicaSet/new-0001")
            resolved = await resolution.resolve(
                TRUTH, PullSecretsRef(namespace), 1.0, workload=fresh
            )
            lost |= {(namespace, "new", i): f for i, f in resolved.items() if f != TRUTH[i]}
    assert {} == lost
    wrongly_evicted = [
        p.metadata.name
        for p in kubelet.evicted
        if p.metadata.namespace != tenant and NODES[p.spec.node_name][0] in TRUTH[p.images()[0]]
    ]
    assert [] == wrongly_evicted
