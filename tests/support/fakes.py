"""Stand-ins for archfit's own Protocols, for unit tests of what drives them (as
`structlog.testing` is for structlog): each subclasses the Protocol it stands for (mypy checks
this module as strictly as the package), records what it was asked and answers from what the
test gave it. Fakes live here and nowhere else: not in the package, not in a test module."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jsonpatch
import orjson

from extender.admission.skeleton import Admission, AdmissionPolicy
from extender.controllers.publisher import ParameterStore, SeenPod
from extender.controllers.releaser import HeldPods
from extender.controllers.watcher import Calls
from extender.core.gates import PodChanged
from extender.core.image_uses import PodUse
from extender.core.node_facts import NodeFacts
from extender.core.node_parts import FactsOf, decode_node
from extender.core.platforms import Platform
from extender.core.pods import Pod, PullSecretsRef
from extender.core.steering import ShareTally, Steering, SteeringSource, preference_order, steer
from extender.errors import ConflictError, InputError
from extender.kube.lease import LeaseRecords, LostRace, Spec
from extender.registry.errors import NotFound
from extender.registry.keychain import SecretSource
from extender.registry.manifests import OCI_INDEX
from extender.registry.pure.credentials import PullSecret
from extender.registry.pure.reference import parse as parse_reference
from extender.registry.resolver import ImageResolution
from extender.registry.verify import EntryCheck, Verification
from extender.resolution.learned_resolver import DigestResolver
from extender.resolution.within_deadline import PlatformResolver
from extender.services import NodeSource

if TYPE_CHECKING:
    from extender.kube.pod_watch import WatchedPod
    from extender.wire.admission_api import AdmissionRequest


class RecordingPodCalls(Calls):
    """The watcher's API calls (controllers.watcher.Calls): previous logs from `logs`, every
    call recorded, every eviction granted."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, str], str] = {}
        """(pod uid, container) → what its previous run printed."""
        self.log_reads: list[tuple[str, str, int]] = []
        """(pod uid, container, restart count of the pod as the read saw it), in order."""
        self.events: list[tuple[str, tuple[str, str, str], str, str]] = []
        """(namespace, (apiVersion, kind, name), reason, message), in order."""
        self.evicted: list[WatchedPod] = []

    async def previous_log(self, pod: WatchedPod, container: str, limit_bytes: int) -> str:
        restarts = next((s.restart_count for s in pod.states() if s.name == container), 0)
        self.log_reads.append((pod.uid, container, restarts))
        return self.logs.get((pod.uid, container), "")

    async def controller(self, namespace: str, kind: str, name: str) -> tuple[str, str, str]:
        return "apps/v1", kind, name

    async def event(
        self, namespace: str, regarding: tuple[str, str, str], reason: str, message: str
    ) -> None:
        self.events.append((namespace, regarding, reason, message))

    async def evict(self, pod: WatchedPod) -> str:
        self.evicted.append(pod)
        return "evicted"


