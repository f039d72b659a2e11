"""The admission webhook through the real kube-apiserver, over TLS (issue scenarios 1-4 and 6).

Its own control plane: the webhook, tainted nodes and a scheduler without the extender
must not leak into the other scenarios. Four nodes as elsewhere, in two zones:
`*-a` in zone-a, `*-b` in zone-b.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.e2e import cluster
from tests.e2e.archfit import archfit_settings
from tests.e2e.catalog import Images
from tests.e2e.conftest import HookedArchfit, OwnControlPlane
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.scheduler import Scheduler
from tests.e2e.topology import ARCH_OF, NODES, REPLICAS, replicas, schedule
from tests.e2e.webhook import ARM64_TAINT, PLATFORMS_ANNOTATION, WebhookArchfit
from tests.support.images import Pusher
from tests.support.process import silent_listener
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"


class Plane:
    """A control plane with archfit's webhook registered, and one swappable kube-scheduler."""

    def __init__(
        self, binaries: Binaries, control_plane: ControlPlane, hook: WebhookArchfit, workdir: Path
    ) -> None:
        self.binaries, self.control_plane, self.hook, self.workdir = (
            binaries,
            control_plane,
            hook,
            workdir,
        )
        self.core = cluster.core_api(control_plane.admin_kubeconfig)
        self.scheduler: Scheduler | None = None
        self._with_extender: bool | None = None

    def use_scheduler(self, with_extender: bool) -> None:
        """Run kube-scheduler as shipped, with archfit's extender or without (managed)."""
        if self._with_extender == with_extender and self.scheduler is not None:
            return
        if self.scheduler is not None:
            self.scheduler.stop()
        name = "kube-scheduler-extender" if with_extender else "kube-scheduler-managed"
        self.scheduler = Scheduler(
            self.binaries,
            self.workdir,
            self.control_plane.scheduler_kubeconfig,
            self.hook.url_prefix if with_extender else None,
            name=name,
        ).start()
        self._with_extender = with_extender

    def taint_arm64(self, on: bool) -> None:
        for node in NODES:
            if node.arch == "arm64":
                self.core.patch_node(node.name, {"spec": {"taints": [ARM64_TAINT] if on else None}})

    def stop_scheduler(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()


@pytest.fixture(scope="module")
def hung_registry() -> Iterator[str]:
    """host:port of a listener that completes TCP handshakes and never answers."""
    listener = silent_listener()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture(scope="module")
def plane(
    e2e_binaries: Binaries,
    own_control_plane: OwnControlPlane,
    hooked_archfit: HookedArchfit,
    images: Images,
    hung_registry: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Plane]:
    """Control plane, zoned nodes, archfit with its webhook registered and called."""
    workdir = tmp_path_factory.mktemp("webhook-plane")
    with own_control_plane(workdir / "control-plane") as control_plane:
        core = cluster.core_api(control_plane.admin_kubeconfig)
        for node in NODES:
            zone = "zone-a" if node.name.endswith("-a") else "zone-b"
            core.patch_node(node.name, {"metadata": {"labels": {ZONE: zone}}})
        settings = archfit_settings(
            control_plane.admin_kubeconfig, images, extra_hosts=(hung_registry,)
        )
        with hooked_archfit(control_plane, settings, workdir) as hook:
            shared = Plane(e2e_binaries, control_plane, hook, workdir)
            try:
                yield shared
            finally:
                shared.stop_scheduler()


@pytest.fixture
def space(plane: Plane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace on the webhook's control plane; its pods are deleted afterwards."""
    name = f"wh-{uuid.uuid4().hex[:10]}"
    cluster.create_namespace(plane.core, name)
    try:
        yield name
    finally:
        cluster.delete_namespace_pods(plane.core, name)


@pytest.fixture
def managed(plane: Plane) -> Plane:
    """A managed control plane: kube-scheduler without the extender; only the webhook acts."""
    plane.use_scheduler(with_extender=False)
    return plane


@pytest.fixture
def tainted(managed: Plane) -> Iterator[Plane]:
    """Managed, with the arm64 nodes tainted kubernetes.io/arch=arm64:NoSchedule (GKE)."""
    managed.taint_arm64(True)
    try:
        yield managed
    finally:
        managed.taint_arm64(False)


def created(plane: Plane, namespace: str, name: str) -> Any:
    return plane.core.read_namespaced_pod(name, namespace)


# --- 1. managed layout: the webhook alone ---------------------------------------------------


def test_managed_an_amd64_only_pod_lands_on_amd64(
    managed: Plane, space: str, images: Images
) -> None:
    """The required arch affinity keeps the default scheduler off arm64."""
    placed = schedule(managed.core, space, replicas("amd64", [images.amd64_only.reference]))
    assert ["amd64"] * REPLICAS == placed


def test_managed_an_arm64_only_pod_lands_on_arm64(
    managed: Plane, space: str, images: Images
) -> None:
    """The required arch affinity keeps the default scheduler off amd64."""
    placed = schedule(managed.core, space, replicas("arm64", [images.arm64_only.reference]))
    assert ["arm64"] * REPLICAS == placed


def test_managed_a_multi_arch_pod_lands_on_arm64_while_both_fit(
    managed: Plane, space: str, images: Images
) -> None:
    """The preferred arm64 term wins the default scheduler's scoring, with no extender."""
    placed = schedule(managed.core, space, replicas("multi", [images.multi.reference]))
    assert ["arm64"] * REPLICAS == placed


# --- 2. tainted arm64 nodes ---------------------------------------------------------------


def test_tainted_a_multi_arch_pod_tolerates_the_arm64_taint_and_lands_on_arm64(
    tainted: Plane, space: str, images: Images
) -> None:
    """Without the toleration the scheduler would drop the arm64 nodes before scoring."""
    pods = replicas("multi", [images.multi.reference])
    assert ["arm64"] * REPLICAS == schedule(tainted.core, space, pods)
    tolerations = created(tainted, space, "multi-0").spec.tolerations or []
    expected = ("kubernetes.io/arch", "Equal", "arm64", "NoSchedule")
    assert expected in [(t.key, t.operator, t.value, t.effect) for t in tolerations]


def test_tainted_an_amd64_only_pod_gets_no_toleration_and_lands_on_amd64(
    tainted: Plane, space: str, images: Images
) -> None:
    """Its image has no arm64 entry, so the taint rightly keeps it away."""
    pods = replicas("amd64", [images.amd64_only.reference])
    assert ["amd64"] * REPLICAS == schedule(tainted.core, space, pods)
    keys = [t.key for t in created(tainted, space, "amd64-0").spec.tolerations or []]
    assert "kubernetes.io/arch" not in keys


# --- 3. existing constraints --------------------------------------------------------------


def test_a_zone_only_term_gets_the_arch_expression_in_that_term(
    managed: Plane, space: str, images: Images
) -> None:
    """The term keeps its zone and gains arch In [amd64]; the pod lands on amd64 in zone-a."""
    zone = {"key": ZONE, "operator": "In", "values": ["zone-a"]}
    manifest = cluster.pod_manifest("zoned", [images.amd64_only.reference])
    manifest["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [zone]}]
            }
        }
    }
    cluster.create_pod(managed.core, space, manifest)
    assert "amd64-a" == cluster.wait_scheduled(managed.core, space, "zoned")
    affinity = created(managed, space, "zoned").spec.affinity.node_affinity
    terms = affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [
        [
            (ZONE, "In", ["zone-a"]),
            ("kubernetes.io/arch", "In", ["amd64"]),
        ]
    ] == [[(e.key, e.operator, e.values) for e in t.match_expressions] for t in terms]


