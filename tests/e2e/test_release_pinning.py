"""The releaser never applies one pod's answer to another pod (issue 28, item 2).

Its own control plane with archfit's webhook registered (`webhook.unknownImages: gate`) and
no scheduler: what matters is what the releaser writes on the pod, read back from the real
kube-apiserver. Two fronts of the real registry misbehave on purpose, one per image, so each
image answers when the test says.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from extender.core.gates import PodChanged, ReleaseRefused, release_operations
from extender.kube.gated_pods import GatedPods
from tests.e2e import cluster
from tests.e2e.archfit import archfit_settings
from tests.e2e.catalog import Images
from tests.e2e.conftest import OwnControlPlane
from tests.e2e.controlplane import ControlPlane
from tests.e2e.gating import fresh_amd64_image, gate_settings, logged, logged_at
from tests.e2e.webhook import WebhookArchfit
from tests.support.delaying_proxy import DelayingProxy
from tests.support.images import Pusher
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

GATE = "archfit.io/platforms-unknown"
RELEASED = "archfit.io/released"
#: 1 / webhook.gate.releasesPerSecond in the same-name case.
SLOT_SECONDS = 5.0


@dataclass
class Plane:
    control_plane: ControlPlane
    core: client.CoreV1Api
    amd64_front: DelayingProxy
    """In front of the amd64-only images: the first image of each case."""
    arm64_front: DelayingProxy
    """In front of the arm64-only images: what a pod is given afterwards."""
    images: Images


@pytest.fixture(scope="module")
def plane(
    own_control_plane: OwnControlPlane, images: Images, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Plane]:
    """A control plane of its own with the four nodes, and the two registry fronts."""
    with (
        own_control_plane(tmp_path_factory.mktemp("pinning")) as control_plane,
        DelayingProxy(images.public.url) as amd64_front,
        DelayingProxy(images.public.url) as arm64_front,
    ):
        core = cluster.core_api(control_plane.admin_kubeconfig)
        yield Plane(control_plane, core, amd64_front, arm64_front, images)


@pytest.fixture
def space(plane: Plane) -> Iterator[str]:
    """A fresh namespace; the fronts answer at once before and after."""
    name = f"pin-{uuid.uuid4().hex[:10]}"
    cluster.create_namespace(plane.core, name)
    plane.amd64_front.reset()
    plane.arm64_front.reset()
    try:
        yield name
    finally:
        plane.amd64_front.reset()
        plane.arm64_front.reset()
        cluster.delete_namespace_pods(plane.core, name)


def start_archfit(plane: Plane, workdir: Path, namespace: str, **gate: Any) -> WebhookArchfit:
    """archfit with its webhook and the releaser, both fronts plain-HTTP registries."""
    base = archfit_settings(
        plane.control_plane.admin_kubeconfig,
        plane.images,
        extra_hosts=(plane.amd64_front.host, plane.arm64_front.host),
    )
    settings = gate_settings(base, plane.amd64_front, **gate)
    hook = WebhookArchfit(plane.control_plane.admin_kubeconfig, settings, workdir).start()
    hook.wait_called(namespace, plane.images.multi.reference)
    return hook


def fresh_arm64_image(plane: Plane) -> str:
    """Push a new arm64-only image; its name through the arm64 front."""
    tag = uuid.uuid4().hex[:10]
    Pusher(plane.images.public.url).single(f"e2e/pin-{tag}", tag, "linux/arm64")
    return f"{plane.arm64_front.host}/e2e/pin-{tag}:{tag}"


def read(plane: Plane, namespace: str, name: str) -> Any:
    return plane.core.read_namespaced_pod(name, namespace)


def gated(pod: Any) -> bool:
    return GATE in [g.name for g in pod.spec.scheduling_gates or []]


def required_arches(pod: Any) -> list[list[str]]:
    affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    terms = required.node_selector_terms if required else []
    return [
        e.values for t in terms for e in t.match_expressions or [] if e.key == "kubernetes.io/arch"
    ]


def released(plane: Plane, namespace: str, name: str) -> Any:
    """Wait until the pod of this name has lost archfit's gate; the pod."""

    def ungated() -> Any:
        pod = read(plane, namespace, name)
        return None if gated(pod) else pod

    return wait_for(ungated, f"{name} to be released")


