"""The releaser's decisions when the apiserver pushes back: refused, conflicting, at the cap.

The real apiserver's behaviour is in tests/e2e/test_gate.py and test_release_pinning.py;
here a scripted stand-in for `HeldPods` answers each patch as told, so the rare paths (a
422, a 409, a pod replaced or changed, the cap) run every time. Patches are applied with
jsonpatch, as the apiserver applies them.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
from typing import Any

import jsonpatch
import pytest

from extender.config.settings import WebhookGateSettings
from extender.controllers.releaser import Releaser
from extender.core.gates import PodChanged, ReleaseRefused, gate_operations, is_gated
from extender.core.mutation import MutationRules
from extender.core.platforms import Platform, parse
from extender.core.pods import PREFER_ARCH_ANNOTATION, PullSecretsRef, read_pod
from extender.core.steering import CHOICE_LABEL, SHARE_ANNOTATION
from extender.metrics import Metrics
from extender.resolution.within_deadline import Resolution
from tests.objects import pod
from tests.support.clock import FakeClock
from tests.support.fakes import FunctionResolver, HeldReplicas, PodsByName, ScriptedPods, Steered
from tests.support.waiting import settle, wait_for_async

CREATED = datetime.datetime(2026, 11, 22, 2, 0, tzinfo=datetime.UTC).timestamp()
AMD = frozenset({parse("linux/amd64")})
RULES = MutationRules(
    platforms=frozenset({parse("linux/amd64"), parse("linux/arm64")}),
    arch_preference={"arm64": 10, "amd64": 0},
)


def held_pod(*images: str) -> dict[str, Any]:
    obj = pod(*images)
    obj = jsonpatch.apply_patch(obj, gate_operations(read_pod(obj), "unknown at admission"))
    obj["metadata"]["resourceVersion"] = "7"
    return obj


def resolution(answers: dict[str, frozenset[Platform]]) -> Resolution:
    async def platforms(image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        if image in answers:
            return answers[image]
        raise ConnectionError("registry down")

    return Resolution(FunctionResolver(platforms))


def releaser(
    pods: ScriptedPods, answers: dict[str, frozenset[Platform]], waited: float, **gate: Any
) -> Releaser:
    settings = WebhookGateSettings(retry_seconds=0.05, **gate)
    return Releaser(
        settings,
        Metrics(),
        resolution(answers),
        lambda: RULES,
        pods,
        wall_clock=lambda: CREATED + waited,
    )


def required(obj: dict[str, Any]) -> list[Any]:
    affinity = obj["spec"].get("affinity", {}).get("nodeAffinity", {})
    terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    return [e for t in terms.get("nodeSelectorTerms", []) for e in t["matchExpressions"]]


ARCH_AMD = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}


async def run_until_released(subject: Releaser, pods: ScriptedPods) -> None:
    subject.on_change("ADDED", copy.deepcopy(pods.pod))
    await wait_for_async(lambda: not is_gated(pods.pod), "the pod to be released", seconds=5)
    await asyncio.sleep(0)  # let the event task run


async def test_a_refused_release_leaves_the_pod_held_and_is_tried_again_with_the_constraint():
    """A 422 before the cap is not the end: the next try writes the same constraint."""
    pods = ScriptedPods(held_pod("acme/amd:1"), [ReleaseRefused, ReleaseRefused, None])
    subject = releaser(pods, {"acme/amd:1": AMD}, waited=3)
    await run_until_released(subject, pods)
    assert (3, [ARCH_AMD], "ArchfitReleased") == (
        len(pods.patches),
        required(pods.pod),
        pods.events[0][0],
    )


async def test_a_release_refused_past_the_cap_goes_without_the_constraint():
    """Never stranded: past maxWaitSeconds, a refused constraint is dropped, the gate goes."""
    pods = ScriptedPods(held_pod("acme/amd:1"), [ReleaseRefused])
    subject = releaser(pods, {"acme/amd:1": AMD}, waited=500, max_wait_seconds=120)
    await run_until_released(subject, pods)
    released = pods.pod["metadata"]["annotations"]["archfit.io/released"]
    assert ([], "without constraints: the apiserver refused them") == (required(pods.pod), released)


async def test_a_conflict_reads_the_pod_again_and_releases_the_newer_version():
    """409: the next patch pins the resourceVersion read afresh, not the stale one."""
    pods = ScriptedPods(held_pod("acme/amd:1"), [PodChanged, None])
    subject = releaser(pods, {"acme/amd:1": AMD}, waited=3)
    subject.on_change("ADDED", copy.deepcopy(pods.pod))
    pods.pod["metadata"]["resourceVersion"] = "8"  # changed after the watch saw it
    await wait_for_async(lambda: not is_gated(pods.pod), "the pod to be released", seconds=5)
    assert ["7", "8"] == [ops[0]["value"] for ops in pods.patches]


async def test_at_the_cap_fallback_known_constrains_by_the_image_that_resolved():
    """One image never answers; the amd64-only one that did keeps the pod off arm64."""
    pods = ScriptedPods(held_pod("acme/amd:1", "silent/x:1"), [])
    subject = releaser(pods, {"acme/amd:1": AMD}, waited=500, fallback="known")
    await run_until_released(subject, pods)
    reason, message = pods.events[0]
    assert ([ARCH_AMD], "ArchfitReleasedAtCap") == (required(pods.pod), reason)
    assert "silent/x:1" in message


async def test_at_the_cap_fallback_admit_releases_unconstrained():
    """The old fail-open, by the operator's choice."""
    pods = ScriptedPods(held_pod("acme/amd:1", "silent/x:1"), [])
    subject = releaser(pods, {"acme/amd:1": AMD}, waited=500, fallback="admit")
    await run_until_released(subject, pods)
    released = pods.pod["metadata"]["annotations"]["archfit.io/released"]
    assert ([], "at the cap, fallback admit: unconstrained") == (required(pods.pod), released)


