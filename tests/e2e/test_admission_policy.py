"""The guarantee without archfit (issue 29): kube-apiserver's MutatingAdmissionPolicy applies
what archfit published, and holds what it did not, while archfit is killed or unreachable.

Its own control plane: the shipped CRD, policy and binding, archfit's webhook registered as
shipped, archfit publishing the parameter (admissionPolicy.enabled), and kube-scheduler
without the extender (the managed layout), so only what is written into a pod keeps it
off the wrong architecture.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import random
import signal
import ssl
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from extender.config.registry_settings import CacheSettings
from extender.core.mismatch import Evidence
from extender.core.parameter import table_key
from extender.core.platforms import parse
from extender.kube.evidence_store import ConfigMapEvidence
from extender.resolution.evidence_book import EvidenceBook
from tests.e2e import cluster
from tests.e2e.archfit import archfit_settings, merge
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.catalog import Images
from tests.e2e.conftest import HookedArchfit, OwnControlPlane
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.policy import (
    POLICY_REASON,
    AdmissionPolicy,
    bound_pod,
    fresh_image,
    hanging,
    is_gated,
    refused,
    required_arch,
)
from tests.e2e.scheduler import Scheduler
from tests.e2e.stack import Stack
from tests.e2e.topology import ARCH_OF, NODES, REPLICAS, replicas, schedule
from tests.e2e.webhook import PLATFORMS_ANNOTATION, WebhookArchfit
from tests.support import affinity
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

EQUALITY_PODS = int(os.environ.get("ARCHFIT_E2E_EQUALITY_PODS", "10000"))
"""Random pods the differential test creates in each of the three layouts: 10,000 keep the
whole suite inside CI's time (docs/webhook.md gives the cost of a 20,000-pod run;
`python -m bench.fuzz` runs more without an apiserver)."""
EQUALITY_SEED = 29
EQUALITY_WORKERS = int(os.environ.get("ARCHFIT_E2E_EQUALITY_WORKERS", "4"))
"""CREATEs in flight at once. 1 sends them one at a time and also times a fourth layout
without admission: the cost table in docs/webhook.md comes from such a run."""


class Plane:
    """A control plane with archfit's webhook and policy, and a scheduler without extender."""

    def __init__(
        self,
        control_plane: ControlPlane,
        hook: WebhookArchfit,
        policy: AdmissionPolicy,
        scheduler: Scheduler,
    ) -> None:
        self.control_plane, self.hook, self.policy, self.scheduler = (
            control_plane,
            hook,
            policy,
            scheduler,
        )
        self.core = cluster.core_api(control_plane.admin_kubeconfig)

    def kill_archfit(self) -> None:
        """SIGKILL every archfit process (a crash: its Leases stay held until they expire)."""
        process = self.hook.archfit.process
        if process.running():
            os.killpg(process.pid, signal.SIGKILL)
        process.stop()
        assert refused(self.hook.webhook_port)

    def start_archfit(self) -> None:
        self.hook.archfit.start()


@pytest.fixture(scope="module")
def plane(
    e2e_binaries: Binaries,
    own_control_plane: OwnControlPlane,
    hooked_archfit: HookedArchfit,
    images: Images,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Plane]:
    workdir = tmp_path_factory.mktemp("policy-plane")
    with own_control_plane(workdir / "control-plane") as control_plane:
        # failurePolicy Fail here: a CEL error must show as a failed create, not pass
        # unseen (test_a_malformed_parameter_never_blocks_a_pod installs it as shipped).
        policy = AdmissionPolicy(control_plane.admin_kubeconfig).install(failure_policy="Fail")
        settings = merge(
            archfit_settings(control_plane.admin_kubeconfig, images),
            {
                "admissionPolicy": {"enabled": True, "publishSeconds": 0.5},
                "webhook": {"gate": {"retrySeconds": 0.5, "maxWaitSeconds": 300}},
                "watcher": {"evidenceSyncSeconds": 0.5},
            },
        )
        with hooked_archfit(control_plane, settings, workdir) as hook:
            scheduler = Scheduler(
                e2e_binaries, workdir, control_plane.scheduler_kubeconfig, None, name="scheduler"
            ).start()
            try:
                yield Plane(control_plane, hook, policy, scheduler)
            finally:
                scheduler.stop()


@pytest.fixture
def space(plane: Plane) -> Iterator[str]:
    with cluster.scratch_namespace(plane.core, "pol") as name:
        yield name


