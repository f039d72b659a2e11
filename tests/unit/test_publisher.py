"""The publisher of the admission policy's parameter, with a store in memory (no cluster)."""

from __future__ import annotations

from typing import Any

from extender.config.settings import AdmissionPolicySettings
from extender.controllers.publisher import Publisher
from extender.core.image_table import ImageTable, Switches
from extender.core.mutation import MutationRules
from extender.core.platforms import Platform, parse
from extender.core.pods import PullSecretsRef
from extender.errors import ConflictError
from extender.lookups.resolution import Resolution
from extender.metrics import Metrics
from tests.support.clock import FakeClock
from tests.support.function_resolver import FunctionResolver

AMD = frozenset({parse("linux/amd64")})
ARM = frozenset({parse("linux/arm64")})
PULL = PullSecretsRef("shop")
RULES = MutationRules(platforms=AMD | ARM, arch_preference={"arm64": 10})
SWITCHES = Switches(True, True, True, ("kube-system",), ("kube-system", "archfit-system"))


class MemoryStore:
    """The ImagePlatforms object, in memory; `conflicts` writes are refused with 409."""

    def __init__(self, spec: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.writes = 0
        self.conflicts = 0

    async def read(self) -> dict[str, Any] | None:
        return self.spec

    async def write(self, spec: dict[str, Any], status: dict[str, Any]) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise ConflictError("changed meanwhile")
        self.writes += 1
        self.spec = spec


def publisher(
    store: MemoryStore, answers: dict[str, frozenset[Platform]], clock: FakeClock
) -> tuple[Publisher, ImageTable, Resolution, Metrics]:
    table = ImageTable(100, clock)

    async def platforms(image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        return answers[image]

    resolution = Resolution(
        FunctionResolver(platforms),
        clock=clock,
        on_known=lambda image, pull, found: table.record(image, found, pull),
    )
    metrics = Metrics()
    settings = AdmissionPolicySettings(enabled=True, refresh_seconds=60, unused_seconds=600)
    made = Publisher(
        settings, table, resolution, lambda: RULES, SWITCHES, store, metrics, wall_clock=clock
    )
    return made, table, resolution, metrics


async def test_what_the_webhook_resolves_is_published_once_and_not_rewritten_unchanged() -> None:
    """A resolved image reaches the object; a round with nothing new writes nothing."""
    clock, store = FakeClock(), MemoryStore()
    made, _, resolution, metrics = publisher(store, {"a:1": AMD}, clock)
    await resolution.resolve(["a:1"], PULL, 1.0)
    await made.publish_once()
    await made.publish_once()
    assert store.spec is not None
    assert ({"a:1": 1}, 1) == (store.spec["images"], store.writes)
    assert 1.0 == metrics.policy_images._value.get()


async def test_a_conflict_is_counted_and_the_next_round_writes() -> None:
    """A 409 counts as a failure (cause conflict); the next round writes the object."""
    clock, store = FakeClock(), MemoryStore()
    store.conflicts = 1
    made, _, resolution, metrics = publisher(store, {"a:1": AMD}, clock)
    await resolution.resolve(["a:1"], PULL, 1.0)
    assert await made.publish_once() is None
    assert await made.publish_once() is not None
    failures = metrics.policy_publish_failures.labels("conflict")._value.get()
    assert (1.0, 1) == (failures, store.writes)


async def test_a_moved_tag_is_published_after_the_refresh_and_a_refresh_is_not_a_use() -> None:
    """Past refreshSeconds the image is resolved again (arm64 now); unused past
    unusedSeconds it leaves, refreshes notwithstanding."""
    clock, store = FakeClock(), MemoryStore()
    answers = {"a:1": AMD}
    made, _, resolution, _ = publisher(store, answers, clock)
    await resolution.resolve(["a:1"], PULL, 1.0)
    await made.publish_once()
    answers["a:1"] = ARM
    clock.advance(61)
    await made.publish_once()
    assert store.spec is not None
    assert {"a:1": 2} == store.spec["images"]
    for _ in range(10):
        clock.advance(61)
        await made.publish_once()
    assert {} == store.spec["images"]


async def test_a_new_leader_takes_over_what_the_object_lists() -> None:
    """The images its predecessor published stay published under the new leader."""
    clock = FakeClock()
    first = MemoryStore()
    made, _, resolution, _ = publisher(first, {"a:1": AMD, "b:1": AMD | ARM}, clock)
    await resolution.resolve(["a:1", "b:1"], PULL, 1.0)
    await made.publish_once()
    second = MemoryStore(first.spec)
    successor, _table, _, _ = publisher(second, {}, clock)
    assert second.spec is not None
    successor._carry(second.spec)
    await successor.publish_once()
    assert {"a:1": 1, "b:1": 3} == second.spec["images"]