def test_a_pod_requiring_arm64_with_an_amd64_only_image_is_admitted_unchanged_with_a_warning(
    managed: Plane, space: str, images: Images
) -> None:
    """The create call's Warning header carries archfit's warning; the pod is not touched."""
    ref = images.amd64_only.reference
    manifest = cluster.pod_manifest("wrong-arch", [ref])
    manifest["spec"]["nodeSelector"] = {"kubernetes.io/arch": "arm64"}
    _, status, headers = managed.core.create_namespaced_pod_with_http_info(space, manifest)
    assert 201 == status
    warning = headers.get("Warning", "")
    assert f"archfit: image {ref} has no linux/arm64, but this pod requires arm64" in warning
    pod = created(managed, space, "wrong-arch")
    assert (None, {"kubernetes.io/arch": "arm64"}) == (pod.spec.affinity, pod.spec.node_selector)


def _with_required_terms(manifest: dict[str, Any], terms: list[Any]) -> dict[str, Any]:
    manifest["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    return manifest


@pytest.mark.parametrize(
    ("empty", "other", "node"),
    [
        (
            {},
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a"]}]},
            "amd64-a",
        ),
        (
            {"matchExpressions": []},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["amd64-b"]}]},
            "amd64-b",
        ),
    ],
    ids=["empty-object-and-zone", "empty-expressions-and-name"],
)
def test_an_empty_term_beside_another_keeps_every_pod_where_the_other_term_says(
    managed: Plane, space: str, images: Images, empty: Any, other: Any, node: str
) -> None:
    """kube-scheduler reads an empty term as matching no node; the webhook must not fill it."""
    pods = [
        _with_required_terms(
            cluster.pod_manifest(f"kept-{i}", [images.amd64_only.reference]), [empty, other]
        )
        for i in range(REPLICAS)
    ]
    names = [cluster.create_pod(managed.core, space, p) for p in pods]
    assert [node] * REPLICAS == [cluster.wait_scheduled(managed.core, space, n) for n in names]


