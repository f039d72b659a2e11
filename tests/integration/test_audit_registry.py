"""The audit's registry work against real local registries: newer-tag hints (bounded, counted)
and registries' pull limits (ratelimit-remaining) honoured."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from extender.audit.pure import newer_tags
from extender.audit.registry_answers import metric_remaining, resolve
from extender.core.platforms import Unknown
from extender.core.pods import PullSecretsRef
from extender.metrics import Metrics
from tests.integration.conftest import ResolverFactory, RunningFaults, local_settings
from tests.support.faults import OCI_INDEX, OCI_MANIFEST, canonical, sha256
from tests.support.images import Pusher
from tests.support.registry import RegistryProcess

pytestmark = pytest.mark.integration
PULL = PullSecretsRef("shop")
AMD64, BOTH = ["linux/amd64"], ["linux/amd64", "linux/arm64"]


@pytest.fixture(scope="module")
def tagged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    """`hints/app` with tags 0.9, 1.0 and 1.1 amd64-only, 1.2 and 2.0 on both, and 2.1-rc1,
    1.0.1 and latest (other shapes) on both; `hints/alone` with one."""
    registry = RegistryProcess.start(tmp_path_factory.mktemp("registry-tags"))
    try:
        pusher = Pusher(registry.url)
        for tag in ("0.9", "1.0", "1.1"):
            pusher.single("hints/app", tag, "linux/amd64")
        for tag in ("1.2", "2.0", "2.1-rc1", "1.0.1", "latest"):
            pusher.index("hints/app", tag, BOTH)
        pusher.single("hints/alone", "3.0", "linux/amd64")
        yield registry
    finally:
        registry.stop()


async def test_a_blocker_with_a_version_tag_names_the_lowest_newer_tag_that_runs_on_arm64(
    tagged: RegistryProcess, make_resolver: ResolverFactory
) -> None:
    """1.0 blocks; of the highest newer tags 1.1, 1.2 and 2.0, 1.2 is the first with arm64.
    The hint costs one tag-list page and one lookup per tag checked (each never-seen tag one
    GET that brings its manifest, 1.1 a config blob too): 5 requests, within the stated
    bound of PAGES + 3 * LIMIT."""
    resolver = await make_resolver(local_settings(tagged.host))
    image = f"{tagged.host}/hints/app:1.0"
    said: list[str] = []
    mark = tagged.mark()
    found = await resolve(resolver, [(image, PULL)], per_host=8, remaining=lambda host: None,
                          say=said.append, lister=resolver, newer_tags=3)  # fmt: skip
    seen = Counter(
        (r.method, "tags" if "/tags/list" in r.path else r.path.split("/")[-2])
        for r in tagged.requests_since(mark)
    )
    lookup = Counter({("GET", "manifests"): 1, ("GET", "blobs"): 1})
    hint = found.hints[image]
    added = seen - lookup
    expected = (
        "1.2",
        ("1.1", "1.2", "2.0"),
        {("GET", "tags"): 1, ("GET", "manifests"): 3, ("GET", "blobs"): 1},
        True,
        [],
    )  # fmt: skip
    assert expected == (
        hint.arm64_tag,
        hint.checked,
        dict(added),
        added.total() <= newer_tags.PAGES + 3 * newer_tags.LIMIT,
        said,
    )


async def test_a_blocker_without_newer_tags_is_told_to_rebuild(
    tagged: RegistryProcess, make_resolver: ResolverFactory
) -> None:
    """`hints/alone:3.0` has no newer tag: one tag-list request, no lookup, advice to rebuild."""
    resolver = await make_resolver(local_settings(tagged.host))
    image = f"{tagged.host}/hints/alone:3.0"
    mark = tagged.mark()
    found = await resolve(resolver, [(image, PULL)], per_host=8, remaining=lambda host: None,
                          say=print, lister=resolver, newer_tags=3)  # fmt: skip
    requests = len(tagged.requests_since(mark))
    assert ("rebuild for arm64 (no newer version tag)", 3) == (found.hints[image].action, requests)


async def test_the_tag_list_is_read_page_by_page_and_cut_at_its_bound(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Five tags by pages of two, each page linking the next (as distribution 3 does): three
    pages read them all; two stop at four and say the list was cut."""
    tags = ["a", "b", "c", "d", "e"]

    async def listing(request: web.Request) -> web.StreamResponse:
        size, last = int(request.query["n"]), request.query.get("last", "")
        page = [tag for tag in tags if tag > last][:size]
        headers = {}
        if page and page[-1] != tags[-1]:
            headers["Link"] = f'</v2/paged/tags/list?n={size}&last={page[-1]}>; rel="next"'
        return web.json_response({"name": "paged", "tags": page}, headers=headers)

    faults.registry.route("GET", "/v2/paged/tags/list", listing)
    resolver = await make_resolver(local_settings(faults.host))
    image = f"{faults.host}/paged:a"
    whole = await resolver.tags(image, None, page_size=2, pages=3)
    cut = await resolver.tags(image, None, page_size=2, pages=2)
    expected = (("a", "b", "c", "d", "e"), True, ("a", "b", "c", "d"), False, 5)
    assert expected == (whole.tags, whole.complete, cut.tags, cut.complete,
                        faults.registry.count("GET", "/tags/list"))  # fmt: skip


