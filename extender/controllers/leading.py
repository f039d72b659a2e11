"""Running a controller on the one replica that holds its Lease: the releaser, the mismatch
watcher and the policy's publisher each open `leading` for as long as the server runs."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from extender.config.settings import KubernetesSettings
from extender.event_loop import in_background

if TYPE_CHECKING:  # the client is loaded only once API access is on
    from extender.kube.lease import Lease
    from extender.services import NodeSource


def holder_identity() -> str:
    """This replica's name in a Lease: its pod's (or host's) name and a suffix of its own,
    so a restarted process is a new holder."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def contender(
    api: Any,
    settings: KubernetesSettings,
    lease_name: str,
    on_change: Callable[[bool], None],
    identity: str = "",
) -> Lease:
    """This replica as a contender for the Lease `lease_name` in archfit's namespace;
    `on_change` is told whether it holds it (a leader gauge)."""
    from extender.kube.connect import current_namespace
    from extender.kube.lease import ApiLeases, Lease

    leases = ApiLeases(api, current_namespace(settings), lease_name)
    return Lease(leases, identity or holder_identity(), on_change=on_change)


@contextlib.asynccontextmanager
async def leading(
    lease: Lease,
    work: Callable[[], Awaitable[None]],
    *,
    ready: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[None]:
    """While the block runs: contend for `lease` and run `work()` while holding it
    (`Lease.lead`). `ready()`, awaited first, may keep this replica out of the contest
    (False) or hold it back until what the work needs is there."""

    async def contend() -> None:
        if ready is None or await ready():
            await lease.lead(work)

    async with in_background(contend()):
        yield


def nodes_synced(nodes: NodeSource | None) -> Callable[[], Awaitable[bool]]:
    """A `ready` for `leading`: the node index's first list, waited for before contending
    (what these controllers say names node platforms). Waiting a second at a time keeps a
    silent API server from holding shutdown hostage to a read blocked in the default
    executor."""

    async def ready() -> bool:
        while nodes is not None and not await nodes.wait_synced(1.0):
            pass
        return True

    return ready