def test_a_pod_whose_only_term_is_empty_stays_pending_with_the_webhook(
    managed: Plane, space: str, images: Images
) -> None:
    """`[{}]` is unschedulable on purpose; the webhook warns and adds nothing."""
    manifest = _with_required_terms(
        cluster.pod_manifest("never", [images.amd64_only.reference]), [{}]
    )
    _, status, headers = managed.core.create_namespaced_pod_with_http_info(space, manifest)
    assert 201 == status
    assert "admits none of this cluster's platforms" in headers.get("Warning", "")
    message = cluster.wait_failed_scheduling(managed.core, space, "never")
    assert (message.startswith("0/4 nodes are available"), None) == (
        True,
        cluster.node_of(managed.core, space, "never"),
    )


def test_a_pod_with_no_required_terms_is_still_refused_by_the_apiserver(
    managed: Plane, space: str, images: Images
) -> None:
    """`nodeSelectorTerms: []` is invalid; a term added by the webhook would make it valid."""
    manifest = _with_required_terms(
        cluster.pod_manifest("invalid", [images.amd64_only.reference]), []
    )
    with pytest.raises(ApiException) as refused:
        managed.core.create_namespaced_pod(space, manifest)
    assert (422, True) == (refused.value.status, "nodeSelectorTerms" in str(refused.value.body))


# --- 4. registry outage -------------------------------------------------------------------


@pytest.mark.parametrize("outage", ["refused", "hung"])
def test_a_registry_outage_holds_the_pod_unconstrained_within_the_webhook_timeout(
    managed: Plane, space: str, images: Images, hung_registry: str, outage: str
) -> None:
    """Connection refused, or a registry that never answers: held by the gate, in time.

    Held, not admitted unconstrained (webhook.unknownImages: gate); tests/e2e/test_gate.py
    covers the release.
    """
    ref = (
        images.unreachable_s390x_only.reference
        if outage == "refused"
        else f"{hung_registry}/e2e/hung:1.0"
    )
    manifest = cluster.pod_manifest("outage", [ref])
    managed.core.create_namespaced_pod(space, manifest)
    pod = created(managed, space, "outage")
    # In time without a clock: an answer after kube-apiserver's timeout (the shipped
    # timeoutSeconds, 3 s) would be its failure policy's (admitted as sent, no gate), not
    # the gate below.
    assert (None, None, ["archfit.io/platforms-unknown"]) == (
        pod.spec.affinity,
        (pod.metadata.annotations or {}).get(PLATFORMS_ANNOTATION),
        [gate.name for gate in pod.spec.scheduling_gates or []],
    )
    assert None is cluster.node_of(managed.core, space, "outage")