def _rate_limited(faults: RunningFaults, images: int, pulls: int) -> list[str]:
    """`images` one-platform indexes behind a Docker Hub-like limit of `pulls` manifest GETs,
    each answer carrying `ratelimit-remaining`."""
    state = {"left": pulls}
    references = []
    for n in range(images):
        repo = f"limited/app{n}"
        body = canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [{
            "mediaType": OCI_MANIFEST, "digest": sha256(f"child{n}".encode()), "size": 2,
            "platform": {"os": "linux", "architecture": "amd64"}}]})  # fmt: skip
        digest = sha256(body)

        async def manifest(request: web.Request, body: bytes = body, digest: str = digest):
            if request.method == "GET":
                if state["left"] == 0:
                    return web.Response(status=429, headers={"ratelimit-remaining": "0;w=21600"})
                state["left"] -= 1
            headers = {"Content-Type": OCI_INDEX, "Docker-Content-Digest": digest,
                       "ratelimit-remaining": f"{state['left']};w=21600"}  # fmt: skip
            return web.Response(body=body, headers=headers)

        for name in ("1.0", digest):
            faults.registry.route("GET", f"/v2/{repo}/manifests/{name}", manifest)
        references.append(f"{faults.host}/{repo}:1.0")
    return references


async def test_an_audit_that_would_use_up_a_pull_limit_says_so_and_stops_at_it(
    faults: RunningFaults, make_resolver: ResolverFactory
) -> None:
    """Five images, three pulls: the probe learns 2 are left for 4 more images and says so
    before the rest; two more are looked up and two are unknown, never sent (no 429)."""
    metrics = Metrics()
    resolver = await make_resolver(local_settings(faults.host), metrics=metrics)
    images = _rate_limited(faults, images=5, pulls=3)
    said: list[str] = []
    found = await resolve(resolver, [(image, PULL) for image in images], per_host=1,
                          remaining=metric_remaining(metrics), say=said.append)  # fmt: skip
    unknown = [o for o in found.lookups.values() if isinstance(o, Unknown)]
    expected = (1, True, 3, 2, True, 3)
    assert expected == (
        len(said),
        said[0].startswith(f"{faults.host} allows 2 more pulls now (ratelimit-remaining) and "
                           "this audit needs up to 4"),
        len(found.lookups) - len(unknown),
        len(unknown),
        all("rate limit" in o.reason for o in unknown),
        faults.registry.count("GET", "/manifests/"),
    )  # fmt: skip


async def test_an_audit_within_the_limit_says_nothing(
    faults: RunningFaults, make_resolver: ResolverFactory, tmp_path: Path
) -> None:
    """Five images, ten pulls: no warning, every image known."""
    metrics = Metrics()
    resolver = await make_resolver(local_settings(faults.host), metrics=metrics)
    images = _rate_limited(faults, images=5, pulls=10)
    said: list[str] = []
    found = await resolve(resolver, [(image, PULL) for image in images], per_host=4,
                          remaining=metric_remaining(metrics), say=said.append)  # fmt: skip
    unknown = [o for o in found.lookups.values() if isinstance(o, Unknown)]
    assert ([], 0) == (said, len(unknown))
