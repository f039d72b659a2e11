"""Which images the cluster's pods name, by namespace: what the admission policy's parameter
lists (docs/webhook.md, "When archfit is down").

Pure. The publisher's leader feeds it every pod the shared pod feed tells (extender.kube.pod_feed):
an image is in use while some pod names it; when the last one goes, its unused clock starts.
A pod is kept as one small tuple, shared by every pod of a workload (`PodUse`, interned), so
100,000 pods cost a dict entry each (bench/policy_table.py measures it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from extender.core.interning import Interner
from extender.core.parameter import table_key
from extender.core.pods import PullSecretsRef

_DISTINCT = 1 << 17
"""Distinct pod uses, image lists and credentials kept shared: a workload's pods are one."""


class PodUse(NamedTuple):
    """What one pod tells the table: where it lives, what it names, whose it is."""

    namespace: str
    images: tuple[str, ...]
    """Its init containers' and containers' images, once each, as written."""
    pull: PullSecretsRef
    workload: str
    """Its controller, `Kind/name` (`Pod/name` for a bare pod): workload evidence's scope."""


class LookupSource(NamedTuple):
    """A reference that names a key, and the credentials of a pod that names it: what the
    leader resolves the key with."""

    image: str
    pull: PullSecretsRef


class _Lane:
    """One key's use in one namespace."""

    __slots__ = ("pods", "since", "source")

    def __init__(self, source: LookupSource, now: float) -> None:
        self.pods = 0
        self.since = now
        """While pods name it: when the last of them was added; after: when the last went."""
        self.source = source


class ImageUses:
    """key → namespace → how many pods name it there, since when, and with what credentials.

    `add` and `remove` take a pod by uid (a MODIFIED pod is added again: its images and
    phase may have changed); `resync` after a relist drops the pods it was not told.
    """

    def __init__(self, clock: Callable[[], float], on_new: Callable[[str], None]) -> None:
        self._clock = clock
        self._on_new = on_new
        """Told each key no pod named before (the publisher resolves it)."""
        self._pods: dict[str, PodUse] = {}
        self._keys: dict[str, dict[str, _Lane]] = {}
        self._shared: Interner[PodUse] = Interner(_DISTINCT)
        self._images: Interner[tuple[str, ...]] = Interner(_DISTINCT)
        self._pulls: Interner[PullSecretsRef] = Interner(_DISTINCT)
        self._workloads: dict[tuple[str, str], dict[tuple[str, ...], int]] = {}
        self._listed: set[str] | None = None
        """Uids told since a relist began; None outside one."""
        self.version = 0
        """Moves whenever what the table says of use may have changed."""

    def __len__(self) -> int:
        return len(self._pods)

    def add(self, uid: str, use: PodUse | None) -> None:
        """The pod `uid` now names `use` (None: it names nothing the table counts, as a
        finished pod)."""
        if self._listed is not None:
            self._listed.add(uid)
        if use is not None:
            use = self._shared(
                use._replace(images=self._images(use.images), pull=self._pulls(use.pull))
            )
        known = self._pods.get(uid)
        if known == use:
            return
        if known is not None:
            self._forget(uid, known)
        if use is not None:
            self._pods[uid] = use
            self._count(use, 1)

    def remove(self, uid: str) -> None:
        known = self._pods.pop(uid, None)
        if known is not None:
            self._count(known, -1)

    def relisting(self) -> None:
        """A relist begins: every pod will be told again, then `resync`."""
        self._listed = set()

    def resync(self) -> None:
        """The relist ended: pods it did not tell are gone."""
        listed, self._listed = self._listed, None
        if listed is None:
            return
        for uid in [uid for uid in self._pods if uid not in listed]:
            self.remove(uid)

    def _forget(self, uid: str, known: PodUse) -> None:
        del self._pods[uid]
        self._count(known, -1)

    def _count(self, use: PodUse, step: int) -> None:
        self.version += 1
        now = self._clock()
        for image in use.images:
            key = table_key(image)
            lanes = self._keys.get(key)
            if lanes is None:
                if step < 0:
                    continue
                lanes = self._keys[key] = {}
                self._on_new(key)
            lane = lanes.get(use.namespace)
            if lane is None:
                if step < 0:
                    continue
                lane = lanes[use.namespace] = _Lane(LookupSource(image, use.pull), now)
            lane.pods += step
            if step > 0 or not lane.pods:
                lane.since = now
            if step > 0 and lane.pods == 1:
                lane.source = LookupSource(image, use.pull)
        scope = (use.namespace, use.workload)
        tuples = self._workloads.setdefault(scope, {})
        tuples[use.images] = tuples.get(use.images, 0) + step
        if tuples[use.images] <= 0:
            del tuples[use.images]
            if not tuples:
                del self._workloads[scope]

    def in_use(self, key: str) -> bool:
        return any(lane.pods for lane in self._keys.get(key, {}).values())

    def named(self, key: str) -> bool:
        """Whether the table still follows `key` (in use, or unused for less than the time
        `drop_unused` was last given)."""
        return key in self._keys

    def drop_unused(self, seconds: float) -> list[str]:
        """Forget keys no pod has named for `seconds`; the keys that went."""
        horizon = self._clock() - seconds
        gone = [
            key
            for key, lanes in self._keys.items()
            if all(not lane.pods and lane.since < horizon for lane in lanes.values())
        ]
        for key in gone:
            del self._keys[key]
        if gone:
            self.version += 1
        return gone

    def sources(self, key: str) -> list[LookupSource]:
        """References naming `key` and credentials to read them with, one per namespace,
        those of namespaces with pods first."""
        lanes = self._keys.get(key, {})
        ordered = sorted(lanes.items(), key=lambda item: (not item[1].pods, item[0]))
        return [lane.source for _, lane in ordered]

    def lanes(self) -> Iterator[tuple[str, str, bool, float]]:
        """(key, namespace, in use, since) of every key's use in every namespace."""
        for key, lanes in self._keys.items():
            for namespace, lane in lanes.items():
                yield key, namespace, lane.pods > 0, lane.since

    def namespaces(self, key: str) -> Iterable[str]:
        """The namespaces whose pods name `key`, or named it within the unused time."""
        return self._keys.get(key, {}).keys()

    def followed(self) -> Iterable[str]:
        """Every key some pod names, or named less than the unused time ago."""
        return self._keys.keys()

    def workload_images(self, namespace: str, workload: str) -> list[tuple[str, ...]]:
        """The distinct image lists of the workload's pods (usually one), the one most of
        them name first."""
        found = self._workloads.get((namespace, workload), {})
        return sorted(found, key=lambda images: -found[images])
