"""Every AppKey of archfit's two Applications, the extender's and the webhook's, in one place.

The resources a process shares live under typed keys, not in module globals (aiohttp's "No
Singletons Please"); extender.server puts most of them there, in its `attach`. Two keys hold
objects of the layers above (the extender's verbs, the webhook's policy): their types are
named for the type checker only, so this module imports nothing of those layers at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from extender.config.settings import Settings
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.services import Services
from extender.serving.listener import ConnectionGuard
from extender.serving.tls import ReloadingCertificate

if TYPE_CHECKING:
    from extender.admission.pod_webhook import PodMutation
    from extender.scheduler.verbs import Verbs

SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
SERVICES = web.AppKey("services", Services)
WARNINGS = web.AppKey("warnings", OncePerCause)
GUARD = web.AppKey("connection_guard", ConnectionGuard)
SERVER_CERTIFICATE = web.AppKey("server_certificate", ReloadingCertificate)
WEBHOOK_CERTIFICATE = web.AppKey("webhook_certificate", ReloadingCertificate)

VERBS: web.AppKey[Verbs] = web.AppKey("verbs")
"""filter and prioritize, with the Policy built once at start (extender.scheduler.verbs)."""

WEBHOOK_GUARD = web.AppKey("webhook_connection_guard", ConnectionGuard)
"""The webhook listener's connection caps (extender.server opens the listener with it)."""
MUTATION: web.AppKey[PodMutation] = web.AppKey("webhook_mutation")
"""The webhook's policy: its rules and whether it holds pods (the releaser needs both)."""
