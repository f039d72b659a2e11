"""HTTP answers to errors: how archfit answers a request it could not serve."""

from __future__ import annotations

from aiohttp import web


async def answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send `response`, then close the connection: the rest of a body that never came is
    not waited for (aiohttp would linger to read it)."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:
        request.transport.close()
    return response
