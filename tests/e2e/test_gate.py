"""A slow registry never lets a pod land where it cannot run (issue 17), with the real Karpenter.

The autoscaled cluster starts with no nodes; Karpenter's heavier NodePool is arm64
(graviton), so an unconstrained amd64-only pod gets an arm64 node: the trap. Each test
pushes a fresh amd64-only image and reaches it through a delaying proxy in front of the
real registry, which answers late, with 503, or not at all. archfit's webhook holds what it
cannot decide in time (a scheduling gate); the releaser writes the constraint when the
lookup answers, and Karpenter launches amd64. `pytest -s` prints what each case measured.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import cluster
from tests.e2e.archfit import archfit_command, merge
from tests.e2e.autoscaler import AutoscaledCluster
from tests.e2e.catalog import Images
from tests.e2e.gating import (
    FAULTS,
    fresh_amd64_image,
    gate_settings,
    logged,
    logged_at,
    run_case,
)
from tests.e2e.webhook import WebhookArchfit
from tests.support.delaying_proxy import DelayingProxy
from tests.support.images import Pusher
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

GATE = "archfit.io/platforms-unknown"
SHARE = "archfit.io/arm64-share"
CHOICE = "archfit.io/arch-choice"
GATED_LABEL = "archfit.io/gated"
#: The webhook's deadline (webhook.resolveDeadlineSeconds, default 2 s).
DEADLINE_SECONDS = 2.0
#: The shipped MutatingWebhookConfiguration's timeoutSeconds.
WEBHOOK_TIMEOUT_SECONDS = 3


@pytest.fixture(scope="module")
def proxy(images: Images) -> Iterator[DelayingProxy]:
    """A registry front on loopback that the tests make slow, failing or silent."""
    with DelayingProxy(images.public.url) as running:
        yield running


@dataclasses.dataclass
class GateCase:
    """What each test here works with: the autoscaled cluster at zero nodes and a namespace of
    its own in it, the registry front the test makes slow, the images, and a directory; every
    archfit it starts is stopped when the test ends."""

    autoscaled: AutoscaledCluster
    namespace: str
    base_settings: dict[str, Any]
    """The settings of an archfit that watches the autoscaled cluster."""
    proxy: DelayingProxy
    images: Images
    workdir: Path
    started: list[WebhookArchfit] = dataclasses.field(default_factory=list)

    def settings(self, **gate: Any) -> dict[str, Any]:
        """The gate case's settings (gating.gate_settings), the proxy a registry."""
        return gate_settings(self.base_settings, self.proxy, **gate)

    def fresh(self) -> str:
        """A new amd64-only image, named through the proxy."""
        return fresh_amd64_image(self.images.public.url, self.proxy)

    def archfit(self, settings: dict[str, Any], directory: str = "archfit") -> WebhookArchfit:
        """archfit with `settings`, its webhook registered and seen called in the namespace,
        in a directory of its own."""
        hook = WebhookArchfit(
            self.autoscaled.control_plane.admin_kubeconfig, settings, self.workdir / directory
        )
        self.started.append(hook)
        hook.start()
        hook.wait_called(self.namespace, self.images.multi.reference)
        return hook


@pytest.fixture
def case(
    autoscaled: AutoscaledCluster,
    autoscaled_namespace: str,
    autoscaled_settings: dict[str, Any],
    proxy: DelayingProxy,
    images: Images,
    tmp_path: Path,
) -> Iterator[GateCase]:
    """A test's cluster, namespace, registry front and images; the front answers at once
    before and after, and every archfit the test started is stopped."""
    proxy.reset()
    found = GateCase(autoscaled, autoscaled_namespace, autoscaled_settings, proxy, images, tmp_path)
    try:
        yield found
    finally:
        proxy.reset()
        for hook in found.started:
            hook.stop()


@pytest.fixture
def gating(case: GateCase) -> WebhookArchfit:
    """archfit with its webhook registered and `webhook.unknownImages: gate`."""
    return case.archfit(case.settings())


