"""Every AppKey of archfit's two Applications, the extender's and the webhook's, in one place.

The resources a process shares live under typed keys, not in module globals (aiohttp's "No
Singletons Please"); extender.server puts most of them there, in its `attach`. One key holds
an object of a layer above (the extender's verbs): its type is named for the type checker
only, so this module imports nothing of that layer at run time, and no import cycle results
(verbs imports no key).
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
WEBHOOK_HOLDS = web.AppKey("webhook_holds", bool)
"""Whether the webhook holds pods whose images are unknown (then the server starts the
releaser, extender.controllers.releaser)."""