class MemoryLeases(LeaseRecords):
    """One Lease kept in memory as the apiserver keeps it (kube.lease.LeaseRecords): every
    write bumps its resourceVersion, and a create or write that another writer beat raises
    LostRace. Contenders sharing one MemoryLeases contend for one Lease; each call yields to
    the event loop first, as a call to the API would."""

    def __init__(self, name: str = "archfit-test") -> None:
        self.name = name
        self.lease: dict[str, Any] | None = None
        """The Lease object, None until someone creates it."""
        self.unreachable = False
        """While True, every call fails as an API that does not answer."""
        self.writes = 0
        """Creates and writes that succeeded."""
        self.stored: list[Spec] = []
        """Every spec stored, in order."""

    @property
    def spec(self) -> Spec:
        """The Lease's spec as stored now ({} before it is created)."""
        return dict((self.lease or {}).get("spec") or {})

    async def read(self, timeout_seconds: float) -> dict[str, Any] | None:
        await self._reach()
        return copy.deepcopy(self.lease)

    async def create(self, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        await self._reach()
        if self.lease is not None:
            raise LostRace(f"lease {self.name} already exists")
        return self._store(spec)

    async def write(self, version: str, spec: Spec, timeout_seconds: float) -> dict[str, Any]:
        await self._reach()
        if self.lease is None:
            raise LookupError(f"lease {self.name} not found")
        if version != self.lease["metadata"]["resourceVersion"]:
            raise LostRace(f"lease {self.name} changed since version {version}")
        return self._store(spec)

    def overwrite(self, **spec: Any) -> None:
        """Another writer (kubectl, another archfit) sets these spec fields, as a patch would."""
        self._store({**self.spec, **spec})

    async def _reach(self) -> None:
        await asyncio.sleep(0)
        if self.unreachable:
            raise ConnectionError("the API server does not answer")

    def _store(self, spec: Spec) -> dict[str, Any]:
        self.stored.append(dict(spec))
        self.writes += 1
        metadata = {"name": self.name, "resourceVersion": str(self.writes)}
        self.lease = {"metadata": metadata, "spec": dict(spec)}
        return copy.deepcopy(self.lease)


# --- pods held at admission (controllers.releaser.HeldPods) --------------------------------


class ScriptedPods(HeldPods):
    """One held pod; each patch is answered from a script of exceptions (None: apply it, as
    the apiserver applies a JSON patch). Patches and events are recorded."""

    def __init__(self, held: dict[str, Any], script: list[type[Exception] | None]) -> None:
        self.pod = held
        self.script = script
        self.patches: list[list[dict[str, Any]]] = []
        self.events: list[tuple[str, str]] = []

    async def read(self, namespace: str, name: str) -> Pod | None:
        return copy.deepcopy(self.pod)

    async def patch(self, pod: Mapping[str, Any], operations: list[dict[str, Any]]) -> bool:
        self.patches.append(operations)
        failure = self.script.pop(0) if self.script else None
        if failure is not None:
            raise failure("scripted")
        self.pod = _patched(self.pod, operations)
        return True

    async def event(
        self, pod: Mapping[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        self.events.append((reason, message))


class HeldReplicas(HeldPods):
    """Several held pods by name, each patch applied as the apiserver applies it."""

    def __init__(self, held: list[dict[str, Any]]) -> None:
        self.pods = {obj["metadata"]["name"]: obj for obj in held}

    async def read(self, namespace: str, name: str) -> Pod | None:
        return copy.deepcopy(self.pods[name])

    async def patch(self, pod: Mapping[str, Any], operations: list[dict[str, Any]]) -> bool:
        name = pod["metadata"]["name"]
        self.pods[name] = _patched(self.pods[name], operations)
        return True

    async def event(
        self, pod: Mapping[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        return None


class PodsByName(HeldPods):
    """Held pods by name, patched as the apiserver patches: the resourceVersion pinned (409)
    and every `test` checked; `replace` swaps in another pod of the same name."""

    def __init__(self, *held: dict[str, Any]) -> None:
        self.pods = {obj["metadata"]["name"]: obj for obj in held}
        self.before_patch: list[Callable[[], object]] = []
        """Called once each, in order, before the next patches: what changes meanwhile."""

    def replace(self, obj: dict[str, Any]) -> None:
        self.pods[obj["metadata"]["name"]] = obj

    async def read(self, namespace: str, name: str) -> Pod | None:
        found = self.pods.get(name)
        return copy.deepcopy(found) if found is not None else None

    async def patch(self, pod: Mapping[str, Any], operations: list[dict[str, Any]]) -> bool:
        if self.before_patch:
            self.before_patch.pop(0)()
        current = self.pods.get(pod["metadata"]["name"])
        if current is None:
            return False
        if operations[0]["value"] != current["metadata"]["resourceVersion"]:
            raise PodChanged("409")
        try:
            patched = _patched(current, operations)
        except jsonpatch.JsonPatchTestFailed as error:
            raise PodChanged("422, the patch did not apply") from error
        patched["metadata"]["resourceVersion"] = str(
            int(current["metadata"]["resourceVersion"]) + 1
        )
        self.pods[pod["metadata"]["name"]] = patched
        return True

    async def event(
        self, pod: Mapping[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        return None


def _patched(obj: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    patched: dict[str, Any] = jsonpatch.apply_patch(obj, operations)
    return patched


# --- namespace preferences and arm64 shares (core.steering.SteeringSource) ------------------


class Steered(SteeringSource):
    """What the steering watches would hold (namespace annotations, the owners' splits), read
    through the pure extender.core.steering, as extender.kube.steering_watches.FleetSteering
    reads it."""

    def __init__(self, namespaces: dict[str, dict[str, str]]) -> None:
        self.namespaces = namespaces
        self.tally = ShareTally()

    def steer(self, pod: Mapping[str, Any], preference: Mapping[str, int]) -> Steering:
        namespace = self.namespaces.get(pod["metadata"]["namespace"], {})
        return steer(pod, namespace, preference, lambda owner: self.tally.split(owner, 0.0))

    def chosen(self, steering: Steering, applied: str) -> None:
        if applied and not steering.kept:
            self.tally.chosen(steering.owner, applied, 0.0)

    def preference_order(self, pod: Mapping[str, Any]) -> tuple[str, ...]:
        return ()


class NamespacePreferences(SteeringSource):
    """The namespace watch's map, read through the pure preference_order: what the
    extender's verbs read. They neither steer nor choose, so those calls fail the test."""

    def __init__(self, annotations: dict[str, dict[str, str]]) -> None:
        self.annotations = annotations

    def steer(self, pod: Mapping[str, Any], preference: Mapping[str, int]) -> Steering:
        raise AssertionError("the verbs only read the preference order")

    def chosen(self, steering: Steering, applied: str) -> None:
        raise AssertionError("the verbs choose nothing")

    def preference_order(self, pod: Mapping[str, Any]) -> tuple[str, ...]:
        metadata = pod["metadata"]
        namespace = self.annotations.get(metadata["namespace"], {})
        return preference_order(metadata.get("annotations") or {}, namespace)


# --- the policy's parameter (controllers.publisher.ParameterStore) --------------------------


class MemoryStore(ParameterStore):
    """The ImagePlatforms object, in memory; `conflicts` writes are refused with 409."""

    def __init__(self, spec: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.status: dict[str, Any] = {}
        self.writes = 0
        self.conflicts = 0

    async def read(self) -> dict[str, Any] | None:
        return self.spec

    async def write(self, spec: dict[str, Any], status: dict[str, Any]) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise ConflictError("changed meanwhile")
        self.writes += 1
        self.spec, self.status = spec, status


# --- registries and resolvers (lookups.resolution.PlatformResolver, evidence.DigestResolver) -


class FunctionResolver(PlatformResolver):
    """Adapts `func(image, pull)` to extender.resolution.within_deadline.PlatformResolver."""

    def __init__(
        self, func: Callable[[str, PullSecretsRef], Awaitable[frozenset[Platform]]]
    ) -> None:
        self._func = func

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        return await self._func(image, pull)


class AnsweringRegistry(DigestResolver):
    """extender.resolution.learned_resolver.DigestResolver over `answers` (image → (digest,
    platforms)), each an OCI index; `default` answers any other image (else 404). Records
    what was asked, and answers 404 for (image, namespace) pairs in `refuse` (pull secrets
    that cannot read it).

    `verify` of an image or of its pinned `name@digest` finds no entry checked, unless
    `configs_agree`: then each entry's config agrees with its claim (an honest index)."""

    def __init__(
        self,
        answers: Mapping[str, tuple[str, frozenset[Platform]]],
        *,
        default: tuple[str, frozenset[Platform]] | None = None,
        configs_agree: bool = False,
    ) -> None:
        self.answers = dict(answers)
        self.default = default
        self.configs_agree = configs_agree
        self.asked: list[tuple[str, str]] = []
        self.refuse: set[tuple[str, str]] = set()

    async def resolve(self, image: str, pull: PullSecretsRef | None = None) -> ImageResolution:
        namespace = pull.namespace if pull is not None else ""
        self.asked.append((image, namespace))
        answer = self.answers.get(image, self.default)
        if (image, namespace) in self.refuse or answer is None:
            raise NotFound(f"{image}: not found")
        digest, platforms = answer
        return ImageResolution(parse_reference(image), digest, OCI_INDEX, platforms, False)

    async def verify(
        self, image: str, pull: PullSecretsRef | None = None
    ) -> tuple[ImageResolution, Verification]:
        named = next(
            (
                name
                for name, (digest, _) in self.answers.items()
                if image == f"{parse_reference(name).name}@{digest}"
            ),
            image,
        )
        found = await self.resolve(named, pull)
        if not self.configs_agree:
            return found, Verification()
        checks = tuple(EntryCheck(found.digest, p, p, "") for p in found.platforms)
        return found, Verification(checks)

    async def aclose(self) -> None:
        return None


# --- pods as the publisher's list-watch tells them (controllers.publisher.SeenPod) ---------


@dataclasses.dataclass
class ListedPod:
    """A pod as the list-watch tells it: its images, its workload, and whether it finished.
    It matches SeenPod by shape (`LISTED_POD_IS_SEEN` below checks it): a dataclass field
    cannot override the Protocol's read-only `uid` property by subclassing."""

    uid: str
    namespace: str = "shop"
    images: tuple[str, ...] = ("web:1",)
    workload: str = "ReplicaSet/web-1"
    finished: bool = False

    def use(self) -> PodUse | None:
        if self.finished:
            return None
        return PodUse(self.namespace, self.images, PullSecretsRef(self.namespace), self.workload)


LISTED_POD_IS_SEEN: type[SeenPod] = ListedPod
"""mypy checks ListedPod against SeenPod here."""


# --- pull secrets (registry.keychain.SecretSource) ------------------------------------------


@dataclasses.dataclass
class Secrets(SecretSource):
    """A SecretSource made of plain data: secrets by name, per namespace; reads counted."""

    secrets: dict[str, PullSecret] = dataclasses.field(default_factory=dict)
    calls: int = 0

    async def pull_secrets(self, pull: PullSecretsRef) -> Sequence[PullSecret]:
        self.calls += 1
        return [self.secrets[name] for name in pull.names if name in self.secrets]


# --- nodes (services.NodeSource) ------------------------------------------------------------


class StaticNodes(NodeSource):
    """A node source built from v1.Node objects, synced from the start (or, `synced=False`,
    never: its first list never arrives, and a wait for it spends the whole wait).

    Nodes of one platform and runtime share one facts object, as in the node index: the
    extender groups candidates by identity."""

    def __init__(
        self, *nodes: Mapping[str, Any], synced: bool = True, broken: str | None = None
    ) -> None:
        facts_of = FactsOf()
        self._nodes: Mapping[str, NodeFacts] = {
            n["metadata"]["name"]: facts_of(decode_node(orjson.dumps(n))) for n in nodes
        }
        self._synced = synced
        self._broken = broken
        """When set, asking for the known platforms fails with it: a node index with a bug."""

    @classmethod
    def of_facts(cls, facts: Mapping[str, NodeFacts]) -> StaticNodes:
        """The nodes given as name → facts."""
        made = cls()
        made._nodes = facts
        return made

    @property
    def synced(self) -> bool:
        return self._synced

    problem: str | None = None
    """Set by a test whose node source cannot stay current."""

    def snapshot(self) -> Mapping[str, NodeFacts]:
        return self._nodes

    def known_platforms(self) -> frozenset[Platform]:
        if self._broken is not None:
            raise RuntimeError(self._broken)
        return frozenset(p for p, _, _ in self._nodes.values() if p is not None)

    async def wait_synced(self, seconds: float) -> bool:
        if not self._synced:
            await asyncio.sleep(seconds)
        return self._synced


# --- one kind of admission (admission.skeleton.AdmissionPolicy) -----------------------------


class WarnOnDeployments(AdmissionPolicy):
    """A warnings-only policy, as workload admission would be: no patch, ever; a `spec` of
    "unreadable" cannot be read. Counts each review by outcome."""

    verb = "warn"
    unreadable = "admission_unreadable_workload"
    failed = "warn_internal_error"

    def __init__(self) -> None:
        self.counted: list[tuple[str, bool]] = []

    async def decide(self, review: AdmissionRequest, started: float) -> Admission:
        if review.object.get("spec") == "unreadable":
            raise InputError("spec must be an object")
        return Admission("warned", warnings=[f"{review.kind.get('kind')}: no arm64 build"])

    def count(self, outcome: str, seconds: float | None) -> None:
        self.counted.append((outcome, seconds is not None))
