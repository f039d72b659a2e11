"""Running kubelet image credential provider plugins, as kubelet does, and caching their answers.

Each plugin whose matchImages fit an image is executed from the plugin directory with the
request on stdin; its answer is cached by cacheKeyType and cacheDuration, with one run in
flight per (plugin, image). A run is bounded by a timeout (the whole process group is killed)
and an output cap. Its stdout, stderr and the credentials it returns never reach a log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import structlog

from extender.config.registry_settings import CredentialProviderSettings
from extender.errors import CredentialSourceError
from extender.metrics import Metrics
from extender.registry.plugin_protocol import (
    PluginAnswer,
    PluginAnswerError,
    PluginConfigError,
    Provider,
    cache_key,
    load_config,
    lookup_keys,
    parse_answer,
    request_body,
)
from extender.registry.pure.credentials import Credential
from extender.ttlmap import Clock, TTLMap

log = structlog.get_logger(__name__)
Entries = tuple[tuple[str, Credential], ...]
_MAX_CACHED = 4096
MAX_CONFIG_BYTES = 1_048_576
"""The largest configuration file archfit reads for credentials (a credential provider
config, a docker config.json)."""
_FAILURE_SECONDS = 10.0
"""A failed run is not repeated for this long, so a broken plugin is not run per request."""
_FAILED = "Failed"
_RUN = "Run"
"""Key types of the cache beside kubelet's Image, Registry and Global."""


_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What the cloud plugins need from archfit's own environment: workload identity (IRSA, EKS
# Pod Identity, GKE and Azure Workload Identity), the egress proxy and CA trust. Nothing
# else of archfit's environment (which may hold a Redis password) reaches a plugin.
_PASSED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "TMPDIR",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "NO_PROXY",
        "https_proxy",
        "http_proxy",
        "no_proxy",
        "GOOGLE_APPLICATION_CREDENTIALS",
    }
)
_PASSED_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "GCE_", "CLOUDSDK_")


class PluginFailed(CredentialSourceError):
    """One plugin run gave nothing usable; the message is safe to log."""


def plugin_environment(provider: Provider, environ: Mapping[str, str]) -> dict[str, str]:
    """The plugin's environment: the allowed part of ours, then the config's `env` on top."""
    env = {
        name: value
        for name, value in environ.items()
        if name in _PASSED_NAMES or name.startswith(_PASSED_PREFIXES)
    }
    env.setdefault("PATH", _DEFAULT_PATH)
    env.update(provider.env)  # kubelet lets the config override the system's values
    return env


def _kept_elsewhere(_entries: Entries) -> float:
    """The ttl of a run's own key: none, its answer is kept under its cacheKeyType's key."""
    return 0.0