@pytest.fixture
def archfit_back(plane: Plane) -> Iterator[Plane]:
    """Whatever a test does to archfit, it runs again afterwards."""
    try:
        yield plane
    finally:
        if not plane.hook.archfit.process.running():
            plane.start_archfit()


def warm(plane: Plane, namespace: str, *references: str) -> None:
    """A pod that names each image (bound, so nothing else reads it), published by archfit:
    what pods exist is what the policy lists."""
    for reference in references:
        name = f"warm-{uuid.uuid4().hex[:8]}"
        plane.core.create_namespaced_pod(namespace, bound_pod(name, [reference]))
    plane.policy.wait_published(*references)


def node_arch(plane: Plane, namespace: str, name: str) -> str:
    return ARCH_OF[cluster.wait_scheduled(plane.core, namespace, name)]


def held(plane: Plane, namespace: str, name: str, reference: str) -> None:
    """Create a pod of an image archfit never saw while archfit is away: the policy must
    hold it, and kube-scheduler leave it alone."""
    cluster.create_pod(plane.core, namespace, cluster.pod_manifest(name, [reference]))
    pod = plane.core.read_namespaced_pod(name, namespace)
    assert is_gated(pod), "an image the policy does not know must be held"
    assert pod.metadata.annotations["archfit.io/gated-reason"].startswith(POLICY_REASON)

    def scheduling_gated() -> bool:
        status = plane.core.read_namespaced_pod(name, namespace).status
        return any(c.reason == "SchedulingGated" for c in status.conditions or ())

    wait_for(scheduling_gated, "kube-scheduler to mark the held pod SchedulingGated")
    assert cluster.node_of(plane.core, namespace, name) is None


def released(plane: Plane, namespace: str, name: str) -> tuple[list[list[str]], str]:
    """Start archfit again: its releaser constrains and releases the held pod. Its required
    terms' arch values and its node's architecture."""
    plane.start_archfit()
    arch = node_arch(plane, namespace, name)
    pod = plane.core.read_namespaced_pod(name, namespace)
    assert not is_gated(pod)
    return required_arch(pod), arch


# --- archfit down, archfit unreachable ---------------------------------------------------


def test_with_archfit_killed_a_known_image_gets_amd64_and_an_unknown_one_is_held_until_it_returns(
    archfit_back: Plane, space: str, images: Images
) -> None:
    """Every archfit process SIGKILLed, its port refusing: the policy writes the webhook's
    constraint for an image archfit published, holds one it never saw, and archfit's return
    releases it onto amd64."""
    plane = archfit_back
    known = images.amd64_only.reference
    warm(plane, space, known)
    plane.kill_archfit()

    cluster.create_pod(plane.core, space, cluster.pod_manifest("known", [known]))
    pod = plane.core.read_namespaced_pod("known", space)
    assert [["amd64"]] == required_arch(pod)
    assert PLATFORMS_ANNOTATION not in (pod.metadata.annotations or {}), "archfit was down"
    assert "amd64" == node_arch(plane, space, "known")

    held(plane, space, "unseen", fresh_image(images))
    assert ([["amd64"]], "amd64") == released(plane, space, "unseen")


def test_with_archfit_unreachable_a_known_image_gets_amd64_and_an_unknown_one_is_held(
    archfit_back: Plane, space: str, images: Images
) -> None:
    """archfit's webhook address accepts connections and never answers: the same outcomes,
    each CREATE after the webhook's timeoutSeconds."""
    plane = archfit_back
    known = images.amd64_only.reference
    warm(plane, space, known)
    plane.kill_archfit()
    unseen = fresh_image(images)
    with hanging(plane.hook.webhook_port):
        cluster.create_pod(plane.core, space, cluster.pod_manifest("known", [known]))
        assert [["amd64"]] == required_arch(plane.core.read_namespaced_pod("known", space))
        assert "amd64" == node_arch(plane, space, "known")
        held(plane, space, "unseen", unseen)
    assert ([["amd64"]], "amd64") == released(plane, space, "unseen")


