"""The node index against a local server that speaks Kubernetes list/watch for Nodes."""

from __future__ import annotations

import asyncio
import contextlib
import copy

import orjson
from aiohttp import web
from structlog.testing import capture_logs

from extender.core.node_facts import node_facts
from extender.core.platforms import Rule, parse
from extender.kube.client.api import connect
from extender.kube.client.rest_config import RestConfig
from extender.kube.nodes import NodeIndex
from tests.app.conftest import post, settings
from tests.objects import args_names, node, pod
from tests.support.fakes import FunctionResolver, StaticNodes
from tests.support.waiting import wait_for_async

# What the API server takes as true (Go strconv.ParseBool): kubernetes 29 sends "True".
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")


class FakeApiServer:
    """A loopback HTTP server with the list/watch semantics of /api/v1/nodes.

    It scripts one watch stream of ADDED/MODIFIED/DELETED/BOOKMARK events that
    ends in a 410 Gone error event, after which a correct client lists again.
    """

    def __init__(self) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in (node("n1", "amd64"), node("n2", "arm64"))}
        self.version = 10
        self.lists: list[str] = []
        """The resourceVersion each full list asked for."""
        self.pages: list[int] = []
        """How many nodes each list page carried."""
        self.watches: list[str] = []
        self.script = True
        """Play the scripted watch events; when False every watch stays quiet."""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/nodes", self.handle)
        return app

    def page(self, request: web.Request) -> web.Response:
        """One page of the list: `limit` nodes from the `continue` token (an offset here)."""
        start = int(request.query.get("continue") or 0)
        if not start:
            self.lists.append(request.query.get("resourceVersion", ""))
        limit = int(request.query.get("limit") or len(self.nodes))
        items = [copy.deepcopy(n) for n in list(self.nodes.values())[start : start + limit]]
        for item in items:
            item["metadata"]["resourceVersion"] = str(self.version)
        more = start + limit < len(self.nodes)
        metadata = {"resourceVersion": str(self.version)}
        if more:
            metadata["continue"] = str(start + limit)
        self.pages.append(len(items))
        body = {"kind": "NodeList", "apiVersion": "v1", "metadata": metadata, "items": items}
        return web.json_response(body)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") not in _GO_TRUE:
            return self.page(request)
        self.watches.append(request.query["resourceVersion"])
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        if len(self.watches) == 1 and self.script:
            n3 = node("n3", "arm64", runtime="cri-o://1.31.2")
            n1 = node("n1", "arm64", runtime="containerd://2.0.5")  # relabelled, downgraded
            events = [("ADDED", n3), ("MODIFIED", n1), ("DELETED", self.nodes["n2"])]
            self.nodes.update(n1=n1, n3=n3)
            del self.nodes["n2"]
            for kind, obj in events:
                self.version += 1
                obj = copy.deepcopy(obj)
                obj["metadata"]["resourceVersion"] = str(self.version)
                await response.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")
            bookmark = {
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.version + 5)},
            }
            await response.write(orjson.dumps({"type": "BOOKMARK", "object": bookmark}) + b"\n")
            # The etcd compaction the client must survive: 410 Gone mid-watch.
            gone = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": "too old resource version",
                "reason": "Expired",
                "code": 410,
            }
            self.nodes["n4"] = node("n4", "amd64")  # only a fresh list can see it
            self.version += 10
            await response.write(orjson.dumps({"type": "ERROR", "object": gone}) + b"\n")
            return response
        # Later watches stay quiet until the client goes away.
        await asyncio.sleep(5)
        return response


def kubeconfig_for(path, port: int):
    """A kubeconfig at `path` for the fake API server on `port`."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


@contextlib.asynccontextmanager
async def running_index(aiohttp_server, fake: FakeApiServer, page_size: int):
    """A NodeIndex list-watching `fake` through archfit's API client, started."""
    server = await aiohttp_server(fake.app())
    api = connect(RestConfig(host=f"http://127.0.0.1:{server.port}"))
    index = NodeIndex(api, page_size=page_size)
    assert not index.synced
    index.start()
    try:
        yield index
    finally:
        await index.stop()
        api.close()


async def test_the_index_follows_watch_events_and_relists_after_410_gone(aiohttp_server):
    """ADDED, MODIFIED and DELETED update platforms and rules; an expired watch lists again."""
    fake = FakeApiServer()
    async with running_index(aiohttp_server, fake, page_size=1) as index:
        assert await index.wait_synced(10)
        # The second watch starts just after the relist publishes; wait for it too.
        await wait_for_async(
            lambda: index.relists == 2 and "n4" in index.snapshot() and len(fake.watches) >= 2,
            "the relist and the second watch",
        )
        # The runtime each node reports rides along: containerd 2.0 is loose, CRI-O is
        # containers/image, containerd 2.1 and unknown nodes are strict.
        assert {
            "n1": (parse("linux/arm64"), Rule.LOOSE, False),
            "n3": (parse("linux/arm64"), Rule.CONTAINERS_IMAGE, False),
            "n4": (parse("linux/amd64"), Rule.STRICT, False),
        } == dict(index.snapshot())
        assert {parse("linux/arm64"), parse("linux/amd64")} == index.known_platforms()
        assert ["10", "23"] == fake.watches[:2]
        assert 2 == len(fake.lists)
        # One node a page: two pages for the first list (n1, n2), three for the relist.
        assert [1, 1, 1, 1, 1] == fake.pages
        assert 5 == index.pages


