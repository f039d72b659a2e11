"""The list-then-watch loop every watch of archfit runs (nodes, held pods, every pod for the
watcher, steering's namespaces and chosen pods), in a thread.

The synchronous API client blocks, so each watch owns a daemon thread (a `ListWatch`): list,
then watch from the list's resourceVersion until the server ends the watch, and again; a
version too old (410) lists again at once, any other failure waits with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import msgspec

from extender.errors import ClusterReadError, ConflictError
from extender.kube.api import KubeApi, Query
from extender.kube.errors import ApiError, short_error

T = TypeVar("T")
BACKOFF_SECONDS = (0.5, 1, 2, 5, 10)
LIST_PAGE = 500
"""Objects per list request (`limit`/`continue`) for the audit's reads and the steering
watches; the node index pages smaller, to keep less memory behind (kube/nodes.py)."""
WATCH_SECONDS = 30
"""A server-side watch timeout: it bounds how long the thread can block in a read, even if
stopping could not cut the connection."""


REQUEST_TIMEOUT = (5, 15)
"""(connect, read) seconds for one Kubernetes API call that is not a watch."""


class Expired(ConflictError):
    """The watch's resourceVersion (or a list's continue token) is too old: list again."""


class WatchFailed(ClusterReadError):
    """A watch ended in an ERROR event other than 410: the loop lists again after a backoff."""


class WatchFailure(msgspec.Struct, frozen=True):
    """The Status object of a watch ERROR event."""

    code: int = 0
    message: str = ""


class ListMeta(msgspec.Struct, rename="camel", frozen=True):
    """A list's metadata: its resourceVersion and the next page's token."""

    resource_version: str = ""
    next: str = msgspec.field(default="", name="continue")  # `continue` is a keyword


class ListPage(msgspec.Struct, Generic[T], frozen=True):
    """One page of a list, each item decoded to what its reader needs."""

    metadata: ListMeta = ListMeta()
    items: list[T] | None = None


class WatchEvent(msgspec.Struct, frozen=True):
    """One watch line: its type, and its object left undecoded."""

    type: str
    object: msgspec.Raw = msgspec.Raw(b"{}")
    """An object, or for ERROR a Status: decoded by type, since a Status's `status` is a
    string where a Node's or a Pod's is an object."""


decode_watch_event = msgspec.json.Decoder(WatchEvent).decode
_decode_failure = msgspec.json.Decoder(WatchFailure).decode


def watch_error(raw: msgspec.Raw) -> Expired | WatchFailed:
    """What a watch ERROR event means: Expired for a 410, else WatchFailed saying it."""
    failure = _decode_failure(raw)
    if failure.code == 410:
        return Expired()
    return WatchFailed(f"watch error {failure.code}: {failure.message}")


def open_watch(api: KubeApi, path: str, version: str, query: Query | None = None) -> Any:
    """A watch of the collection at `path` from `version`, its body not yet read (a urllib3
    response for `watch_lines`); a version too old raises Expired. `query` narrows it
    (`labelSelector`, `fieldSelector`)."""
    try:
        return api.stream(
            path,
            query={
                **(query or {}),
                "watch": True,
                "resourceVersion": version,
                "timeoutSeconds": WATCH_SECONDS,
                "allowWatchBookmarks": True,
            },
            timeout=(5, WATCH_SECONDS + 10),
        )
    except ApiError as error:
        if error.status == 410:
            raise Expired from error
        raise


Apply = Callable[[str, msgspec.Raw, str], str]
"""Takes a watch event's type (ADDED, MODIFIED, DELETED, BOOKMARK), its object undecoded and
the version so far; returns the version to resume from."""


def follow_watch(
    api: KubeApi,
    path: str,
    version: str,
    stop: threading.Event,
    apply: Apply,
    reading: Callable[[Any], None],
    query: Query | None = None,
) -> str:
    """Read a watch from `version` until the server ends it or `stop`: `apply` takes each
    event and returns the version to resume from. An ERROR event raises (`watch_error`), so
    no watch reads one as an object. `reading` is told the response while it is read (None
    after), so `ListWatch.stop` can cut it."""
    response = open_watch(api, path, version, query)
    reading(response)
    try:
        for line in watch_lines(response):
            event = decode_watch_event(line)
            if event.type == "ERROR":
                raise watch_error(event.object)
            version = apply(event.type, event.object, version)
            if stop.is_set():
                break
    finally:
        reading(None)
        response.release_conn()
    return version


class ListWatch:
    """One list-watch thread: the bookkeeping every watch of archfit shares, owned (not
    inherited) by each watcher, which keeps only what it lists and how it applies an event.

    The watcher builds it with its thread's name, `list_all()` (list, return the
    resourceVersion) and `watch_from(version)` (read one watch, return the version to resume
    from: `follow` does that), and the two log events (a relist after expiry, a failure with
    its backoff). `start()` runs the loop in a daemon thread; `await stop()` ends it.
    """

    def __init__(
        self,
        thread_name: str,
        list_all: Callable[[], str],
        watch_from: Callable[[str], str],
        log: Any,
        events: tuple[str, str],
    ) -> None:
        self._thread_name = thread_name
        self._list_all = list_all
        self._watch_from = watch_from
        self._log = log
        self._expired_event, self._error_event = events
        self.stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None
        """The watch response being read, so stop() can cut it short."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Set the stop event, cut the watch being read (urllib3 >= 2.3 can; with an older
        one the read ends at the watch's timeout), and wait a moment for the daemon thread,
        never holding shutdown hostage to a read in progress."""
        self.stop_event.set()
        shutdown = getattr(self._response, "shutdown", None)
        if shutdown is not None:
            with contextlib.suppress(OSError):
                shutdown()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 1.0)

    def reading(self, response: Any) -> None:
        """Told the response while a watch is read (None after), so stop() can cut it."""
        self._response = response

    def follow(
        self, api: KubeApi, path: str, version: str, apply: Apply, query: Query | None = None
    ) -> str:
        """`follow_watch` with this thread's stop event and `reading`: what a watcher's
        `watch_from` returns."""
        return follow_watch(api, path, version, self.stop_event, apply, self.reading, query)

    def _run(self) -> None:
        """Until stopped: list, then watch from the list's version, and again."""
        stop = self.stop_event
        failures = 0
        while not stop.is_set():
            try:
                version = self._list_all()
                failures = 0
                while not stop.is_set():
                    version = self._watch_from(version)
            except Expired:
                self._log.info(self._expired_event, action="relist")
            except Exception as error:  # the thread must survive any API hiccup
                if stop.is_set():
                    break  # the connection was cut because we are stopping
                delay = BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS) - 1)]
                failures += 1
                self._log.warning(self._error_event, error=short_error(error), retry_in_s=delay)
                stop.wait(delay)


def watch_lines(response: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed watch body: one JSON event each."""
    pending = b""
    for chunk in response.stream(decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending
