"""Steering a fleet towards arm64 on purpose: which level's arch preference or arm64 share
applies to a new pod, and which side a pod of a split workload takes.

Pure: plain data in, a Steering out; the watches that feed it (namespaces, chosen pods)
live in extender.kube.steering_watches. The rules and why are in docs/webhook.md, "Namespaces,
workloads and the arm64 share".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from extender.core.pods import PREFER_ARCH_ANNOTATION, annotation_preference, prefer_arch
from extender.errors import InputError

SHARE_ANNOTATION = "archfit.io/arm64-share"
"""On a Namespace or a workload's pod template: the percentage (0..100) of the workload's
new two-architecture pods that must run on arm64; the rest must run on amd64."""
CHOICE_LABEL = "archfit.io/arch-choice"
"""On each pod the share placed: the side it took (`arm64` or `amd64`)."""
SIDES = ("arm64", "amd64")
"""The two architectures archfit steers between, arm64 first: the sides of a split, and what
the audit judges each workload against (arm64 is the one moved to)."""
IN_FLIGHT_SECONDS = 30.0
"""How long a choice admitted here counts before the pod watch shows the pod: longer than
a create takes to reach the watch, short enough that a pod refused after admission (a
later webhook, a quota) stops counting soon."""


class OwnerKey(NamedTuple):
    """Whose split a pod counts in: its controller (by uid), or its namespace's bare pods."""

    namespace: str
    controller: str
    """The controller ownerReference's uid (a ReplicaSet, StatefulSet, Job...); "" for a
    pod no controller owns."""


class Split(NamedTuple):
    """A workload's live pods on each side, choices in flight included."""

    arm64: int = 0
    amd64: int = 0

    @property
    def total(self) -> int:
        return self.arm64 + self.amd64


_NOBODY = OwnerKey("", "")
_EMPTY = Split()


@dataclass(frozen=True, slots=True)
class Steering:
    """What the namespace, the workload and the pod say about one new pod."""

    preference: Mapping[str, int]
    """Score 0..10 per architecture for the preferred terms."""
    preference_from: str = "global"
    """Which level set the preference: pod | workload | namespace | global."""
    share: int | None = None
    """The arm64 share (percent) that applies, or None."""
    share_from: str = ""
    """workload | namespace (or pod, for a pod no controller owns); "" without a share."""
    owner: OwnerKey = _NOBODY
    choice: str = ""
    """The side a two-architecture pod takes ("" when no share applies)."""
    kept: bool = False
    """The pod already carried its choice (a reinvocation), or the same pod was admitted with
    one moments ago (a retry): it stays, and counts once."""
    pod: str = ""
    """The pod's name when it has one at create (a StatefulSet's, a bare pod's), which a
    retry of the same create shares; "" for a generateName pod."""
    split: Split = _EMPTY
    """The owner's split before this pod, as the choice saw it."""
    problems: tuple[str, ...] = ()
    """Annotations archfit could not read, ignored (said in the pod_admitted line)."""

    def fields(self, applied: str) -> dict[str, Any]:
        """The pod_admitted line's fields; `applied` is the side the pod got ("" when the
        share left it alone: single-arch images, or its own constraints)."""
        shown: dict[str, Any] = {"preference_from": self.preference_from}
        if self.share is not None or self.kept:
            shown.update(
                arm64_share=self.share,
                share_from=self.share_from or None,
                arch_choice=applied or None,
                split_before=list(self.split) if applied and not self.kept else None,
                choice_kept=self.kept,
            )
        if self.problems:
            shown["steering_problems"] = list(self.problems)
        return shown


class SteeringSource(Protocol):
    """Namespace preferences and arm64 shares from memory, for the webhook, the releaser and
    the extender's verbs (extender.kube.steering_watches.FleetSteering)."""

    def steer(self, pod: Mapping[str, Any], preference: Mapping[str, int]) -> Steering:
        """What the pod's namespace, workload and own annotations say, from memory."""
        ...

    def chosen(self, steering: Steering, applied: str) -> None:
        """The pod was admitted requiring `applied` (or "" if the share left it alone)."""
        ...

    def preference_order(self, pod: Mapping[str, Any]) -> tuple[str, ...]:
        """The prefer-arch order the pod's own, workload's or namespace's annotation sets
        (steering.preference_order), or () for the global preference."""
        ...


class ShareError(InputError):
    """An arm64-share annotation that is not a whole percentage 0..100."""


def parse_share(value: object) -> int:
    """`"25"` or `"25%"` → 25. Raises ShareError for anything else: never a guess."""
    text = value.strip().removesuffix("%").strip() if isinstance(value, str) else ""
    if not text.isdigit() or int(text) > 100:
        raise ShareError(f"{SHARE_ANNOTATION}: {str(value)[:40]!r} is not a percentage 0..100")
    return int(text)


