"""The admission skeleton: one request path for every AdmissionReview archfit answers.

`Admissions.serve` is bind → read → decode → decide → count → render, whatever is admitted;
what differs is an `AdmissionPolicy` (extender.admission.pod_webhook's `PodMutation` for
pods). It answers an `Admission` value, counted and rendered here, once. A body that is no
AdmissionReview is answered by the error boundary both apps share
(extender.serving.error_answers: 400, 408, 413); once it is one, an object the policy cannot
read (InputError) and archfit's own failure are "allowed" unchanged, so nothing archfit does
can stop an object (docs/architecture.md, "The admission skeleton").
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import structlog
from aiohttp import web

from extender.errors import InputError
from extender.logs import bind_request
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.serving.client_problems import client_problem
from extender.serving.error_answers import ErrorAnswers
from extender.serving.request_body import read_body
from extender.wire.admission_api import AdmissionRequest, parse_review, render_allowed
from extender.wire.wire_json import JsonError

log = structlog.get_logger("archfit")


class Admission(NamedTuple):
    """What a policy answers for one review: always allowed, with a patch and warnings or not
    (a NamedTuple: one is made per review, at half a frozen dataclass's cost)."""

    outcome: str
    """How the review is counted (`AdmissionPolicy.count`): skipped, mutated, gated, ..."""
    patch: Sequence[Mapping[str, Any]] = ()
    """RFC 6902 operations on the object."""
    warnings: Sequence[str] = ()
    """What kubectl prints to whoever sent the object."""


SKIPPED = Admission("skipped")
"""Allowed unchanged: not the object the policy examines, or one it leaves alone."""
_FAILED = Admission("error")


class AdmissionPolicy(Protocol):
    """What one kind of admission supplies; `Admissions.serve` is the skeleton they share."""

    @property
    def verb(self) -> str:
        """The `verb` of the request's log lines (`mutate`)."""
        ...

    @property
    def unreadable(self) -> str:
        """The client problem an InputError of `decide` counts as (`admission_unreadable_pod`)."""
        ...

    @property
    def failed(self) -> str:
        """The log event of archfit's own failure (`admission_internal_error`)."""
        ...

    async def decide(self, review: AdmissionRequest, started: float) -> Admission:
        """Decide, explain and count what is the policy's own. Raises InputError when the
        object cannot be read (answered allowed, unchanged, and counted skipped)."""
        ...

    def count(self, outcome: str, seconds: float | None) -> None:
        """Count one review by outcome; `seconds` since it arrived, None when the body was
        not an AdmissionReview."""
        ...


class Admissions:
    """The handler of one admission path: `serve` is its aiohttp handler."""

    def __init__(
        self,
        policy: AdmissionPolicy,
        metrics: Metrics,
        warnings: OncePerCause,
        body_timeout_seconds: float,
    ) -> None:
        self.policy = policy
        self._metrics = metrics
        self._warnings = warnings
        self._body_timeout = body_timeout_seconds
        self._errors = ErrorAnswers(metrics, warnings, self._count_unread)

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """bind → read → decode → decide → count → render."""
        started = time.perf_counter()
        policy = self.policy
        bind_request(request.headers.get("X-Request-Id"), policy.verb)
        try:
            review = parse_review(await read_body(request, self._body_timeout))
        except Exception as error:
            # kube-apiserver never sends a body that is no AdmissionReview; failurePolicy
            # Ignore admits the object anyway.
            return await self._errors.answer(request, error)
        try:
            admission = await policy.decide(review, started)
        except InputError as error:
            # The API server's validation will answer the client; nothing to add here.
            self._problem(policy.unreadable, uid=review.uid, problem=str(error))
            admission = SKIPPED
        except Exception as error:
            # archfit's own failure must never stop an object: allow it unchanged, loudly.
            cause = f"{policy.failed}:{type(error).__name__}:{error}"
            if self._warnings.log_now(cause) is not None:
                log.exception(policy.failed, uid=review.uid)
            admission = _FAILED
        body = self._render(review.uid, admission)
        policy.count(admission.outcome, time.perf_counter() - started)
        return web.Response(body=body, content_type="application/json")

    def _count_unread(self, request: web.Request, failed: bool) -> None:
        """Count a review the error boundary answered: its body was no AdmissionReview."""
        self.policy.count(_FAILED.outcome if failed else "bad_request", None)

    def _render(self, uid: str, admission: Admission) -> bytes:
        try:
            return render_allowed(uid, admission.patch, admission.warnings)
        except JsonError as error:  # nested deeper than JSON allows, or text JSON cannot carry
            self._problem(self.policy.unreadable, uid=uid, problem=str(error))
            return render_allowed(uid)

    def _problem(self, cause: str, **fields: Any) -> None:
        client_problem(self._metrics, self._warnings, cause, **fields)