def pod_of(autoscaled: AutoscaledCluster, namespace: str, name: str) -> Any:
    return autoscaled.core.read_namespaced_pod(name, namespace)


def launched(autoscaled: AutoscaledCluster) -> list[tuple[str, str]]:
    return sorted({(launch.arch, launch.nodepool) for launch in autoscaled.launches()})


# --- 1. slow, failing and per-response-slow registries, both layouts ----------------------


@pytest.mark.parametrize("layout", ["webhook", "extender"])
@pytest.mark.parametrize(("fault", "seconds"), FAULTS, ids=[f"{f}-{s:g}s" for f, s in FAULTS])
def test_a_slow_or_failing_registry_never_launches_or_binds_the_wrong_architecture(
    case: GateCase,
    gating: WebhookArchfit,
    layout: str,
    fault: str,
    seconds: float,
) -> None:
    """Held until the lookup answers, then constrained: Karpenter launches amd64 only."""
    case.autoscaled.start_scheduler(gating.url_prefix if layout == "extender" else None)
    result = run_case(case.autoscaled, case.namespace, case.proxy, case.fresh(), fault, seconds)
    print(f"{fault} {seconds:g}s, {layout}: {result}")
    assert ([("amd64", "general")], "amd64") == (result.launches, result.node_arch)
    # A lookup that misses the deadline is held; one within it is constrained at once.
    slow = (fault == "first" and seconds > DEADLINE_SECONDS) or fault in ("each", "503")
    assert slow == result.held
    # kube-apiserver cuts a later answer off at exactly timeoutSeconds: not sooner.
    assert result.created_s < WEBHOOK_TIMEOUT_SECONDS


def test_control_run_with_admit_the_trap_reappears(
    case: GateCase,
) -> None:
    """`webhook.unknownImages: admit` at a 5 s first lookup: Karpenter launches arm64."""
    settings = case.settings(unknown_images="admit")
    case.archfit(settings)
    case.autoscaled.start_scheduler(None)
    reference = case.fresh()
    case.proxy.delay_first(5.0)
    name = cluster.create_pod(
        case.autoscaled.core, case.namespace, cluster.pod_manifest("trap", [reference])
    )
    case.autoscaled.wait_scheduled(case.namespace, name)
    print(f"control run (admit, 5 s): launches {launched(case.autoscaled)}")
    assert [("arm64", "graviton")] == launched(case.autoscaled)


# --- 3. an outage: pods created during it are held, then released right ----------------------


def test_pods_created_during_a_registry_outage_are_held_then_released_with_the_constraint(
    case: GateCase,
    gating: WebhookArchfit,
) -> None:
    """503 for 20 s: three pods created 0, 5 and 10 s in are held, then bind on amd64."""
    case.autoscaled.start_scheduler(None)
    reference = case.fresh()
    case.proxy.fail_for(20.0)
    names = []
    for index in range(3):
        names.append(
            cluster.create_pod(
                case.autoscaled.core,
                case.namespace,
                cluster.pod_manifest(f"outage-{index}", [reference]),
            )
        )
        pod = pod_of(case.autoscaled, case.namespace, names[-1])
        assert [GATE] == [g.name for g in pod.spec.scheduling_gates or []]
        assert "true" == pod.metadata.labels[GATED_LABEL]
        time.sleep(5.0)
    for name in names:
        case.autoscaled.wait_scheduled(case.namespace, name)
        pod = pod_of(case.autoscaled, case.namespace, name)
        terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        expressions = [
            (e.key, e.values) for t in terms.node_selector_terms for e in t.match_expressions
        ]
        assert [("kubernetes.io/arch", ["amd64"])] == expressions
    assert [("amd64", "general")] == launched(case.autoscaled)


# --- 4. stale-if-error: a tag known before the outage ----------------------------------------


