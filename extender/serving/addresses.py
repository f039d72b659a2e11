"""Whether archfit's listeners can open their addresses, and the error that says how to fix
it: checked before `archfit serve` starts or writes anything, and again as each listener opens.

No aiohttp here: `archfit serve` checks its addresses before it imports the server.
"""

from __future__ import annotations

import errno
import os
import socket

from extender.config.loading import env_variable
from extender.config.settings import Settings
from extender.errors import ListenError

EXTENDER = "server"
WEBHOOK = "webhook"
"""The settings sections whose `host` and `port` a listener opens."""


def check_listeners(settings: Settings) -> None:
    """Raise ListenError if the extender's address, or the webhook's when it is enabled,
    cannot be listened on (taken, or not this machine's)."""
    for section in [EXTENDER] + [WEBHOOK] * settings.webhook.enabled:
        listener = getattr(settings, section)
        family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a listener binds
            try:
                probe.bind((listener.host, listener.port))
            except OSError as error:
                raise listen_error(settings, section, error) from error


def listen_error(settings: Settings, section: str, error: OSError) -> ListenError:
    """The address, the errno's own text (asyncio's message repeats the address) and the
    setting that moves the listener, with its env variable."""
    listener = getattr(settings, section)
    reason = os.strerror(error.errno) if error.errno else str(error)
    if error.errno == errno.EADDRINUSE:
        key, fix = f"{section}.port", "another process listens there: stop it, or set"
    else:
        key, fix = f"{section}.host", "set an address of this machine in"
    return ListenError(
        f"cannot listen on {listener.host}:{listener.port}: {reason}; {fix} {key} "
        f"({env_variable(key)})"
    )
