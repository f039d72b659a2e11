"""The one boundary where errors become HTTP answers, for the extender's app and the webhook's.

`answer_for` is the table: each kind of error (archfit's tree, and the few of aiohttp and
the socket a request can raise) has one answer, one client-problem cause and one fate for the
connection. `ErrorAnswers` sends it, counts it, and logs it once per cause: the extender's app
through its middleware, the admission skeleton for what it reads before a policy decides
(docs/architecture.md, "Errors"). What a handler answers when archfit fails after it has read
the request is no error answer but the handler's own that changes nothing: every node passes,
the object is allowed unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import structlog
from aiohttp import web

from extender.errors import InputError, NoNodeIndex, UnknownPath
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.serving.client_problems import client_problem
from extender.serving.request_body import BodyTimeout
from extender.wire.scheduler_api import render_error

log = structlog.get_logger("archfit")

INTERNAL_ERROR = "internal_error"
"""The cause of archfit's own defect: logged with its traceback, not a client problem."""

AfterAnswer = Literal["kept", "closed", "lost"]
"""What becomes of the connection: kept for the requests pipelined behind; closed once the
answer is sent, the rest of a body that never came not waited for; lost, the client gone."""


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """How one error is answered."""

    response: web.Response
    cause: str
    """The client problem it counts as (`archfit_client_problems_total{cause}`), or
    INTERNAL_ERROR."""
    connection: AfterAnswer = "kept"
    fields: Mapping[str, str] = field(default_factory=dict)
    """What the warning says besides its cause and the request's path."""


def answer_for(error: Exception) -> ErrorAnswer | None:
    """The answer to `error`, the same on every app; None for an HTTPException aiohttp answers
    as it is (404)."""
    if isinstance(error, BodyTimeout):
        return ErrorAnswer(_error(408, "request body too slow"), "body_timeout", "closed")
    if isinstance(error, InputError):
        # The client's mistake: answered 400, warned once per cause.
        problem = str(error)
        return ErrorAnswer(_error(400, problem), "bad_request", fields={"problem": problem})
    if isinstance(error, UnknownPath):
        # A caller configured with the wrong path: warned once per cause, with the right one.
        problem = str(error)
        return ErrorAnswer(_error(404, problem), "unknown_path", fields={"problem": problem})
    if isinstance(error, NoNodeIndex):
        # Misconfiguration, not a rejection: Error makes it an extender error that shows in
        # the scheduler's log and the pod's event.
        body = render_error(str(error))
        response = web.Response(body=body, content_type="application/json")
        return ErrorAnswer(response, "no_node_index", fields={"hint": str(error)})
    if isinstance(error, ConnectionResetError):
        # The client went away mid-body: nobody is left to answer.
        return ErrorAnswer(web.Response(status=400), "disconnected", "lost")
    if isinstance(error, web.HTTPException):
        if error.status in (405, 413):
            reason = error.reason
            return ErrorAnswer(
                _error(error.status, reason), "bad_request", fields={"problem": reason}
            )
        return None
    return ErrorAnswer(_error(500, "internal error"), INTERNAL_ERROR)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ErrorAnswers:
    """One app's end of the boundary: answers an error by `answer_for`, counts it as a client
    problem (archfit's own defect is logged instead, once per cause) and as the app's outcome.

    `count(request, failed)` counts the request by the app's outcomes: a bad request, or
    archfit's own failure when `failed`.
    """

    def __init__(
        self,
        metrics: Metrics,
        warnings: OncePerCause,
        count: Callable[[web.Request, bool], None],
    ) -> None:
        self._metrics = metrics
        self._warnings = warnings
        self._count = count

    async def answer(self, request: web.Request, error: Exception) -> web.StreamResponse:
        """The answer to `error`, raised while serving `request`; re-raises what aiohttp
        answers itself."""
        answer = answer_for(error)
        if answer is None:
            raise error
        failed = answer.cause == INTERNAL_ERROR
        if failed:
            # archfit's own defect: say so loudly, but keep the connection for what follows.
            if (
                self._warnings.log_now(f"{INTERNAL_ERROR}:{type(error).__name__}:{error}")
                is not None
            ):
                log.exception(INTERNAL_ERROR, path=request.path, exc_info=error)
        else:
            fields = answer.fields
            client_problem(self._metrics, self._warnings, answer.cause, path=request.path, **fields)
        self._count(request, failed)
        response = answer.response
        if answer.connection == "closed":
            return await answer_and_close(request, response)
        if answer.connection == "lost":
            response.force_close()
        return response

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every error a handler raises is answered here, none left to aiohttp: its 500 closes
        the connection, and requests pipelined behind would get no answer."""
        try:
            return await handler(request)
        except Exception as error:
            return await self.answer(request, error)


async def answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send `response`, then close the connection: the rest of a body that never came is
    not waited for (aiohttp would linger to read it)."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:
        request.transport.close()
    return response
