"""The list-then-watch loop every watch of archfit runs (nodes, held pods, every pod for the
watcher, steering's namespaces and chosen pods), in a thread, backing off as client-go's
reflector does (tools/cache/reflector.go).

The synchronous API client blocks, so each watch owns a daemon thread (a `ListWatch`): list,
then watch from the list's resourceVersion, and watch again each time the server ends the
watch. A watch that cannot be opened because the server is not there or asks to slow down
(429) is retried after a back-off, without listing; any other failure, an expired version
(410) included, ends the round, and the next list waits a back-off first. The back-off is
the reflector's (`ReflectorBackoff`): 0.8 s doubling to 30 s, each with up to as much again
of jitter, started afresh only when two minutes have passed since it last was; a list that
succeeds does not reset it, so a watch the server keeps refusing (RBAC granting `list`
without `watch`) costs a list every 30 to 60 s, not two a second. Each new cause of failure
is logged once, with what the server said (the verb and resource a 403 names).
"""

from __future__ import annotations

import contextlib
import errno
import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import msgspec

from extender.errors import ClusterReadError, ConflictError
from extender.kube.client.api import KubeApi, Query
from extender.kube.client.calls import blocking
from extender.kube.client.errors import ApiError, short_error

T = TypeVar("T")
BACKOFF_INITIAL_SECONDS = 0.8
BACKOFF_CAP_SECONDS = 30.0
BACKOFF_FACTOR = 2.0
BACKOFF_JITTER = 1.0
BACKOFF_RESET_SECONDS = 120.0
"""The reflector's back-off (client-go's defaultBackoffInit, Max, Factor, Jitter, Reset)."""
_FORBIDDEN = re.compile(r'cannot (\w+) resource "([^"]+)"')
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