def owner_of(metadata: Mapping[str, Any], namespace: str) -> OwnerKey:
    """The pod's controller, as the ReplicaSet (or other) controller wrote it at create."""
    for ref in metadata.get("ownerReferences") or ():
        if (type(ref) is dict or isinstance(ref, Mapping)) and ref.get("controller") is True:
            return OwnerKey(
                namespace, str(ref.get("uid") or f"{ref.get('kind')}/{ref.get('name')}")
            )
    return OwnerKey(namespace, "")


def choose(share: int, split: Split) -> str:
    """The side that brings the owner's split closest to `share` percent arm64 with one more
    pod; a tie goes to amd64 (what runs today)."""
    # arm64 wins when |a + 1 - s(n + 1)| < |a - s(n + 1)|, i.e. a + 1/2 < s(n + 1), in integers.
    return "arm64" if 100 * (2 * split.arm64 + 1) < 2 * share * (split.total + 1) else "amd64"


def _nothing_remembered(owner: OwnerKey, pod: str) -> str:
    return ""


def steer(
    pod: Mapping[str, Any],
    namespace_annotations: Mapping[str, str],
    global_preference: Mapping[str, int],
    split_of: Callable[[OwnerKey], Split],
    remembered: Callable[[OwnerKey, str], str] = _nothing_remembered,
) -> Steering:
    """What applies to `pod` (a CREATE's object, namespace filled in).

    The most specific level that says anything decides, pod or workload before namespace
    before the global setting: a level's `archfit.io/arm64-share` splits the workload, its
    `archfit.io/prefer-arch` sets the preference. A controller copies its template's
    annotations to each pod, so on a pod with a controller they are the workload's; on a
    pod without one they are the pod's own.
    """
    metadata = _mapping_or_empty(pod.get("metadata"))
    namespace = str(metadata.get("namespace") or "")
    owner = owner_of(metadata, namespace)
    name = str(metadata.get("name") or "")
    own_level = "workload" if owner.controller else "pod"
    problems: list[str] = []
    levels = (
        (own_level, _mapping_or_empty(metadata.get("annotations"))),
        ("namespace", namespace_annotations),
    )
    decided = _deciding(levels, problems)
    if decided is not None:
        level, order, share = decided
        preference = annotation_preference(order) if order else global_preference
        steering = Steering(
            preference=preference,
            preference_from=level if order else "global",
            owner=owner,
            pod=name,
            problems=tuple(problems),
        )
        if share is None:
            return steering
        return _split(pod, steering, share, level, split_of, remembered)
    kept = _kept_choice(metadata)
    steering = Steering(
        preference=global_preference, owner=owner, pod=name, problems=tuple(problems)
    )
    if kept:
        # No share applies now, but one did when this pod was first admitted: keep it.
        return _with_choice(steering, kept, kept=True, split=Split())
    return steering


def preference_order(
    pod_annotations: Mapping[str, Any], namespace_annotations: Mapping[str, str]
) -> tuple[str, ...]:
    """The `archfit.io/prefer-arch` order that `steer` applies to a pod with these
    annotations (its own, which are its workload's when a controller made it) in this
    namespace, or () for the global preference. The extender's prioritize scores by it."""
    decided = _deciding((("pod", pod_annotations), ("namespace", namespace_annotations)), [])
    return decided[1] if decided is not None else ()


def _deciding(
    levels: Iterable[tuple[str, Mapping[str, Any]]], problems: list[str]
) -> tuple[str, tuple[str, ...], int | None] | None:
    """(level, prefer-arch order, share) of the most specific level that says anything (a
    preference or a readable share), or None; unreadable shares are added to `problems`."""
    for level, said in levels:
        share: int | None = None
        if SHARE_ANNOTATION in said:
            try:
                share = parse_share(said[SHARE_ANNOTATION])
            except ShareError as error:
                problems.append(f"{level} {error}")
        order = prefer_arch(said.get(PREFER_ARCH_ANNOTATION))
        if share is not None or order:
            return level, order, share
    return None


def _split(
    pod: Mapping[str, Any],
    steering: Steering,
    share: int,
    level: str,
    split_of: Callable[[OwnerKey], Split],
    remembered: Callable[[OwnerKey, str], str],
) -> Steering:
    # A retry of the same create (the client timed out, a StatefulSet makes web-0 again)
    # gets the side the first attempt got: its choice is still in flight, and counting it
    # as another pod's would turn the retry to the other side.
    kept = _kept_choice(_mapping_or_empty(pod.get("metadata")))
    if not kept and steering.pod:
        kept = remembered(steering.owner, steering.pod)
    split = split_of(steering.owner)
    choice = kept or choose(share, split)
    return _with_choice(steering, choice, kept=bool(kept), split=split, share=share, level=level)