@pytest.fixture
def infrastructure(plane: Plane, request: pytest.FixtureRequest) -> Iterator[str]:
    """Karpenter's own namespace, or one a cluster admin labelled archfit.io/exclude=true."""
    if request.param == "karpenter":
        name, labels = "karpenter", {}
    else:
        name, labels = f"infra-{uuid.uuid4().hex[:8]}", {"archfit.io/exclude": "true"}
    with contextlib.suppress(ApiException):  # 409: an earlier test made it
        cluster.create_namespace(plane.core, name)
    plane.core.patch_namespace(name, {"metadata": {"labels": labels}})
    try:
        yield name
    finally:
        cluster.delete_namespace_pods(plane.core, name)


@pytest.mark.parametrize("infrastructure", ["karpenter", "labelled"], indirect=True)
def test_an_infrastructure_pod_is_neither_held_nor_kept_waiting_while_archfit_is_away(
    archfit_back: Plane, space: str, infrastructure: str, images: Images
) -> None:
    """archfit unreachable, the policy bound as shipped: a never-seen image's pod in Karpenter's
    namespace (or one labelled archfit.io/exclude=true) is created without a call to the
    webhook, not held, and scheduled; a tenant's pod of such an image is held as before."""
    plane = archfit_back
    plane.kill_archfit()
    with hanging(plane.hook.webhook_port) as webhook:
        cluster.create_pod(
            plane.core,
            infrastructure,
            cluster.pod_manifest("controller", [fresh_image(images)]),
        )
        infrastructure_calls = webhook.count
        held(plane, space, "tenant", fresh_image(images))
        tenant_calls = webhook.count - infrastructure_calls
    pod = plane.core.read_namespaced_pod("controller", infrastructure)
    assert (False, 0) == (is_gated(pod), infrastructure_calls)
    assert tenant_calls >= 1, "the count has teeth: the tenant's pod did call the webhook"
    assert cluster.wait_scheduled(plane.core, infrastructure, "controller") in ARCH_OF