# --- 6. the extender and the webhook together ---------------------------------------------


def test_the_extender_agrees_with_the_webhook_and_finds_its_cache_warm(
    plane: Plane, space: str, images: Images
) -> None:
    """Fresh images: the webhook's CREATE reads the registry, scheduling reads nothing."""
    plane.use_scheduler(with_extender=True)
    pusher = Pusher(images.public.url)
    tag = uuid.uuid4().hex[:8]
    amd64 = pusher.single("e2e/fresh-amd64", tag, "linux/amd64")
    multi, _ = pusher.index("e2e/fresh-multi", tag, ["linux/amd64", "linux/arm64"])
    before = images.public.mark()
    pods = [
        *replicas("amd64", [amd64.reference]),
        *replicas("multi", [multi.reference]),
    ]
    names = [cluster.create_pod(plane.core, space, p) for p in pods]
    admitted = images.public.mark()
    placed = [ARCH_OF[cluster.wait_scheduled(plane.core, space, n)] for n in names]
    assert ["amd64"] * REPLICAS + ["arm64"] * REPLICAS == placed
    assert len(images.public.requests_since(before)) > 0, "the webhook resolved nothing"
    assert [] == images.public.requests_since(admitted)
    filters = [
        line
        for line in _json_lines(plane.hook.log_path)
        if line.get("event") == "filter_done" and line.get("namespace") == space
    ]
    assert len(filters) >= len(names)
    assert [0] * len(filters) == [line["cache_misses"] for line in filters]


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """archfit's structured lines (libraries may write plain lines to the same file)."""
    return [json.loads(raw) for raw in path.read_text().splitlines() if raw.startswith("{")]


# --- 7. warnings where people deploy (issue #18, done-when 4) -----------------------------

KUBECTL = "/usr/bin/kubectl"


def _daemonset(name: str, image: str, **labels: str) -> dict[str, Any]:
    match = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": {"matchLabels": match},
            "template": {
                "metadata": {"labels": match},
                "spec": {"containers": [{"name": "agent", "image": image}]},
            },
        },
    }


def _kubectl_apply(plane: Plane, namespace: str, manifest: dict[str, Any], *flags: str) -> str:
    """`kubectl apply` (the real one) of `manifest`; its stderr, where kubectl prints the
    apiserver's `Warning` headers."""
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(plane.control_plane.admin_kubeconfig), "-n", namespace,
         "apply", "-f", "-", *flags],
        input=json.dumps(manifest),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )  # fmt: skip
    return done.stderr


def test_kubectl_apply_of_a_daemonset_with_an_amd64_only_image_prints_archfits_warning(
    plane: Plane, space: str, images: Images
) -> None:
    """Two arm64 nodes: the warning says so, and how to fix it; a relabelling apply (an UPDATE
    that keeps the image) prints nothing and sends the registry no request."""
    image = Pusher(images.public.url).single("e2e/agent", uuid.uuid4().hex[:8], "linux/amd64")
    manifest = _daemonset("agent", image.reference)
    # The validating configuration's caBundle is set in the pass that set the mutating one;
    # a server-side dry run is called like an apply, and changes nothing.
    wait_for(
        lambda: "archfit:" in _kubectl_apply(plane, space, manifest, "--dry-run=server"),
        "kube-apiserver to call archfit's workload warnings",
    )
    warned = _kubectl_apply(plane, space, manifest)
    before = images.public.mark()
    relabelled = _kubectl_apply(plane, space, _daemonset("agent", image.reference, team="infra"))
    expected = (
        [
            f"Warning: archfit: image {image.reference} has no linux/arm64; this DaemonSet will"
            " run on 2 arm64 nodes and fail there; add nodeAffinity kubernetes.io/arch In [amd64]"
        ],
        "",
        [],
    )
    assert expected == (
        [line for line in warned.splitlines() if "archfit" in line],
        relabelled,
        images.public.requests_since(before),
    )
