"""Resolvers made of plain data: a PlatformResolver of a plain async function (as noe's
RegistryFunc is one), and the registry a LearnedResolver wraps, answering from a dict."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from extender.core.platforms import Platform
from extender.core.pods import PullSecretsRef
from extender.registry.errors import NotFound
from extender.registry.pure.reference import parse as parse_reference
from extender.registry.resolver import ImageResolution


class FunctionResolver:
    """Adapts `func(image, pull)` to extender.resolution.within_deadline.PlatformResolver."""

    def __init__(
        self, func: Callable[[str, PullSecretsRef], Awaitable[frozenset[Platform]]]
    ) -> None:
        self._func = func

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        return await self._func(image, pull)


class AnsweringRegistry:
    """extender.resolution.learned_resolver.DigestResolver over `answers` (image → (digest,
    platforms)); records what was asked, and answers 404 for (image, namespace) pairs in
    `refuse` (pull secrets that cannot read it) and images it does not know."""

    def __init__(self, answers: dict[str, tuple[str, frozenset[Platform]]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, str]] = []
        self.refuse: set[tuple[str, str]] = set()

    async def resolve(self, image: str, pull: PullSecretsRef | None = None) -> ImageResolution:
        namespace = pull.namespace if pull is not None else ""
        self.asked.append((image, namespace))
        if (image, namespace) in self.refuse or image not in self.answers:
            raise NotFound(f"{image}: not found")
        digest, platforms = self.answers[image]
        return ImageResolution(parse_reference(image), digest, "index", platforms, False)

    async def verify(self, image: str, pull: PullSecretsRef | None = None) -> Any:
        raise NotImplementedError("no index is checked here")

    async def aclose(self) -> None:
        return None