def shapes() -> list[dict]:
    """Nodes that reach every branch of node_facts.node_facts."""
    windows = node("win", "amd64", "windows")
    windows["metadata"]["labels"]["node.kubernetes.io/windows-build"] = "10.0.20348"
    no_arch = node("no-arch", labels=False, node_info=False)
    return [
        node("amd", "amd64"),
        node("arm-2-0", "arm64", runtime="containerd://2.0.5"),
        node("crio", "arm64", runtime="cri-o://1.31.2"),
        node("unlabelled", "arm64", labels=False),  # the platform from status.nodeInfo
        node("v7", "arm", runtime="docker://27.0"),
        windows,
        no_arch,
    ]


async def test_the_index_reads_the_same_facts_as_node_facts_on_the_full_node(aiohttp_server):
    """Decoding only some fields loses nothing node_facts reads: labels, nodeInfo, runtime."""
    fake = FakeApiServer()
    fake.script = False
    fake.nodes = {n["metadata"]["name"]: n for n in shapes()}
    async with running_index(aiohttp_server, fake, page_size=3) as index:
        assert await index.wait_synced(10)
        expected = {
            n["metadata"]["name"]: node_facts(n["metadata"]["labels"], n["status"]["nodeInfo"])
            for n in shapes()
        }
        assert expected == dict(index.snapshot())
        # Each shape differs: the table would hide a field the decoder dropped otherwise.
        assert len(shapes()) == len(set(expected.values()))


async def test_a_continue_token_that_expired_mid_list_starts_the_list_over(aiohttp_server):
    """410 Gone on the second page (etcd compacted under the list): list again from the top."""
    fake = FakeApiServer()
    fake.script = False
    plain_page = fake.page
    expired: list[str] = []

    def page_expiring_once(request: web.Request) -> web.Response:
        if request.query.get("continue") and not expired:
            expired.append(request.query["continue"])
            gone = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410}
            return web.json_response(gone, status=410)
        return plain_page(request)

    fake.page = page_expiring_once  # type: ignore[method-assign]
    async with running_index(aiohttp_server, fake, page_size=1) as index:
        assert await index.wait_synced(10)
        assert {"n1", "n2"} == set(index.snapshot())
        # Page one, the expired page two, then pages one and two again: one list published.
        assert (["1"], [1, 1, 1], 1) == (expired, fake.pages, index.relists)


async def test_readyz_is_false_until_the_first_node_list_and_names_then_resolve(
    aiohttp_server, make_client, tmp_path
):
    """Wired from settings (a kubeconfig): 503 before the first list, 200 and filtering after."""
    fake = FakeApiServer()
    fake.script = False
    release = asyncio.Event()
    plain_handle = fake.handle

    async def held_list(request):
        if request.query.get("watch") not in _GO_TRUE:
            await release.wait()
        return await plain_handle(request)

    fake.handle = held_list
    server = await aiohttp_server(fake.app())
    kubeconfig = kubeconfig_for(tmp_path / "kubeconfig", server.port)
    client = await make_client(
        settings(kubernetes={"mode": "kubeconfig", "kubeconfig": str(kubeconfig)})
    )
    assert 503 == (await client.get("/readyz")).status
    release.set()
    await wait_for_status(lambda: client.get("/readyz"), 200)
    body = await post(client, "filter", args_names(pod("acme/amd:1"), "n1", "n2"))
    assert (["n1"], []) == (body["NodeNames"], list(body["FailedAndUnresolvableNodes"]))


async def wait_for_status(request, status: int, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if (await request()).status == status:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never answered {status}")


async def test_waiting_for_the_index_and_the_registry_share_one_deadline(make_client):
    """An unsynced index and a hung registry together still answer within the budget."""

    async def hung(image, pull):
        await asyncio.sleep(30)

    client = await make_client(
        settings(policy={"resolveDeadlineSeconds": 1.0}),
        nodes=StaticNodes(synced=False),
        resolver=FunctionResolver(hung),
    )
    with capture_logs() as logs:
        body = await post(client, "filter", args_names(pod("acme/amd:1"), "n1"))
    assert ["n1"] == body["NodeNames"]
    # The wait for the index spent the whole 1 s, so the lookup was given what was left of
    # it, nothing: with a budget of its own it would say "the 1 s deadline". Read off the
    # log, not a clock, so a loaded machine cannot turn it red.
    reasons = [str(e.get("error")) for e in logs if "deadline" in str(e.get("error"))]
    assert reasons, logs
    assert all("slower than the 0 s deadline" in reason for reason in reasons), reasons


async def test_serve_under_auto_reads_nodes_through_kubeconfig_as_audit_does(
    aiohttp_server, make_client, tmp_path, monkeypatch
):
    """`kubernetes.mode: auto` outside a cluster takes $KUBECONFIG: the node index is on."""
    fake = FakeApiServer()
    fake.script = False
    server = await aiohttp_server(fake.app())
    kubeconfig = kubeconfig_for(tmp_path / "kubeconfig", server.port)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    client = await make_client(settings(kubernetes={"mode": "auto", "pullSecrets": False}))
    await wait_for_status(lambda: client.get("/readyz"), 200)
    body = await post(client, "filter", args_names(pod("acme/amd:1"), "n1", "n2"))
    assert ["n1"] == body["NodeNames"]


async def test_serve_says_at_start_why_the_node_index_is_off(make_client, tmp_path, monkeypatch):
    """services_ready names what `auto` looked for, so "no node index" later is no mystery."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with capture_logs() as logs:
        await make_client(settings(kubernetes={"mode": "auto"}))
    [ready] = [e for e in logs if e["event"] == "services_ready"]
    assert (False, "kubernetes.mode is auto and there is no service account") == (
        ready["node_index"],
        ready["node_index_off"][:55],
    )