async def test_at_the_cap_a_fallback_architecture_is_required():
    """`fallback: amd64`: the pod whose only image is silent goes to amd64."""
    pods = ScriptedPods(held_pod("silent/x:1"), [])
    subject = releaser(pods, {}, waited=500, fallback="amd64")
    await run_until_released(subject, pods)
    assert [ARCH_AMD] == required(pods.pod)


async def test_a_held_pod_whose_images_cannot_be_read_goes_at_once_without_constraints():
    """Nothing will ever resolve an image that is no string: the pod is released, and no
    constraint is made up from images archfit could not read."""
    obj = held_pod("acme/amd:1")
    obj["spec"]["containers"][0]["image"] = 7
    pods = ScriptedPods(obj, [])
    subject = releaser(pods, {}, waited=3, fallback="known")
    await run_until_released(subject, pods)
    released = pods.pod["metadata"]["annotations"]["archfit.io/released"]
    assert (None, "without constraints: the pod's images are unreadable") == (
        pods.pod["spec"].get("affinity"),
        released,
    )


MULTI = AMD | {parse("linux/arm64")}


async def arch_choices(held: list[dict[str, Any]], steering: Steered) -> list[Any]:
    """Release the held pods all at once (their tasks run concurrently, as a rollout's do)
    with `steering`; the side each pod's label names, sorted."""
    pods = HeldReplicas(held)
    subject = Releaser(
        WebhookGateSettings(retry_seconds=0.05, releases_per_second=1000),
        Metrics(),
        resolution({"acme/multi:1": MULTI}),
        lambda: RULES,
        pods,
        steering=steering,
        wall_clock=lambda: CREATED + 3,
    )
    for obj in held:
        subject.on_change("ADDED", copy.deepcopy(obj))
    await wait_for_async(
        lambda: not any(is_gated(obj) for obj in pods.pods.values()), "every release", seconds=5
    )
    return sorted(obj["metadata"]["labels"].get(CHOICE_LABEL) for obj in pods.pods.values())


async def test_held_pods_of_a_workload_with_an_arm64_share_are_released_split_as_on_admission():
    """Four held replicas at arm64-share 50, released concurrently: each takes the side the
    owner's split needs then, so two go to each side, as admission would split them."""
    held = [held_pod("acme/multi:1") for _ in range(4)]
    for index, obj in enumerate(held):
        obj["metadata"]["annotations"][SHARE_ANNOTATION] = "50"
        obj["metadata"].update(name=f"api-7d9c6b5f4-{index}", uid=f"uid-{index}")
    assert ["amd64", "amd64", "arm64", "arm64"] == await arch_choices(held, Steered({}))


async def test_a_held_pod_is_released_with_its_namespaces_preference():
    """The namespace prefers amd64 (the global setting arm64): the released pod prefers amd64."""
    pods = ScriptedPods(held_pod("acme/multi:1"), [])
    subject = Releaser(
        WebhookGateSettings(retry_seconds=0.05),
        Metrics(),
        resolution({"acme/multi:1": MULTI}),
        lambda: RULES,
        pods,
        steering=Steered({"shop": {PREFER_ARCH_ANNOTATION: "amd64"}}),
        wall_clock=lambda: CREATED + 3,
    )
    await run_until_released(subject, pods)
    affinity = pods.pod["spec"]["affinity"]["nodeAffinity"]
    preferred = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [["amd64"]] == [
        e["values"] for t in preferred for e in t["preference"]["matchExpressions"]
    ]


# --- one pod's answer never reaches another pod (issue 28, item 2) ---------------------------

ARM = frozenset({parse("linux/arm64")})
ARCH_ARM = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}