def _scheduler_gated_pods(plane: Plane) -> float:
    """kube-scheduler's own `scheduler_pending_pods{queue="gated"}`, read as Prometheus does
    (its secure port, as a client the apiserver authorises: the admin certificate)."""
    certs = plane.control_plane.certs
    assert certs is not None
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed, on loopback
    context.load_cert_chain(str(certs.admin.cert), str(certs.admin.key))
    url = f"https://127.0.0.1:{plane.scheduler.port}/metrics"
    with urllib.request.urlopen(url, context=context, timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "scheduler_pending_pods" and sample.labels.get("queue") == "gated":
                return float(sample.value)
    raise AssertionError("kube-scheduler exports no scheduler_pending_pods{queue=gated}")


def test_kube_scheduler_counts_the_pods_the_policy_holds_with_archfit_gone(
    archfit_back: Plane, space: str, images: Images
) -> None:
    """ArchfitGatedPodsStranded reads kube-scheduler's gated count, which needs no archfit:
    with every archfit process killed, a held pod raises it by one."""
    plane = archfit_back
    plane.kill_archfit()
    before = _scheduler_gated_pods(plane)
    held(plane, space, "stranded", fresh_image(images))
    assert before + 1 == wait_for(
        lambda: (n := _scheduler_gated_pods(plane)) > before and n,
        "kube-scheduler to count the held pod as gated",
    )


def test_a_malformed_or_missing_parameter_never_blocks_a_pod(
    archfit_back: Plane, space: str, images: Images
) -> None:
    """With the shipped failurePolicy (Ignore), a parameter whose CEL fails (a platform bit
    of 0 divides by zero) or no parameter at all admits pods unchanged."""
    plane = archfit_back
    known = images.amd64_only.reference
    warm(plane, space, known)
    plane.kill_archfit()
    plane.policy.install()  # as shipped: failurePolicy Ignore
    try:
        spec = plane.policy.parameter()
        broken = [{**p, "bit": 0} for p in spec["platforms"]]
        plane.policy.patch_parameter({"platforms": broken})
        wait_for(lambda: plane.policy.parameter()["platforms"] == broken, "the broken parameter")
        for name in ("broken", "no-parameter"):
            if name == "no-parameter":
                plane.policy.delete_parameter()
            manifest = cluster.pod_manifest(name, [known])
            # Until kube-apiserver's informer has the shipped policy, the test's Fail refuses.
            wait_for(
                lambda m=manifest: cluster.create_pod(plane.core, space, m),  # type: ignore[misc]
                f"{name} created",
            )
            pod = plane.core.read_namespaced_pod(name, space)
            assert ([], False) == (required_arch(pod), is_gated(pod))
    finally:
        plane.policy.install(failure_policy="Fail")
        plane.start_archfit()
        warm(plane, space, known)


def test_on_a_cluster_without_archfits_crd_serve_says_so_once_and_runs_as_before(
    stack: Stack, core: client.CoreV1Api, namespace: str, images: Images
) -> None:
    """admissionPolicy.enabled where the policy cannot run (here: no ImagePlatforms CRD):
    one `admission_policy_unavailable` line, and the extender filters as ever."""
    stack.ensure({"admissionPolicy": {"enabled": True}})
    assert stack.archfit is not None
    pods = replicas("amd", [images.amd64_only.reference])
    assert ["amd64"] * REPLICAS == schedule(core, namespace, pods)
    lines = [
        json.loads(line)
        for line in stack.archfit.process.log_path.read_text().splitlines()
        if line.startswith("{") and "admission_policy" in line
    ]
    assert [("admission_policy_unavailable", "warning")] == [
        (line["event"], line["level"]) for line in lines
    ]
    assert "ImagePlatforms" in lines[0]["reason"]


# --- with the real Karpenter -----------------------------------------------------------------


@pytest.fixture
def autoscaled_policy(autoscaled: AutoscaledCluster) -> Iterator[AdmissionPolicy]:
    """The shipped policy on the autoscaled cluster; unbound afterwards (reset() does not)."""
    policy = AdmissionPolicy(autoscaled.control_plane.admin_kubeconfig).install()
    try:
        yield policy
    finally:
        policy.unbind()
        policy.delete_parameter()


@pytest.mark.parametrize("away", ["killed", "unreachable"])
def test_with_archfit_away_karpenter_launches_amd64_only_and_the_held_pod_waits_for_archfit(
    away: str,
    autoscaled: AutoscaledCluster,
    autoscaled_namespace: str,
    autoscaled_settings: dict[str, Any],
    autoscaled_policy: AdmissionPolicy,
    images: Images,
    tmp_path: Path,
) -> None:
    """Karpenter's heavier NodePool is arm64: with every archfit process killed (or its port
    accepting and never answering), the pod of a published amd64-only image still gets amd64
    capacity, the pod of an image archfit never saw is held (Karpenter acts only on pods
    kube-scheduler marked Unschedulable), and when archfit starts again the releaser sends it
    to amd64 too."""
    namespace = autoscaled_namespace
    settings = merge(
        autoscaled_settings,
        {
            "admissionPolicy": {"enabled": True, "publishSeconds": 0.5},
            "webhook": {
                "gate": {"retrySeconds": 0.5, "leaseName": f"releaser-{uuid.uuid4().hex[:8]}"}
            },
        },
    )
    hook = WebhookArchfit(autoscaled.control_plane.admin_kubeconfig, settings, tmp_path).start()
    try:
        hook.wait_called(namespace, images.multi.reference)
        autoscaled.start_scheduler(None)  # the managed layout: no extender
        known = images.amd64_only.reference
        autoscaled.core.create_namespaced_pod(namespace, bound_pod("warm", [known]))
        autoscaled_policy.wait_published(known)
        process = hook.archfit.process
        os.killpg(process.pid, signal.SIGKILL)
        process.stop()
        assert refused(hook.webhook_port)

        unseen = fresh_image(images)
        with contextlib.ExitStack() as stack:
            if away == "unreachable":
                stack.enter_context(hanging(hook.webhook_port))
            core = autoscaled.core
            cluster.create_pod(core, namespace, cluster.pod_manifest("unseen", [unseen]))
            assert is_gated(core.read_namespaced_pod("unseen", namespace))
            cluster.create_pod(core, namespace, cluster.pod_manifest("known", [known]))
            assert [["amd64"]] == required_arch(core.read_namespaced_pod("known", namespace))
            autoscaled.wait_scheduled(namespace, "known")
            assert is_gated(core.read_namespaced_pod("unseen", namespace))
        while_down = sorted({(launch.arch, launch.nodepool) for launch in autoscaled.launches()})

        hook.archfit.start()
        node = autoscaled.wait_scheduled(namespace, "unseen")
        arches = {launch.name: launch.arch for launch in autoscaled.launches()}
        print(f"\nkarpenter, archfit {away}: {while_down}; after its return: {arches}")
        assert [("amd64", "general")] == while_down
        assert ("amd64", {"amd64"}) == (arches[node], set(arches.values()))
    finally:
        hook.stop()


# --- equality: policy alone, webhook alone, both --------------------------------------------


LAYOUTS = ("policy", "webhook", "both")
TIMED = ("none", *LAYOUTS) if EQUALITY_WORKERS == 1 else LAYOUTS
"""`none` (neither) is timed only: the cost each layout adds to a CREATE, one at a time."""


def random_pod(
    rng: random.Random,
    pool: list[str],
    names: list[str],
    owners: list[dict[str, Any]],
    learned_image: str = "",
) -> dict[str, Any]:
    """A realistic pod (tests/support/affinity: existing, empty and arch terms, preferred
    terms) with images of the catalog, init containers and tolerations; some are a
    workload's (`owners`: a controller ownerReference each), the learned one's naming
    `learned_image` as its template does."""
    images = rng.sample(pool, rng.randint(1, 2))
    pod = affinity.random_pod(rng, images, names)
    spec = pod["spec"]
    if rng.random() < 0.3:
        spec["initContainers"] = [{"name": "init", "image": rng.choice(pool)}]
    if rng.random() < 0.4:
        spec["tolerations"] = [
            rng.choice(
                [
                    {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64",
                     "effect": "NoSchedule"},
                    {"key": "kubernetes.io/arch", "operator": "Exists"},
                    {"operator": "Exists"},
                    {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64",
                     "effect": "NoExecute"},
                    {"key": "dedicated", "operator": "Equal", "value": "batch"},
                ]
            )
        ]  # fmt: skip
    metadata: dict[str, Any] = {"generateName": "eq-"}
    if owners and rng.random() < 0.4:
        owner = rng.choice(owners)
        metadata["ownerReferences"] = [owner]
        if owner["name"] == LEARNED:
            # A ReplicaSet's pods are made from its template: they name its images.
            spec["containers"] = [{"name": "c0", "image": learned_image}]
            spec.pop("initContainers", None)
    return {"metadata": metadata, "spec": spec}


LEARNED = "eq-learned"
"""The ReplicaSet whose pods failed on arm64 with the multi-arch image (learned evidence)."""


def learned_workload(plane: Plane, namespace: str, images: Images) -> dict[str, Any]:
    """Evidence, as the mismatch watcher learns it, that the multi-arch image fails on arm64
    for one ReplicaSet's pods, shared through the ConfigMap archfit's replicas read; and a
    pod of that ReplicaSet, so the leader publishes what the evidence narrows for it. The
    controller ownerReference its pods carry."""
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": LEARNED,
        "uid": str(uuid.uuid4()),
        "controller": True,
    }
    now = time.time()
    evidence = Evidence(
        digest=images.multi.digest,
        platform=parse("linux/arm64"),
        image=images.multi.reference,
        reason="start",
        learned=now,
        expires=now + 3600,
        namespace=namespace,
        workload=f"ReplicaSet/{LEARNED}",
        said="exec /app: exec format error",
    )

    async def learn() -> None:
        api = cluster.kube_api(plane.control_plane.admin_kubeconfig)
        book = EvidenceBook(
            CacheSettings(), store=ConfigMapEvidence(api, "default", "archfit-evidence")
        )
        assert await book.learn(evidence) is not None
        await book.aclose()
        api.close()

    asyncio.run(learn())
    pod = bound_pod(f"{LEARNED}-running", [images.multi.reference], ownerReferences=[owner])
    plane.core.create_namespaced_pod(namespace, pod)
    name, key = f"{namespace}/ReplicaSet/{LEARNED}", table_key(images.multi.reference)

    def narrowed() -> bool:
        return key in (plane.policy.parameter().get("workloads") or {}).get(name, {})

    wait_for(narrowed, "the workload's evidence in the parameter")
    return owner


