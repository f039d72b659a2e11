"""archfit plus kube-scheduler as one unit that scenarios reconfigure.

Only one kube-scheduler may schedule default-scheduler pods at a time, so a single
Stack is shared by the session and restarted only when a scenario needs other settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.e2e.archfit import Archfit, merge
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.scheduler import Scheduler


class Stack:
    """The running archfit and kube-scheduler, started on demand."""

    def __init__(
        self,
        binaries: Binaries,
        control_plane: ControlPlane,
        workdir: Path,
        base_settings: Mapping[str, Any],
    ) -> None:
        self._binaries = binaries
        self._control_plane = control_plane
        self._workdir = workdir
        self._base = dict(base_settings)
        self._key: str | None = None
        self._generation = 0
        self.archfit: Archfit | None = None
        self.scheduler: Scheduler | None = None

    def ensure(
        self,
        settings: Mapping[str, Any] | None = None,
        node_cache_capable: bool = True,
        ca_file: Path | None = None,
        client: tuple[Path, Path] | None = None,
        probe_client: tuple[Path, Path] | None = None,
    ) -> Stack:
        """Make archfit run with base settings merged with `settings`, and a scheduler
        registered with nodeCacheCapable as given (trusting `ca_file` when archfit serves
        HTTPS, presenting the `client` certificate and key; archfit's readiness probe presents
        `probe_client`, else `client`); reuse what already runs like that."""
        effective = merge(self._base, settings or {})
        key = json.dumps(
            [
                effective,
                node_cache_capable,
                str(ca_file),
                [str(p) for p in client or ()],
                [str(p) for p in probe_client or ()],
            ],
            sort_keys=True,
        )
        if (
            key == self._key
            and self.archfit
            and self.archfit.process.running()
            and self.scheduler
            and self.scheduler.process.running()
        ):
            return self
        self.stop()
        self._generation += 1
        workdir = self._workdir / f"stack-{self._generation}"
        try:
            self.archfit = Archfit(workdir, effective, probe_client=probe_client or client).start()
            self.scheduler = Scheduler(
                self._binaries,
                workdir,
                self._control_plane.scheduler_kubeconfig,
                self.archfit.url_prefix,
                node_cache_capable=node_cache_capable,
                ca_file=ca_file,
                client=client,
            ).start()
        except BaseException:
            self.stop()
            raise
        self._key = key
        return self

    def stop_archfit(self) -> None:
        """Stop only archfit, leaving the scheduler calling an address nobody answers."""
        if self.archfit is not None:
            self.archfit.stop()
        # The next ensure() must start a fresh archfit.
        self._key = None

    def logs(self) -> str:
        """Where to look when a scenario fails."""
        parts = [p.process.log_path for p in (self.archfit, self.scheduler) if p is not None]
        return ", ".join(str(p) for p in parts)

    def stop(self) -> None:
        """Stop the scheduler first (so it stops calling archfit), then archfit."""
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.archfit is not None:
            self.archfit.stop()
        self.scheduler = self.archfit = None
        self._key = None