def test_a_tag_known_before_an_outage_is_answered_from_the_last_good_lookup_without_a_gate(
    case: GateCase,
) -> None:
    """Tag TTL 1 s, then 503: the last good digest answers, so the pod is constrained at once."""
    settings = merge(case.settings(), {"cache": {"tagTtlSeconds": 1}})
    hook = case.archfit(settings)
    case.autoscaled.start_scheduler(None)
    reference = case.fresh()
    first = cluster.create_pod(
        case.autoscaled.core, case.namespace, cluster.pod_manifest("before", [reference])
    )
    # Past the tag's TTL and the 5 s in which a known answer is reused without asking.
    time.sleep(7.0)
    case.proxy.fail_for(60.0)
    second = cluster.create_pod(
        case.autoscaled.core, case.namespace, cluster.pod_manifest("during", [reference])
    )
    pod = pod_of(case.autoscaled, case.namespace, second)
    terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert ([], [("kubernetes.io/arch", ["amd64"])]) == (
        [g.name for g in pod.spec.scheduling_gates or []],
        [(e.key, e.values) for t in terms.node_selector_terms for e in t.match_expressions],
    )
    # An answer that waited for the deadline would be unknown, so gated: the gate's absence
    # and the constraint say the stale digest answered at once, with no wall clock to read.
    assert 1 <= len(logged(hook, "image_answered_stale"))
    for name in (first, second):
        case.autoscaled.wait_scheduled(case.namespace, name)
    assert [("amd64", "general")] == launched(case.autoscaled)


# --- 5. a crash, and `archfit release --all` ---------------------------------------------------


def test_a_new_archfit_takes_the_lease_and_releases_what_a_killed_one_held(
    case: GateCase,
) -> None:
    """SIGKILL mid-hold; the successor waits out the Lease, lists the held pods, releases them."""
    settings = case.settings()
    first = case.archfit(settings, "first")
    case.autoscaled.start_scheduler(None)
    reference = case.fresh()
    case.proxy.hang()
    names = _create_concurrently(case.autoscaled, case.namespace, "crash", reference, 3)
    for name in names:
        assert GATED_LABEL in (pod_of(case.autoscaled, case.namespace, name).metadata.labels or {})
    assert first.archfit.process.pid is not None
    os.killpg(first.archfit.process.pid, signal.SIGKILL)
    second = case.archfit(settings, "second")
    case.proxy.hang(False)
    for name in names:
        case.autoscaled.wait_scheduled(case.namespace, name)
    assert [("amd64", "general")] == launched(case.autoscaled)
    assert len(logged(second, "pod_released")) == len(names)