def outcome(plane: Plane, namespace: str, pod: dict[str, Any]) -> str:
    """The created pod's affinity and tolerations as JSON (a server-side dry run, which runs
    admission in full), or the apiserver's refusal."""
    try:
        # The answer as the API server's JSON: the client's models would cost the test
        # more CPU per pod than admission does.
        created = plane.core.create_namespaced_pod(
            namespace, pod, dry_run="All", _preload_content=False
        )
    except ApiException as error:
        return f"refused {error.status}"
    except ValueError:  # the client's own validation (a term list that is not a list)
        return "invalid"
    spec = json.loads(created.data)["spec"]
    return json.dumps([spec.get("affinity"), spec.get("tolerations")], sort_keys=True)


def use_layout(plane: Plane, namespace: str, layout: str, probe: str, known_image: str) -> None:
    """Bind the policy and register the webhook as `layout` says, and wait until
    kube-apiserver admits that way: an unknown image's hold names the policy when it is
    bound, and a known image gets archfit's annotation only from the webhook."""
    policy, webhook = layout in ("policy", "both"), layout in ("webhook", "both")
    if policy:
        plane.policy.bind()
    else:
        plane.policy.unbind()
    if webhook:
        plane.hook.register()
    else:
        plane.hook.unregister()
    unknown = cluster.pod_manifest("probe", [probe])
    known = cluster.pod_manifest("probe", [known_image])

    def admitted_as_asked() -> bool:
        held = plane.core.create_namespaced_pod(namespace, unknown, dry_run="All")
        reason = (held.metadata.annotations or {}).get("archfit.io/gated-reason", "")
        seen = plane.core.create_namespaced_pod(namespace, known, dry_run="All")
        annotated = PLATFORMS_ANNOTATION in (seen.metadata.annotations or {})
        return reason.startswith(POLICY_REASON) == policy and annotated == webhook

    wait_for(admitted_as_asked, f"kube-apiserver to admit as '{layout}'")


