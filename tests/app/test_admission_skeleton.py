"""A second kind of admission plugs into the skeleton the pod webhook uses
(extender.admission.skeleton)."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from extender.admission.skeleton import Admissions
from extender.metrics import Metrics
from extender.once import OncePerCause
from tests.support.fakes import WarnOnDeployments


def _review(spec: Any) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "operation": "CREATE",
                "object": {"spec": spec},
            },
        }
    )


async def _answers(aiohttp_client: Any, *bodies: bytes) -> tuple[list[Any], WarnOnDeployments]:
    policy = WarnOnDeployments()
    app = web.Application()
    app.router.add_post("/warn", Admissions(policy, Metrics(), OncePerCause(), 5.0).serve)
    client = await aiohttp_client(app)
    answers = []
    for body in bodies:
        async with client.post("/warn", data=body) as response:
            answers.append((response.status, orjson.loads(await response.read())))
    return answers, policy


async def test_a_warnings_only_policy_answers_allowed_with_its_warnings_and_no_patch(
    aiohttp_client: Any,
) -> None:
    """The skeleton renders the policy's Admission once, and counts its outcome once."""
    answers, policy = await _answers(aiohttp_client, _review({}))
    response = {"uid": "u-1", "allowed": True, "warnings": ["Deployment: no arm64 build"]}
    expected = [(200, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "response": response})]  # fmt: skip
    assert (expected, [("warned", True)]) == (answers, policy.counted)


async def test_an_object_the_policy_cannot_read_is_allowed_unchanged_and_a_bad_body_is_a_400(
    aiohttp_client: Any,
) -> None:
    """Errors map to answers in the skeleton: InputError from admit is allowed and skipped."""
    answers, policy = await _answers(aiohttp_client, _review("unreadable"), b"[]")
    statuses = [status for status, _ in answers]
    allowed = answers[0][1]["response"]
    counted = [("skipped", True), ("bad_request", False)]
    expected = ([200, 400], {"uid": "u-1", "allowed": True}, counted)
    assert expected == (statuses, allowed, policy.counted)
