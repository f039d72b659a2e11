"""A PlatformResolver made of a plain async function (as noe's RegistryFunc is one)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from extender.core.platforms import Platform
from extender.core.pods import PullSecretsRef


class FunctionResolver:
    """Adapts `func(image, pull)` to extender.lookups.resolution.PlatformResolver."""

    def __init__(
        self, func: Callable[[str, PullSecretsRef], Awaitable[frozenset[Platform]]]
    ) -> None:
        self._func = func

    async def platforms(self, image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        return await self._func(image, pull)