def test_release_all_removes_every_archfit_gate_when_archfit_is_gone(
    case: GateCase,
    gating: WebhookArchfit,
) -> None:
    """The uninstall path: archfit stopped, registry silent, `archfit release --all` unblocks."""
    reference = case.fresh()
    case.proxy.hang()
    try:
        names = _create_concurrently(case.autoscaled, case.namespace, "orphan", reference, 2)
        gating.stop()
        result = subprocess.run(
            [*archfit_command(), "release", "--all", "--config", str(gating.archfit.config_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        case.proxy.hang(False)
    assert 0 == result.returncode, result.stderr
    for name in names:
        pod = pod_of(case.autoscaled, case.namespace, name)
        assert ([], None) == (
            [g.name for g in pod.spec.scheduling_gates or []],
            (pod.metadata.labels or {}).get(GATED_LABEL),
        )
    events = case.autoscaled.core.list_namespaced_event(
        case.namespace, field_selector="reason=ArchfitReleasedByCommand"
    ).items
    assert sorted(names) == sorted(e.involved_object.name for e in events)


# --- 6. the cap -------------------------------------------------------------------------------


def test_a_registry_that_never_answers_releases_the_pod_at_the_cap_with_the_fallback(
    case: GateCase,
) -> None:
    """Cap 8 s, fallback `known`: the amd64-only sidecar that did resolve keeps it off arm64."""
    settings = case.settings(maxWaitSeconds=8, fallback="known")
    case.archfit(settings)
    case.autoscaled.start_scheduler(None)
    silent = case.fresh()
    manifest = cluster.pod_manifest("capped", [silent, case.images.amd64_only.reference])
    case.proxy.hang()
    name = cluster.create_pod(case.autoscaled.core, case.namespace, manifest)
    case.autoscaled.wait_scheduled(case.namespace, name)
    events = case.autoscaled.core.list_namespaced_event(
        case.namespace, field_selector=f"involvedObject.name={name}"
    ).items
    capped = [e for e in events if e.reason == "ArchfitReleasedAtCap"]
    assert 1 == len(capped), [e.reason for e in events]
    assert "fallback known" in capped[0].message
    assert silent in capped[0].message
    assert [("amd64", "general")] == launched(case.autoscaled)


# --- 7. a rollout of a cold image --------------------------------------------------------------


def test_a_rollout_of_200_pods_of_a_cold_image_costs_one_lookup_and_releases_fast(
    case: GateCase,
    gating: WebhookArchfit,
) -> None:
    """One registry lookup for all 200, every held pod released after it, amd64 only.

    How soon after the answer is bench/gate.py's figure (issue 17 asked for 10 s): a
    wall-clock bound here failed on loaded CI runners."""
    case.autoscaled.start_scheduler(None)
    reference = case.fresh()
    case.proxy.delay_first(5.0)
    names = _create_concurrently(case.autoscaled, case.namespace, "rollout", reference, 200)
    wait_for(
        lambda: len(logged(gating, "pod_released")) >= _held_count(gating),
        "every held pod to be released",
        seconds=120,
    )
    answered = case.proxy.last_answer()
    assert answered is not None
    releases = [logged_at(line) for line in logged(gating, "pod_released")]
    latest = max(releases, default=answered) - answered
    print(
        f"rollout: {len(names)} pods, {_held_count(gating)} held, {case.proxy.relayed()} manifest "
        f"requests, last release {latest:.1f}s after the answer"
    )
    # One lookup of a single-arch tag: a GET of the tag (HEAD, then GET by digest, if it were
    # revalidated).
    assert case.proxy.relayed("manifest") <= 2
    assert answered <= min(releases)
    for name in names:
        cluster.wait_scheduled(case.autoscaled.core, case.namespace, name, timeout=300)
    assert [("amd64", "general")] == launched(case.autoscaled)


# --- 8. the apiserver's rules for gated pods ---------------------------------------------------

SHAPES: dict[str, dict[str, Any]] = {
    "own-term": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "example.com/team", "operator": "DoesNotExist"}]}
                ]
            }
        }
    },
    "own-arch-term": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/arch",
                                "operator": "In",
                                "values": ["amd64", "arm64"],
                            }
                        ]
                    }
                ]
            }
        }
    },
    "preferred": {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [
                            {"key": "example.com/disk", "operator": "In", "values": ["ssd"]}
                        ]
                    },
                }
            ]
        }
    },
}


@pytest.mark.parametrize("shape", [*SHAPES, "tolerations"])
def test_a_held_pod_with_its_own_constraints_is_released_without_the_apiserver_refusing(
    case: GateCase,
    gating: WebhookArchfit,
    shape: str,
) -> None:
    """KEP-3838: expressions ANDed into existing terms, preferred terms and tolerations kept."""
    case.autoscaled.start_scheduler(None)
    reference = case.fresh()
    manifest = cluster.pod_manifest(f"shape-{shape}", [reference])
    if shape == "tolerations":
        manifest["spec"]["tolerations"] = [{"key": "example.com/batch", "operator": "Exists"}]
    else:
        manifest["spec"]["affinity"] = SHAPES[shape]
    with case.proxy.hung():
        name = cluster.create_pod(case.autoscaled.core, case.namespace, manifest)
        assert GATED_LABEL in (pod_of(case.autoscaled, case.namespace, name).metadata.labels or {})
    case.autoscaled.wait_scheduled(case.namespace, name)
    assert [] == logged(gating, "pod_release_refused")
    assert [("amd64", "general")] == launched(case.autoscaled)
    released = case.autoscaled.api_client.sanitize_for_serialization(
        pod_of(case.autoscaled, case.namespace, name)
    )
    original = manifest["spec"].get("affinity", {}).get("nodeAffinity", {})
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    before = original.get(required, {}).get("nodeSelectorTerms", [])
    after = released["spec"]["affinity"]["nodeAffinity"][required]["nodeSelectorTerms"]
    # Each of the pod's own terms is kept as a prefix of what it became; none added.
    assert [t["matchExpressions"] for t in before] == [
        t["matchExpressions"][: len(b["matchExpressions"])]
        for t, b in zip(after, before, strict=False)
    ]
    assert len(before or [None]) == len(after)
    for kept in ("preferredDuringSchedulingIgnoredDuringExecution",):
        for term in original.get(kept, []):
            assert term in released["spec"]["affinity"]["nodeAffinity"][kept]
    if shape == "tolerations":
        assert {"key": "example.com/batch", "operator": "Exists"} in released["spec"]["tolerations"]