def test_policy_alone_webhook_alone_and_both_write_byte_identical_affinity_and_tolerations(
    plane: Plane, space: str, images: Images
) -> None:
    """Seeded random pods through the real apiserver, in each layout: the same affinity and
    tolerations (or the same refusal), so the policy decides as the webhook does and the
    two together add nothing twice."""
    repo = images.amd64_only.reference.rsplit(":", 1)[0]
    pinned = f"{repo}:spelled-in-pods@{images.amd64_only.digest}"
    pool = [
        images.amd64_only.reference,
        images.arm64_only.reference,
        images.multi.reference,
        images.s390x_only.reference,
        images.armv7_only.reference,
        pinned,
    ]
    # The digest-pinned image is published from another spelling of its digest.
    warm(plane, space, *pool[:-1], f"{repo}@{images.amd64_only.digest}")
    owner = learned_workload(plane, space, images)
    unrelated = {**owner, "name": "eq-other", "uid": str(uuid.uuid4())}
    unknown = images.unreachable_s390x_only.reference
    rng = random.Random(EQUALITY_SEED)
    names = [node.name for node in NODES]
    owners = [owner, unrelated]
    pods = [
        random_pod(rng, pool, names, owners, images.multi.reference) for _ in range(EQUALITY_PODS)
    ]
    results: dict[str, list[str]] = {}
    took: dict[str, float] = {}
    try:
        for layout in TIMED:
            use_layout(plane, space, layout, unknown, images.multi.reference)
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(EQUALITY_WORKERS) as creating:
                results[layout] = list(creating.map(lambda p: outcome(plane, space, p), pods))
            took[layout] = time.monotonic() - started
    finally:
        use_layout(plane, space, "both", unknown, images.multi.reference)
    webhook = results["webhook"]
    admitted = sum(1 for r in webhook if r.startswith("["))
    constrained = sum(1 for r in webhook if "kubernetes.io/arch" in r)
    print(
        f"\nequality: {EQUALITY_PODS} pods per layout ({admitted} admitted, {constrained} with "
        "an arch term), seconds " + ", ".join(f"{k} {v:.1f}" for k, v in took.items())
    )
    differ = [
        (i, {layout: results[layout][i] for layout in LAYOUTS})
        for i in range(len(pods))
        if len({results[layout][i] for layout in LAYOUTS}) > 1
    ]
    assert constrained > EQUALITY_PODS // 4, "the pods must exercise the constraint"
    # The learned workload's pods of the multi-arch image alone: evidence keeps them off arm64.
    learned = [
        webhook[i]
        for i, pod in enumerate(pods)
        if pod["metadata"].get("ownerReferences") == [owner]
        and "affinity" not in pod["spec"]
        and "nodeSelector" not in pod["spec"]
    ]
    assert learned, "the pods must exercise learned evidence"
    assert all('"values": ["amd64"]' in r for r in learned), learned[:3]
    assert [] == [(pods[i], found) for i, found in differ[:3]], f"{len(differ)} pods differ"