class ReflectorBackoff:
    """client-go's reflector back-off: wait.Backoff{Duration: 0.8 s, Factor: 2, Jitter: 1,
    Cap: 30 s, Steps: 38} behind DelayWithReset(2 minutes). Each delay is its step's duration
    plus up to as much again at random; past the cap every delay is 30 to 60 s; the steps
    start again only once BACKOFF_RESET_SECONDS have passed since they last did."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._clock = clock
        self._jitter = jitter
        self._started = clock()
        self._reset()

    def _reset(self) -> None:
        self._duration = BACKOFF_INITIAL_SECONDS
        self._steps = math.ceil(BACKOFF_CAP_SECONDS / BACKOFF_INITIAL_SECONDS)

    def delay(self) -> float:
        """The next wait, in seconds."""
        now = self._clock()
        if now - self._started > BACKOFF_RESET_SECONDS:
            self._reset()
            self._started = now
        duration = self._duration
        if self._steps >= 1:
            self._steps -= 1
            following = duration * BACKOFF_FACTOR
            if following > BACKOFF_CAP_SECONDS:
                following, self._steps = BACKOFF_CAP_SECONDS, 0
            self._duration = following
        return duration + self._jitter() * BACKOFF_JITTER * duration


def _retry_watch(error: BaseException) -> bool:
    """Whether a watch that could not be opened is retried without listing again (the
    reflector's isWatchErrorRetriable): the server refused the connection, or answered 429."""
    if isinstance(error, ApiError):
        return error.status == 429
    seen: BaseException | None = error
    while seen is not None:  # urllib3 wraps the socket's error
        if (
            isinstance(seen, ConnectionRefusedError)
            or getattr(seen, "errno", None) == errno.ECONNREFUSED
        ):
            return True
        seen = seen.__cause__ or seen.__context__ or getattr(seen, "reason", None)
        if seen is error:
            break
    return False


def failure_fields(error: BaseException) -> dict[str, Any]:
    """What a failure says, as log fields: the status and, for a 403, the verb and resource
    the server refused (an RBAC rule to add)."""
    fields: dict[str, Any] = {"error": short_error(error)}
    if isinstance(error, ApiError):
        fields["status"] = error.status
        found = _FORBIDDEN.search(error.message)
        if error.status == 403 and found:
            fields["verb"], fields["resource"] = found.group(1), found.group(2)
    return fields


class ListWatch:
    """One list-watch thread: the bookkeeping every watch of archfit shares, owned (not
    inherited) by each watcher, which keeps only what it lists and how it applies an event.

    The watcher builds it with its thread's name, `list_all()` (list, return the
    resourceVersion) and `watch_from(version)` (read one watch, return the version to resume
    from: `follow` does that), and the two log events (a relist after expiry, a failure with
    its back-off). `start()` runs the loop in a daemon thread; `await stop()` ends it.
    `problem` says, while the watch cannot be kept open, why: what a reader of the watched
    objects should know (they are as fresh as the last list).
    """

    def __init__(
        self,
        thread_name: str,
        list_all: Callable[[], str],
        watch_from: Callable[[str], str],
        log: Any,
        events: tuple[str, str],
        *,
        backoff: ReflectorBackoff | None = None,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        """`wait(seconds)` waits between attempts (the stop event's wait when None)."""
        self._thread_name = thread_name
        self._list_all = list_all
        self._watch_from = watch_from
        self._log = log
        self._expired_event, self._error_event = events
        self._backoff = backoff or ReflectorBackoff()
        self.stop_event = threading.Event()
        self._wait = wait or self.stop_event.wait
        self._thread: threading.Thread | None = None
        self._response: Any = None
        """The watch response being read, so stop() can cut it short."""
        self.problem: str | None = None
        """Why the watch cannot be kept open now, or None while it is (or before the first
        list): set by a failure, cleared when a watch opens."""
        self._logged_cause: str | None = None
        self.lists = 0
        """Lists started (every round starts with one); tests and benchmarks read it."""

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
            await blocking(self._thread.join, 1.0)

    def reading(self, response: Any) -> None:
        """Told the response while a watch is read (None after), so stop() can cut it; a
        watch that opened means the objects are current again."""
        self._response = response
        if response is not None and self.problem is not None:
            self.problem = None
            self._logged_cause = None
            self._log.info("watch_recovered", watch=self._thread_name, failed=self._error_event)

    def follow(
        self, api: KubeApi, path: str, version: str, apply: Apply, query: Query | None = None
    ) -> str:
        """`follow_watch` with this thread's stop event and `reading`: what a watcher's
        `watch_from` returns."""
        return follow_watch(api, path, version, self.stop_event, apply, self.reading, query)

    def _failed(self, error: BaseException, delay: float) -> None:
        """Note a failure; log it when its cause is new (a refusal repeated every back-off is
        one line, not one a minute)."""
        fields = failure_fields(error)
        cause = " ".join(str(fields.get(key, "")) for key in ("status", "verb", "resource"))
        cause = cause.strip() or re.sub(r"\d+", "N", fields["error"])
        self.problem = fields["error"]
        if cause != self._logged_cause:
            self._logged_cause = cause
            self._log.warning(self._error_event, retry_in_s=round(delay, 1), **fields)

    def _run(self) -> None:
        """Until stopped: list, then watch from the list's version, and again."""
        stop = self.stop_event
        while not stop.is_set():
            try:
                self.lists += 1
                version = self._list_all()
                while not stop.is_set():
                    try:
                        version = self._watch_from(version)
                    except Exception as error:
                        if stop.is_set() or not _retry_watch(error):
                            raise
                        delay = self._backoff.delay()
                        self._failed(error, delay)
                        self._wait(delay)
            except Expired:
                self._log.info(self._expired_event, action="relist")
            except Exception as error:  # the thread must survive any API hiccup
                if stop.is_set():
                    break  # the connection was cut because we are stopping
                delay = self._backoff.delay()
                self._failed(error, delay)
                self._wait(delay)
                continue
            if not stop.is_set():
                self._wait(self._backoff.delay())


def watch_lines(response: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed watch body: one JSON event each."""
    pending = b""
    for chunk in response.stream(decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending
