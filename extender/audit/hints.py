"""Hints of the form "arm64 from tag X": the newer tags of each image that blocks arm64.

Per blocking image with a version tag this costs at most `newer_tags.PAGES` tag-list
requests (one list per repository and credentials, shared by its images) and
`newer_tags.LIMIT` image lookups, each at most three requests (HEAD the tag, GET its
manifest, GET a single-arch image's config) through the resolver's cache: see
docs/operations.md, "What an audit costs a registry".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from extender.audit.distinct_images import Pair
from extender.audit.pure import newer_tags
from extender.audit.pure.newer_tags import TagHint
from extender.audit.pure.report import same_image
from extender.core.platforms import (
    LINUX_ARM64,
    Resolved,
    Unknown,
    any_accepts,
    describe_failure,
)
from extender.core.pods import PullSecretsRef
from extender.registry.client import TagList
from extender.registry.errors import RegistryError, snippet
from extender.registry.pure.reference import parse

ResolveOne = Callable[[str, PullSecretsRef], Awaitable[Resolved]]
"""One image resolved, failures answered as Unknown (extender.audit.distinct_images)."""


class TagLister(Protocol):
    """Lists a repository's tags with an image's credentials (RegistryResolver.tags)."""

    async def tags(
        self, image: str, pull: PullSecretsRef | None, *, page_size: int, pages: int
    ) -> TagList:
        """Raises a RegistryError when the list cannot be read."""
        ...


async def hints(
    lister: TagLister,
    resolve_one: ResolveOne,
    blocking: Sequence[str],
    pairs: Sequence[Pair],
    *,
    limit: int = newer_tags.LIMIT,
    loose: bool = False,
) -> dict[str, TagHint]:
    """A hint per blocking image (keyed by `report.same_image`), looked up concurrently.

    `pairs` are the audit's (image, credentials) pairs: a blocker's newer tags are read with
    the credentials of the first workload that pulls it.
    """
    pull_of: dict[str, PullSecretsRef] = {}
    for image, pull in pairs:
        pull_of.setdefault(same_image(image), pull)
    lists: dict[tuple[str, PullSecretsRef], asyncio.Task[TagList]] = {}

    def tag_list(repository: str, image: str, pull: PullSecretsRef) -> asyncio.Task[TagList]:
        # One listing per repository and credentials, however many of its tags block.
        key = (repository, pull)
        if key not in lists:
            listing = lister.tags(
                image, pull, page_size=newer_tags.PAGE_SIZE, pages=newer_tags.PAGES
            )
            lists[key] = asyncio.ensure_future(listing)
        return lists[key]

    async def one(image: str) -> TagHint:
        try:
            ref = parse(image)
        except RegistryError:
            return newer_tags.no_version(image)
        if ref.digest or newer_tags.version(ref.tag) is None:
            return newer_tags.no_version(image)
        pull = pull_of.get(same_image(image), PullSecretsRef(""))
        try:
            listed = await tag_list(ref.name, image, pull)
        except Exception as error:  # any failure means "cannot tell", never "none"
            return TagHint(image, None, note=snippet(describe_failure(error), 120))
        candidates = newer_tags.newer(ref.tag, listed.tags, limit)
        outcomes = await asyncio.gather(
            *(resolve_one(f"{ref.name}:{tag}", pull) for tag in candidates)
        )
        found = dict(zip(candidates, outcomes, strict=True))
        runs = [tag for tag in candidates if _runs_on_arm64(found[tag], loose)]
        failed = [tag for tag in candidates if isinstance(found[tag], Unknown)]
        note = ""
        if not runs and failed:
            first = found[failed[0]]
            assert isinstance(first, Unknown)
            note = snippet(f"{failed[0]}: {first.reason}", 120)
        return TagHint(image, runs[0] if runs else None, candidates, note, listed.complete)

    answers = await asyncio.gather(*(one(image) for image in blocking))
    return {same_image(answer.image): answer for answer in answers}


def _runs_on_arm64(outcome: Resolved, loose: bool) -> bool:
    return not isinstance(outcome, Unknown) and any_accepts(LINUX_ARM64, outcome, loose=loose)