def test_held_pods_are_released_with_their_namespaces_arm64_share(
    case: GateCase,
    gating: WebhookArchfit,
) -> None:
    """The namespace says arm64-share 50; four pods of a new multi-arch image, held while the
    registry hangs, are released two on arm64 and two on amd64 (labelled and required), as
    admission would have split them, and Karpenter launches both kinds."""
    namespace = case.namespace
    case.autoscaled.start_scheduler(None)
    case.autoscaled.core.patch_namespace(namespace, {"metadata": {"annotations": {SHARE: "50"}}})
    probe = cluster.pod_manifest("probe", [case.images.multi.reference])

    def share_seen() -> bool:  # the namespace watch carries the annotation to archfit
        case.autoscaled.core.create_namespaced_pod(namespace, probe, dry_run="All")
        return any(line.get("share_from") == "namespace" for line in logged(gating, "pod_admitted"))

    wait_for(share_seen, "archfit to see the namespace's arm64 share")
    tag = uuid.uuid4().hex[:10]
    Pusher(case.images.public.url).index(
        f"e2e/gate-multi-{tag}", tag, ["linux/amd64", "linux/arm64"]
    )
    reference = f"{case.proxy.host}/e2e/gate-multi-{tag}:{tag}"
    with case.proxy.hung():
        names = [
            cluster.create_pod(
                case.autoscaled.core, namespace, cluster.pod_manifest(f"split-{i}", [reference])
            )
            for i in range(4)
        ]
        held = [
            GATED_LABEL in (pod_of(case.autoscaled, namespace, n).metadata.labels or {})
            for n in names
        ]
    for name in names:
        case.autoscaled.wait_scheduled(namespace, name)
    pods = [pod_of(case.autoscaled, namespace, name) for name in names]
    sides = sorted((p.metadata.labels or {}).get(CHOICE, "none") for p in pods)
    required = sorted(value for p in pods for value in _required_arches(p))
    print(
        f"held {held}, released {sides}, required {required}, launched {launched(case.autoscaled)}"
    )
    assert [True] * 4 == held
    assert ["amd64", "amd64", "arm64", "arm64"] == sides
    assert [("amd64",), ("amd64",), ("arm64",), ("arm64",)] == required
    assert [("amd64", "general"), ("arm64", "graviton")] == launched(case.autoscaled)


# --- helpers -----------------------------------------------------------------------------------


def _create_concurrently(
    autoscaled: AutoscaledCluster, namespace: str, prefix: str, reference: str, count: int
) -> list[str]:
    """Create `count` pods at once (a Deployment's rollout), as the ReplicaSet controller does."""
    manifests = [cluster.pod_manifest(f"{prefix}-{i}", [reference]) for i in range(count)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(count, 32)) as pool:
        return list(
            pool.map(lambda m: cluster.create_pod(autoscaled.core, namespace, m), manifests)
        )


def _required_arches(pod: Any) -> list[tuple[str, ...]]:
    affinity = pod.spec.affinity.node_affinity
    terms = affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    return [
        tuple(e.values)
        for term in terms
        for e in term.match_expressions
        if e.key == "kubernetes.io/arch"
    ]


def _held_count(hook: WebhookArchfit) -> int:
    return sum(1 for line in logged(hook, "pod_admitted") if line.get("outcome") == "gated")