def named(name: str, uid: str, *images: str) -> dict[str, Any]:
    obj = held_pod(*images)
    obj["metadata"].update(name=name, uid=uid)
    return obj


def subject_of(pods: Any, answers: dict[str, frozenset[Platform]], **gate: Any) -> Releaser:
    return Releaser(
        WebhookGateSettings(retry_seconds=0.05, **gate),
        Metrics(),
        resolution(answers),
        lambda: RULES,
        pods,
        wall_clock=lambda: CREATED + 3,
    )


def hold_tasks(*uids: str) -> list[asyncio.Task[Any]]:
    names = {f"archfit-hold-{uid}" for uid in uids}
    return [t for t in asyncio.all_tasks() if t.get_name() in names and not t.done()]


async def test_a_pod_made_again_under_the_same_name_is_not_released_with_the_old_pods_answer():
    """web-0 (amd64-only) is replaced by a web-0 of another uid and image before its patch:
    the 409 makes the releaser read web-0 again, find another pod, and leave it held."""
    old = named("web-0", "uid-old", "acme/amd:1")
    new = named("web-0", "uid-new", "acme/unknown:1")
    new["metadata"]["resourceVersion"] = "9"
    pods = PodsByName(old)
    pods.before_patch.append(lambda: pods.replace(copy.deepcopy(new)))
    subject = subject_of(pods, {"acme/amd:1": AMD})
    subject.on_change("ADDED", copy.deepcopy(old))
    await wait_for_async(lambda: not hold_tasks("uid-old"), "the old pod's task to end")
    assert (True, []) == (is_gated(pods.pods["web-0"]), required(pods.pods["web-0"]))


async def test_a_held_pod_whose_image_changed_is_released_with_the_new_images_constraint():
    """The image changes after the first was resolved: the patch meets the newer pod, whose
    image is resolved before it goes, and it gets `In [arm64]`, not the first's amd64."""
    held = named("api-0", "uid-0", "acme/amd:1")
    changed = copy.deepcopy(held)
    changed["spec"]["containers"][0]["image"] = "acme/arm:1"
    changed["metadata"]["resourceVersion"] = "8"
    pods = PodsByName(held)
    pods.before_patch.append(lambda: pods.replace(copy.deepcopy(changed)))
    subject = subject_of(pods, {"acme/amd:1": AMD, "acme/arm:1": ARM})
    subject.on_change("ADDED", copy.deepcopy(held))
    await wait_for_async(lambda: not is_gated(pods.pods["api-0"]), "the release", seconds=5)
    assert [ARCH_ARM] == required(pods.pods["api-0"])


async def test_a_deleted_pod_waiting_for_its_release_slot_stops_waiting():
    """The watch tells DELETED while the pod's release waits for a slot: its task ends, so
    the answer can never reach a pod made later under its name."""
    first, second = named("web-0", "uid-0", "acme/amd:1"), named("web-1", "uid-1", "acme/amd:1")
    pods = PodsByName(first, second)
    subject = subject_of(pods, {"acme/amd:1": AMD}, releases_per_second=0.001)
    subject.on_change("ADDED", copy.deepcopy(first))
    subject.on_change("ADDED", copy.deepcopy(second))
    try:
        await wait_for_async(
            lambda: [is_gated(p) for p in pods.pods.values()].count(True) == 1, "one release"
        )
        waiting = next(p for p in pods.pods.values() if is_gated(p))
        await settle()
        subject.on_change("DELETED", copy.deepcopy(waiting))
        await settle()
        assert [] == hold_tasks("uid-0", "uid-1")
    finally:
        for task in hold_tasks("uid-0", "uid-1"):
            task.cancel()


# --- the back-off between looks (issue 28, item 4) --------------------------------------------


@pytest.mark.parametrize(
    ("retry", "waits"),
    [
        (1.0, [1.0, 2.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.0]),
        (10.0, [10.0, 10.0, 10.0]),
    ],
)
async def test_a_held_pod_looks_again_doubling_to_4_s_and_never_less_often_than_retry_seconds(
    retry: float, waits: list[float]
):
    """The waits between looks at a silent registry until the 30 s cap, on a test's clock:
    from retrySeconds, doubling up to 4 s; a retrySeconds above 4 s stays as it is."""
    clock = FakeClock(now=CREATED)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)
        await asyncio.sleep(0)

    pods = ScriptedPods(held_pod("silent/x:1"), [])
    subject = Releaser(
        WebhookGateSettings(retry_seconds=retry, max_wait_seconds=30, fallback="admit"),
        Metrics(),
        resolution({}),
        lambda: RULES,
        pods,
        wall_clock=clock,
        sleep=sleep,
    )
    await run_until_released(subject, pods)
    assert waits == slept