class CredentialPlugins:
    """The configured plugins: credentials for an image, from the cache or a fresh run."""

    def __init__(
        self,
        providers: list[Provider],
        bin_dir: Path,
        settings: CredentialProviderSettings,
        *,
        clock: Clock = time.monotonic,
        environ: Mapping[str, str] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.providers = tuple(providers)
        self._metrics = metrics
        self._bin_dir = bin_dir
        self._settings = settings
        self._environ = dict(os.environ if environ is None else environ)
        self._cache: TTLMap[tuple[str, str, str], Entries] = TTLMap(_MAX_CACHED, clock)
        """(plugin, cacheKeyType, key) -> its answer; ("Failed", image) marks a failed run."""

    @classmethod
    def from_settings(
        cls,
        settings: CredentialProviderSettings,
        *,
        clock: Clock = time.monotonic,
        environ: Mapping[str, str] | None = None,
        metrics: Metrics | None = None,
    ) -> CredentialPlugins | None:
        """The plugins of `settings.configPath`, or None when none is set.

        Raises ValueError naming the setting when the file or a plugin binary is unusable,
        as kubelet refuses to start then.
        """
        if not settings.config_path:
            return None
        path = Path(settings.config_path)
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_CONFIG_BYTES + 1)
        except OSError as error:
            raise ValueError(
                f"registry.credentialProviders.configPath: cannot read {path}: {error.strerror}"
            ) from None
        if len(raw) > MAX_CONFIG_BYTES:
            raise ValueError(f"registry.credentialProviders.configPath: {path} is too large")
        try:
            providers = load_config(raw, str(path))
        except PluginConfigError as error:
            raise ValueError(f"registry.credentialProviders.configPath: {error}") from None
        bin_dir = Path(settings.bin_dir)
        for provider in providers:
            binary = bin_dir / provider.name
            if not (binary.is_file() and os.access(binary, os.X_OK)):
                raise ValueError(
                    f"registry.credentialProviders.binDir: {binary} is not an executable file"
                )
        return cls(providers, bin_dir, settings, clock=clock, environ=environ, metrics=metrics)

    def matching(self, image: str) -> list[Provider]:
        """The plugins whose matchImages cover `image` (`domain/path`)."""
        return [p for p in self.providers if p.matches(image)]

    async def entries(self, image: str) -> tuple[Entries, list[str]]:
        """(key, credential) pairs for `image` from every matching plugin, in config order.

        Also returns the names of matching plugins that failed. Never raises for a plugin's
        fault: kubelet goes on without its credentials, and so do we.
        """
        found: list[tuple[str, Credential]] = []
        failed: list[str] = []
        for provider in self.matching(image):
            cached = self._cached(provider, image)
            if cached is None:
                # The answer is kept under the key its cacheKeyType names, which other images
                # may share; the run's own key keeps nothing and only lets callers share a run.
                run = partial(self._refresh, provider, image)
                try:
                    cached = await self._cache.get_or_load(
                        (provider.name, _RUN, image), run, _kept_elsewhere
                    )
                except PluginFailed:
                    cached = ()
            if not cached and self._failed_recently(provider, image):
                failed.append(provider.name)
            found.extend(cached)
        return tuple(found), failed

    def _cached(self, provider: Provider, image: str) -> Entries | None:
        for key_type, key in lookup_keys(image):
            entries = self._cache.get((provider.name, key_type, key))
            if entries is not None:
                return entries
        return self._cache.get((provider.name, _FAILED, image))

    def _failed_recently(self, provider: Provider, image: str) -> bool:
        return self._cache.get((provider.name, _FAILED, image)) is not None

    async def _refresh(self, provider: Provider, image: str) -> Entries:
        try:
            answer = await self._run(provider, image)
        except PluginFailed as error:
            log.warning(
                "credential_provider_failed", provider=provider.name, image=image, error=str(error)
            )
            self._cache.put((provider.name, _FAILED, image), (), _FAILURE_SECONDS)
            self._count(provider, "failed")
            raise
        self._count(provider, "ok")
        seconds = answer.cache_seconds
        if seconds is None:
            seconds = provider.default_cache_seconds
        if seconds > 0:  # a zero duration means: do not cache this answer (kubelet)
            key_type, key = cache_key(answer.cache_key_type, image)
            self._cache.put((provider.name, key_type, key), answer.auth, seconds)
        log.info(
            "credential_provider_answered",
            provider=provider.name,
            image=image,
            cache_key_type=answer.cache_key_type,
            cache_seconds=seconds,
            keys=len(answer.auth),
        )
        return answer.auth

    def _count(self, provider: Provider, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.credential_provider_runs.labels(provider.name, outcome).inc()

    async def _run(self, provider: Provider, image: str) -> PluginAnswer:
        binary = self._bin_dir / provider.name
        cap = self._settings.max_output_bytes
        # stdout is a pipe of our own, not asyncio's: a child that escapes the process group
        # (setsid) and keeps its end open can then neither hold our end nor delay the exit.
        read_end, write_end = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                binary,
                *provider.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=write_end,
                stderr=asyncio.subprocess.DEVNULL,  # never read, never logged
                env=plugin_environment(provider, self._environ),
                cwd=self._bin_dir,
                start_new_session=True,  # its own process group, so a kill takes its children
            )
        except (OSError, ValueError) as error:  # ValueError: a NUL in an argument
            os.close(read_end)
            raise PluginFailed(f"cannot start {binary}: {_why(error)}") from None
        finally:
            os.close(write_end)
        inode = os.fstat(read_end).st_ino
        stdout, transport = await _reader(read_end)
        output = bytearray()
        try:
            async with asyncio.timeout(self._settings.timeout_seconds):
                code = await _communicate(
                    process, request_body(provider, image), stdout, output, cap
                )
        except TimeoutError:
            raise PluginFailed(
                f"no answer within {self._settings.timeout_seconds:g}s; killed"
            ) from None
        finally:
            await _kill_group(process)
            if not transport.is_closing():  # no EOF: someone else still holds the pipe
                _kill_holders(inode)
            transport.close()
        if code != 0:
            raise PluginFailed(f"exited with status {code}")
        try:
            return parse_answer(bytes(output), provider)
        except PluginAnswerError as error:
            raise PluginFailed(str(error)) from None

    async def aclose(self) -> None:
        """Stop runs still going (their process groups are killed)."""
        await self._cache.aclose()


_REAP_SECONDS = 5.0
"""Longest wait for a killed plugin's exit to be reaped."""
_AFTER_EXIT_SECONDS = 0.2
"""How long output may still arrive once the plugin has exited: what it wrote before exiting
is in the pipe already; a child of it that keeps the pipe open does not delay the answer."""


def _why(error: OSError | ValueError) -> str:
    return error.strerror or str(error) if isinstance(error, OSError) else str(error)


async def _reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader, transport


def _kill_holders(inode: int) -> None:
    """Kill every other process that still holds the plugin's stdout: a child that left the
    plugin's process group (setsid), which the group kill missed. Only ours can be seen
    and killed (archfit's own PID namespace in a pod)."""
    target = f"pipe:[{inode}]"
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        with contextlib.suppress(OSError):
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(_link(f"/proc/{entry}/fd/{fd}") == target for fd in fds):
                os.kill(int(entry), signal.SIGKILL)


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


async def _communicate(
    process: asyncio.subprocess.Process,
    request: bytes,
    stdout: asyncio.StreamReader,
    output: bytearray,
    cap: int,
) -> int:
    """Write the request, collect stdout into `output` (at most `cap` bytes) until the
    plugin has exited and its output is read, and return its exit status."""

    async def feed() -> None:
        assert process.stdin is not None
        with contextlib.suppress(ConnectionError):  # a plugin may exit without reading
            process.stdin.write(request)
            await process.stdin.drain()
            process.stdin.close()

    async def collect() -> None:
        while chunk := await stdout.read(65_536):
            output.extend(chunk)
            if len(output) > cap:
                raise PluginFailed(f"answer larger than {cap} bytes")

    reading = asyncio.create_task(collect())
    try:
        await feed()
        exited = asyncio.create_task(process.wait())
        await asyncio.wait({reading, exited}, return_when=asyncio.FIRST_COMPLETED)
        if reading.done():
            reading.result()  # raises PluginFailed past the cap
        code = await exited
        if not reading.done():
            await asyncio.wait({reading}, timeout=_AFTER_EXIT_SECONDS)
        if reading.done():
            reading.result()
        return code
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill what is left of the plugin's process group, and reap the plugin."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    # stdin is asyncio's only pipe to the plugin, closed once the request is written (or
    # the plugin is gone): wait() needs no pipe drained. Bounded all the same.
    if process.stdin is not None:
        process.stdin.close()
    with contextlib.suppress(TimeoutError, ProcessLookupError):
        async with asyncio.timeout(_REAP_SECONDS):
            await process.wait()