def test_a_pod_made_again_under_the_same_name_never_gets_the_old_pods_answer(
    plane: Plane, space: str, tmp_path: Path
) -> None:
    """web-N, resolved amd64-only and waiting for a release slot, is deleted and made again
    (as a StatefulSet does) with an arm64-only image whose registry answers 503: the new pod
    stays held until its own image answers, then gets `In [arm64]`, not the old `In [amd64]`."""
    # One release every 5 s: the second of two pods resolved together waits for its slot.
    hook = start_archfit(plane, tmp_path, space, releasesPerSecond=1 / SLOT_SECONDS)
    try:
        amd64 = fresh_amd64_image(plane.images.public.url, plane.amd64_front)
        arm64 = fresh_arm64_image(plane)
        with plane.amd64_front.hung():  # both held; both await the one hung lookup
            for name in ("web-0", "web-1"):
                cluster.create_pod(plane.core, space, cluster.pod_manifest(name, [amd64]))
                assert gated(read(plane, space, name))

        # The lookup answers both at once: one is released, the other waits for its slot.
        def held_still() -> list[str] | None:
            still = [n for n in ("web-0", "web-1") if gated(read(plane, space, n))]
            return still if len(still) < 2 else None

        waiting = wait_for(held_still, "the first release")
        assert isinstance(waiting, list)
        assert 1 == len(waiting)
        name = waiting[0]
        plane.arm64_front.fail_for(60.0)
        plane.core.delete_namespaced_pod(name, space, grace_period_seconds=0)
        wait_for(lambda: not _exists(plane, space, name), f"{name} to be gone")
        cluster.create_pod(plane.core, space, cluster.pod_manifest(name, [arm64]))
        again = read(plane, space, name)
        assert gated(again)
        # The old pod's task had the next slot; a conflict there takes it to the one after.
        # Past both, the new pod is still held: its own image is still unknown.
        first = logged_at(logged(hook, "pod_released")[0])
        time.sleep(max(0.0, first + 2 * SLOT_SECONDS + 1.0 - time.time()))
        assert gated(read(plane, space, name))
        plane.arm64_front.reset()
        pod = released(plane, space, name)
        assert (again.metadata.uid, "resolved", [["arm64"]]) == (
            pod.metadata.uid,
            (pod.metadata.annotations or {}).get(RELEASED),
            required_arches(pod),
        )
    finally:
        hook.stop()


def test_a_held_pod_whose_image_changed_is_released_for_its_new_image(
    plane: Plane, space: str, tmp_path: Path
) -> None:
    """A held pod's image is changed (allowed on a gated pod) before the first image answers:
    the new image is looked up and the pod gets its `In [arm64]`, not the first's amd64."""
    hook = start_archfit(plane, tmp_path, space)
    try:
        amd64 = fresh_amd64_image(plane.images.public.url, plane.amd64_front)
        arm64 = fresh_arm64_image(plane)
        with plane.amd64_front.hung():
            cluster.create_pod(plane.core, space, cluster.pod_manifest("changed", [amd64]))
            assert gated(read(plane, space, "changed"))
            plane.core.patch_namespaced_pod(
                "changed", space, {"spec": {"containers": [{"name": "c0", "image": arm64}]}}
            )
        pod = released(plane, space, "changed")
        assert ([arm64], "resolved", [["arm64"]]) == (
            [c.image for c in pod.spec.containers],
            (pod.metadata.annotations or {}).get(RELEASED),
            required_arches(pod),
        )
        assert 1 <= plane.arm64_front.relayed("manifest")
    finally:
        hook.stop()


async def test_a_release_built_for_one_pod_is_refused_by_another_pod_of_its_name(
    plane: Plane, space: str
) -> None:
    """The release patch `test`s the uid: sent to a pod made since under the same name, even
    with that pod's resourceVersion, the apiserver refuses it and the releaser is told
    PodChanged (read again), so the other pod keeps its gate."""
    api = cluster.kube_api(plane.control_plane.admin_kubeconfig)
    pods = GatedPods(api)
    try:
        manifest = cluster.pod_manifest("web-0", [plane.images.amd64_only.reference])
        manifest["metadata"]["labels"] = {"archfit.io/gated": "true"}
        manifest["spec"]["schedulingGates"] = [{"name": GATE}]
        cluster.create_pod(plane.core, space, manifest)
        old = await pods.read(space, "web-0")
        assert old is not None
        plane.core.delete_namespaced_pod("web-0", space, grace_period_seconds=0)
        wait_for(lambda: not _exists(plane, space, "web-0"), "web-0 to be gone")
        cluster.create_pod(plane.core, space, manifest)
        new = await pods.read(space, "web-0")
        assert new is not None
        # The worst case: the old pod's decision with the new pod's resourceVersion.
        old["metadata"]["resourceVersion"] = new["metadata"]["resourceVersion"]
        with pytest.raises(PodChanged):
            await pods.patch(old, release_operations(old, [], "resolved"))
        assert gated(read(plane, space, "web-0"))
    finally:
        api.close()


async def test_a_release_the_apiservers_rules_refuse_is_told_apart_from_a_changed_pod(
    plane: Plane, space: str
) -> None:
    """Both are 422s: a patch the pod's validation refuses (the scheduler name never changes)
    is ReleaseRefused, tried again with backoff; it is not taken for a changed pod."""
    api = cluster.kube_api(plane.control_plane.admin_kubeconfig)
    pods = GatedPods(api)
    try:
        manifest = cluster.pod_manifest("refused", [plane.images.amd64_only.reference])
        manifest["spec"]["schedulingGates"] = [{"name": GATE}]
        cluster.create_pod(plane.core, space, manifest)
        pod = await pods.read(space, "refused")
        assert pod is not None
        renamed = {"op": "replace", "path": "/spec/schedulerName", "value": "another"}
        with pytest.raises(ReleaseRefused):
            await pods.patch(pod, release_operations(pod, [renamed], "resolved"))
        assert gated(read(plane, space, "refused"))
    finally:
        api.close()


def _exists(plane: Plane, namespace: str, name: str) -> bool:
    try:
        read(plane, namespace, name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True
