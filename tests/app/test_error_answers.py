"""Both apps answer an error through one boundary (extender.serving.error_answers): the
extender's filter on its listener and the webhook's /mutate on its TLS listener, alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from extender.app_keys import METRICS
from tests.app import test_webhook
from tests.app.test_webhook import Start, Webhook

start = test_webhook.start  # the app with the webhook's TLS listener beside its own

_BODY_TIMEOUT_SECONDS = 0.3
_MAX_BODY_BYTES = 2048


async def _slow_body() -> AsyncIterator[bytes]:
    """A body whose first bytes come at once and the rest long after bodyTimeoutSeconds."""
    yield b'{"Pod": '
    await asyncio.sleep(_BODY_TIMEOUT_SECONDS * 10)
    yield b"{}}"


BODIES: dict[str, Any] = {
    "too slow": _slow_body,
    "not JSON": lambda: b"{not json",
    "too big": lambda: b"[" + b" " * _MAX_BODY_BYTES + b"]",
}


async def _answer(session: aiohttp.ClientSession, url: str, body: Any, **kw: Any) -> Any:
    """(status, the `error` of the JSON answer)."""
    async with session.post(url, data=body(), **kw) as response:
        return response.status, orjson.loads(await response.read())["error"]


async def _answers(hook: Webhook) -> dict[str, dict[str, Any]]:
    extender = str(hook.client.make_url("/scheduler/filter"))
    webhook = f"https://127.0.0.1:{hook.port}/mutate"
    answers: dict[str, dict[str, Any]] = {}
    for name, body in BODIES.items():
        answers[name] = {
            "extender": await _answer(hook.session, extender, body),
            "webhook": await _answer(hook.session, webhook, body, ssl=hook.trust()),
        }
    return answers


async def _start(start: Start) -> Webhook:
    limits = {"bodyTimeoutSeconds": _BODY_TIMEOUT_SECONDS, "maxBodyBytes": _MAX_BODY_BYTES}
    return await start(server=limits, webhook={"maxBodyBytes": _MAX_BODY_BYTES})


async def test_a_slow_a_bad_and_a_big_body_are_answered_alike_by_the_extender_and_the_webhook(
    start: Start,
) -> None:
    """408, 400 and 413 with the same kind of JSON answer on both listeners."""
    answers = await _answers(await _start(start))
    statuses = {
        name: {app: status for app, (status, _) in by.items()} for name, by in answers.items()
    }
    timeout = {app: error for app, (_, error) in answers["too slow"].items()}
    too_big = {app: error for app, (_, error) in answers["too big"].items()}
    expected = (
        {
            "too slow": {"extender": 408, "webhook": 408},
            "not JSON": {"extender": 400, "webhook": 400},
            "too big": {"extender": 413, "webhook": 413},
        },
        {"extender": "request body too slow", "webhook": "request body too slow"},
        {"extender": "Request Entity Too Large", "webhook": "Request Entity Too Large"},
    )
    assert expected == (statuses, timeout, too_big)


async def test_each_app_counts_every_answered_error_as_a_bad_request_of_its_own(
    start: Start,
) -> None:
    """The extender's filter calls and the webhook's reviews each count three bad requests,
    the slow body among them; the client problems count each error of both."""
    hook = await _start(start)
    await _answers(hook)
    registry = hook.app[METRICS].registry
    counts = {
        "filter": registry.get_sample_value(
            "archfit_requests_total", {"verb": "filter", "outcome": "bad_request"}
        ),
        "mutate": registry.get_sample_value(
            "archfit_admission_reviews_total", {"outcome": "bad_request"}
        ),
        "body_timeout": registry.get_sample_value(
            "archfit_client_problems_total", {"cause": "body_timeout"}
        ),
        "bad_request": registry.get_sample_value(
            "archfit_client_problems_total", {"cause": "bad_request"}
        ),
    }
    expected = {"filter": 3.0, "mutate": 3.0, "body_timeout": 2.0, "bad_request": 4.0}
    assert expected == counts
