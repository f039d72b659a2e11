"""The system CA store of aiohttp's client, read once `serve` is up rather than at import.

Importing aiohttp (and `aiohttp.web` does) builds the client's two default SSL contexts, and
each reads the system CA bundle: about 50 ms, a sixth of `serve`'s start, for contexts that
only HTTPS registry requests use. `import_aiohttp` imports it with those two reads deferred;
`read_deferred` does them, in a thread. The server starts that once it listens, and every
registry request awaits `loaded` first (registry/transport.py), so no request goes out before.
That aiohttp builds the contexts at import is no public promise: a test checks it per version
(tests/unit/test_library_internals.py).
"""

from __future__ import annotations

import asyncio
import ssl
import sys
import threading

# Process-wide on purpose: the contexts are aiohttp.connector's module globals.
_deferred: list[ssl.SSLContext] = []
"""Contexts built while aiohttp was imported whose CA store is not read yet; a context
leaves the list only once read, so an empty list means every read is done."""
_reading = threading.Lock()


def import_aiohttp() -> None:
    """Import aiohttp with its default contexts' reads of the CA store left to `read_deferred`.

    A no-op when aiohttp is imported already (its contexts then hold the CAs). The reads are
    the ones aiohttp asks for, in its order, only later: what a context trusts is unchanged.
    """
    if "aiohttp" in sys.modules:
        return
    # ssl.create_default_context reads through load_default_certs, which calls this too.
    inherited = "set_default_verify_paths" not in vars(ssl.SSLContext)
    original = ssl.SSLContext.set_default_verify_paths

    def defer(context: ssl.SSLContext) -> None:
        _deferred.append(context)

    ssl.SSLContext.set_default_verify_paths = defer  # type: ignore[method-assign,assignment]
    try:
        import aiohttp  # noqa: F401
    finally:
        if inherited:
            del ssl.SSLContext.set_default_verify_paths
        else:
            ssl.SSLContext.set_default_verify_paths = original  # type: ignore[method-assign]


def pending() -> int:
    """How many contexts still wait for their CA store (0 unless `import_aiohttp` deferred)."""
    return len(_deferred)


def read_deferred() -> None:
    """Read the CA store into every deferred context. It blocks (file reads, the GIL
    released): from the event loop, await `loaded` instead."""
    with _reading:
        while _deferred:
            _deferred[0].set_default_verify_paths()
            del _deferred[0]


async def loaded() -> None:
    """Return once aiohttp's default contexts hold the system CAs: at once unless the read
    is still to do, which then runs in a thread."""
    if _deferred:
        await asyncio.to_thread(read_deferred)
