"""Optional features and the extras that provide them, checked before anything starts.

A setting that needs a library the install lacks is a clear exit 2 naming the extra,
never a traceback from deep inside start-up (a crash-looping pod says nothing useful).
"""

from __future__ import annotations

import importlib

from extender.config.settings import Settings


def missing(settings: Settings) -> list[str]:
    """One message per setting whose library is not installed."""
    problems = []
    if settings.cache.is_redis and not (_importable("redis") and _importable("aiocache")):
        problems.append(
            "cache.url is a Redis URL, but the redis and aiocache libraries are not installed: "
            "pip install 'archfit[redis]' (the archfit image includes it)"
        )
    return problems


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
