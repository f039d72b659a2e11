"""The list-then-watch loop both of archfit's watches run (nodes, held pods), in a thread.

The synchronous kubernetes client blocks, so each watch owns a daemon thread: list, then
watch from the list's resourceVersion until the server ends the watch, and again; a
version too old (410) lists again at once, any other failure waits with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.client.exceptions import ApiException

from extender.errors import ConflictError
from extender.kube.errors import short_error

BACKOFF_SECONDS = (0.5, 1, 2, 5, 10)
WATCH_SECONDS = 30
"""A server-side watch timeout: it bounds how long the thread can block in a read, even if
stopping could not cut the connection."""


class Expired(ConflictError):
    """The watch's resourceVersion (or a list's continue token) is too old: list again."""


def list_watch_forever(
    stop: threading.Event,
    list_all: Callable[[], str],
    watch_from: Callable[[str], str],
    log: Any,
    events: tuple[str, str],
) -> None:
    """Until `stop`: `list_all()` returns a resourceVersion, `watch_from(v)` the next one.

    `events` names the log lines: (a relist after expiry, a failure with its backoff).
    """
    expired_event, error_event = events
    failures = 0
    while not stop.is_set():
        try:
            version = list_all()
            failures = 0
            while not stop.is_set():
                version = watch_from(version)
        except Expired:
            log.info(expired_event, action="relist")
        except Exception as error:  # the thread must survive any API hiccup
            if stop.is_set():
                break  # the connection was cut because we are stopping
            delay = BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS) - 1)]
            failures += 1
            log.warning(error_event, error=short_error(error), retry_in_s=delay)
            stop.wait(delay)


async def stop_watching(
    stop: threading.Event, response: Any, thread: threading.Thread | None
) -> None:
    """Stop a list-watch thread: set `stop`, cut the watch being read (urllib3 >= 2.3 can; with
    an older one the read ends at the watch's timeout), and wait a moment for the daemon
    thread, never holding shutdown hostage to a read in progress."""
    stop.set()
    shutdown = getattr(response, "shutdown", None)
    if shutdown is not None:
        with contextlib.suppress(OSError):
            shutdown()
    if thread is not None:
        await asyncio.to_thread(thread.join, 1.0)


def open_watch(list_call: Callable[..., Any], version: str, **query: Any) -> Any:
    """A watch from `version` through a client list method, its body not yet read (a urllib3
    response for `watch_lines`); a version too old raises Expired."""
    try:
        return list_call(
            watch=True,
            resource_version=version,
            timeout_seconds=WATCH_SECONDS,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=(5, WATCH_SECONDS + 10),
            **query,
        )
    except ApiException as error:
        if error.status == 410:
            raise Expired from error
        raise


def watch_lines(response: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed watch body: one JSON event each."""
    pending = b""
    for chunk in response.stream(decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending
