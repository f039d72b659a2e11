"""`archfit serve`: the service, in the foreground or detached, with its pid and log files.

A second `archfit serve` must never disturb the first: the pid file is refused while the
process it names runs, and both listeners' addresses are checked before any file is written,
so a serve that cannot start leaves the running one's pid and log files as they were.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from extender.cli.flags import add_cluster_flags
from extender.config import loading
from extender.config import settings as config
from extender.errors import ListenError
from extender.serving.addresses import check_listeners

_READY = b"listening\n"
"""What a detached serve tells the command that started it once it listens."""
_LOG_TAIL = 20
"""Lines of a detached serve's log shown when it stops before listening."""


def add_serve(commands: Any, common: argparse.ArgumentParser) -> None:
    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="run the service: the scheduler extender, and the webhook when enabled",
        description="Run archfit: the scheduler extender on server.port, the admission webhook "
        "on webhook.port when webhook.enabled, and the controllers the settings ask for. "
        "It runs until SIGTERM or SIGINT, then drains.",
    )
    serve.add_argument(
        "--controllers",
        action="store_true",
        help="from a kubeconfig the settings do not name ($KUBECONFIG, ~/.kube/config, "
        "--kubeconfig), also run the controllers that write to the cluster: the mismatch "
        "watcher (its Lease, Events; evictions with watcher.remediate). In a pod, or with "
        "kubernetes.kubeconfig set, they run as the settings say",
    )
    serve.add_argument(
        "--detach",
        action="store_true",
        help="run in the background: return once it listens (exit status 0), or with the "
        "reason it stopped; give --log-file for its log",
    )
    serve.add_argument(
        "--pid-file",
        metavar="PATH",
        type=Path,
        help="write the process id here once the addresses are free, and remove it on exit; "
        "refused while the process it names runs",
    )
    serve.add_argument(
        "--log-file",
        metavar="PATH",
        type=Path,
        help="write the log here (replaced at each start, once the addresses are free) "
        "instead of to stdout",
    )
    add_cluster_flags(serve)
    serve.set_defaults(run=run_serve)


def run_serve(settings: config.Settings, args: argparse.Namespace) -> int:
    """`archfit serve` with `settings`, kubectl's connection flags already applied."""
    borrowed = _borrowed_kubeconfig(settings, args)
    settings, withheld = _local_controllers(settings, borrowed and not args.controllers)
    running = _running_pid(args.pid_file)
    if running is not None:
        print(
            f"archfit serve: {args.pid_file} names process {running}, which is running (an "
            f"archfit serve started before?): stop it first (kill {running}), or give another "
            "--pid-file",
            file=sys.stderr,
        )
        return 1
    if args.detach and args.log_file is None:
        print("archfit serve: --detach needs --log-file (where its log goes)", file=sys.stderr)
        return 2
    try:
        check_listeners(settings)
    except ListenError as error:
        print(f"archfit: {error}", file=sys.stderr)
        return 1
    source = loading.source(args.config)
    if not args.detach:
        with _process_files(args.pid_file, args.log_file):
            return _serve(settings, source, withheld)
    return _detached(args, lambda listening: _serve(settings, source, withheld, listening))


def _running_pid(pid_file: Path | None) -> int | None:
    """The process `pid_file` names if it still runs; None without a file or process."""
    if pid_file is None:
        return None
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # another user's process: running all the same
        return pid
    return pid if pid != os.getpid() else None


@contextlib.contextmanager
def _process_files(pid_file: Path | None, log_file: Path | None) -> Iterator[None]:
    """This process's id in `pid_file` and its stdout and stderr in `log_file` (each when
    given) while the block runs; the pid file is removed after, if it still names this
    process."""
    if log_file is not None:
        log = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    pid = str(os.getpid())
    if pid_file is not None:
        pid_file.write_text(pid + "\n")
    try:
        yield
    finally:
        if pid_file is not None:
            with contextlib.suppress(OSError):
                if pid_file.read_text().strip() == pid:
                    pid_file.unlink()


def _detached(args: argparse.Namespace, serve: Callable[[Callable[[], None]], int]) -> int:
    """Fork: the child serves in a session of its own, writing its pid and log files; this
    process waits until the child listens (exit status 0) or stops (its status, and the end
    of its log). Called before anything starts a thread or an event loop."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)

        def listening() -> None:
            os.write(write_end, _READY)
            os.close(write_end)

        status = 1
        try:
            with _process_files(args.pid_file, args.log_file):
                status = serve(listening)
        except BaseException:  # in the log: this process has no terminal left to say it on
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)  # never the starting command's cleanup or exit handlers
    os.close(write_end)
    with os.fdopen(read_end, "rb") as told:
        said = told.read(len(_READY))
    stopped = os.waitpid(child, os.WNOHANG if said == _READY else 0)
    if said == _READY and stopped == (0, 0):
        files = f"log {args.log_file}" + (f", pid file {args.pid_file}" if args.pid_file else "")
        print(f"archfit serve: listening, process {child} ({files})", file=sys.stderr)
        return 0
    status = os.waitstatus_to_exitcode(stopped[1]) if stopped[0] else 1
    print(
        f"archfit serve: stopped before it listened (exit status {status}); the end of "
        f"{args.log_file}:",
        file=sys.stderr,
    )
    with contextlib.suppress(OSError):
        lines = args.log_file.read_text(errors="replace").splitlines()
        print("\n".join(lines[-_LOG_TAIL:]), file=sys.stderr)
    return status or 1


def _borrowed_kubeconfig(settings: config.Settings, args: argparse.Namespace) -> bool:
    """Whether `serve` reaches a cluster through a kubeconfig the settings did not name: one
    found on the machine ($KUBECONFIG, ~/.kube/config, under kubernetes.mode auto) or given
    with --kubeconfig/--context. That is someone trying archfit from a laptop; settings that
    name a kubeconfig (kubernetes.mode kubeconfig, kubernetes.kubeconfig) are a deployment
    outside the cluster, such as one beside a kubeadm control plane."""
    from extender.kube.connect import resolved_mode

    if args.kubeconfig is not None or args.context is not None:
        return True
    kube = settings.kubernetes
    return kube.mode == "auto" and not kube.kubeconfig and resolved_mode(kube) == "kubeconfig"


def _local_controllers(settings: config.Settings, withhold: bool) -> tuple[config.Settings, str]:
    """The settings without the controllers that write to the cluster when `withhold` (a
    borrowed kubeconfig without --controllers), and what was withheld, for the start-up
    line. Someone trying archfit against a real cluster must not become its watcher (a
    Lease, Events, evictions with watcher.remediate) by accident. The webhook's writers run
    only when webhook.enabled asks for them anyway."""
    if not withhold or not (settings.watcher.enabled or settings.capacity.enabled):
        return settings, ""
    watcher = dataclasses.replace(settings.watcher, enabled=False)
    capacity = dataclasses.replace(settings.capacity, enabled=False)
    return dataclasses.replace(settings, watcher=watcher, capacity=capacity), (
        "watcher, capacity: from a kubeconfig the settings do not name, they would take "
        "their Leases and write Events; `archfit serve --controllers` runs them"
    )


def _serve(
    settings: config.Settings,
    source: Path | None,
    withheld: str = "",
    on_listening: Callable[[], None] | None = None,
) -> int:
    _import_structlog_without_rich()
    from extender.registry.system_cas import import_aiohttp

    import_aiohttp()  # before anything else imports it: the CA store is read once ready
    from extender.errors import SetupError
    from extender.server import serve

    try:
        serve(settings, source, withheld=withheld, on_listening=on_listening)
    except SetupError as error:  # the settings cannot work: the message names the setting
        print(f"archfit: {error.summary}: {error}", file=sys.stderr)
        return 2
    except ListenError as error:  # the webhook's port, taken since the check
        print(f"archfit: {error}", file=sys.stderr)
        return 1
    return 0


def _import_structlog_without_rich() -> None:
    """Import structlog with `rich` hidden, before anything else imports either.

    structlog.dev imports rich (with pygments and attrs: ~60 modules, about a tenth of
    start-up) as it loads, in case its ConsoleRenderer pretty-prints a traceback. `serve`
    never draws a table, and in production it logs JSON; without rich, the console renderer
    prints plain tracebacks. rich stays importable for whatever asks for it later.
    """
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]