def _with_choice(
    steering: Steering,
    choice: str,
    *,
    kept: bool,
    split: Split,
    share: int | None = None,
    level: str = "",
) -> Steering:
    return Steering(
        preference=steering.preference,
        preference_from=steering.preference_from,
        share=share,
        share_from=level,
        owner=steering.owner,
        choice=choice,
        kept=kept,
        pod=steering.pod,
        split=split,
        problems=steering.problems,
    )


def _kept_choice(metadata: Mapping[str, Any]) -> str:
    value = _mapping_or_empty(metadata.get("labels")).get(CHOICE_LABEL)
    return value if value in SIDES else ""


def _mapping_or_empty(value: object) -> Mapping[str, Any]:
    """{} for anything but an object: unlike pods.read_mapping, steering never refuses."""
    if type(value) is dict:  # what JSON decodes to: no ABC check per admission
        return value
    return value if isinstance(value, Mapping) else {}


# --- the count each owner's split is kept by ------------------------------------------------


@dataclass(slots=True)
class _Owner:
    live: dict[str, str] = field(default_factory=dict)
    """Pod uid → side, as the pod watch shows them."""
    in_flight: dict[str, deque[float]] = field(
        default_factory=lambda: {side: deque() for side in SIDES}
    )
    """Per side, when each choice admitted here but not yet seen by the watch was made."""
    by_pod: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Pod name → (side, when) of the choices in flight for pods named at create, oldest
    first: a retry of the same create gets the same side."""


class ShareTally:
    """Each owner's live pods per side (from a watch of labelled pods) plus the choices
    admitted here that the watch has not shown yet. Time comes in from the caller."""

    def __init__(self, in_flight_seconds: float = IN_FLIGHT_SECONDS) -> None:
        self._owners: dict[OwnerKey, _Owner] = {}
        self._where: dict[str, OwnerKey] = {}
        """Pod uid → its owner, so a deletion finds the pod."""
        self._in_flight_seconds = in_flight_seconds

    def split(self, owner: OwnerKey, now: float) -> Split:
        """The owner's live pods per side, with unexpired choices in flight."""
        state = self._owners.get(owner)
        if state is None:
            return Split()
        counts = dict.fromkeys(SIDES, 0)
        for side in state.live.values():
            counts[side] += 1
        for side, started in state.in_flight.items():
            while started and started[0] <= now - self._in_flight_seconds:
                started.popleft()
            counts[side] += len(started)
        return Split(counts["arm64"], counts["amd64"])

    def chosen(self, owner: OwnerKey, side: str, now: float, pod: str = "") -> None:
        """A pod was admitted with `side`; it counts until the watch shows it. A pod named
        at create (`pod`) is remembered as long, for a retry of the same create."""
        state = self._owners.setdefault(owner, _Owner())
        state.in_flight[side].append(now)
        if pod:
            state.by_pod.pop(pod, None)  # to the end: the dict stays oldest first
            state.by_pod[pod] = (side, now)

    def remembered(self, owner: OwnerKey, pod: str, now: float) -> str:
        """The side a pod of this name was admitted with within the in-flight window, or "":
        what a retry of the same create gets."""
        state = self._owners.get(owner)
        if state is None:
            return ""
        while state.by_pod:
            name, (_, when) = next(iter(state.by_pod.items()))
            if when > now - self._in_flight_seconds:
                break
            del state.by_pod[name]
        found = state.by_pod.get(pod)
        return found[0] if found else ""

    def seen(self, uid: str, owner: OwnerKey, side: str) -> None:
        """The watch shows a live pod on `side`: it replaces one choice in flight."""
        if side not in SIDES or self._where.get(uid) == owner:
            return
        self.gone(uid)
        state = self._owners.setdefault(owner, _Owner())
        state.live[uid] = side
        self._where[uid] = owner
        if state.in_flight[side]:
            state.in_flight[side].popleft()

    def gone(self, uid: str) -> None:
        """The pod was deleted or finished: it no longer counts."""
        owner = self._where.pop(uid, None)
        if owner is None:
            return
        state = self._owners[owner]
        state.live.pop(uid, None)
        if not state.live and not any(state.in_flight.values()):
            del self._owners[owner]

    def replace(self, pods: Iterable[tuple[str, OwnerKey, str]]) -> None:
        """A relist: exactly these (uid, owner, side) are live now."""
        listed = {uid: (owner, side) for uid, owner, side in pods}
        for uid in [uid for uid in self._where if uid not in listed]:
            self.gone(uid)
        for uid, (owner, side) in listed.items():
            self.seen(uid, owner, side)
