"""The admission webhooks archfit is compared with, run beside it (bench/webhook_latency --peer).

No peer's source is kept here: an operator brings a checkout and builds it with
bench/build-peers.sh, which prints `NAME=BINARY` lines for `--peer`. How a peer is started
(its flags, environment, certificate layout and kubeconfig) is a `Recipe`: the ones below for
adevinta/noe and arturhoo/k8smultiarcher, read from their own configuration (noe's
cmd/noe/main.go flags; k8smultiarcher's environment, its README's table). Any other webhook
is described on the command line: `--peer NAME=BINARY` with `--peer-arg NAME=ARG` (repeated)
and `--peer-env NAME=KEY=VALUE`, whose values may name `{port}`, `{cert}`, `{key}`,
`{cert_dir}`, `{kubeconfig}`, `{ca}` (the registry's CA bundle), `{metrics_port}` and
`{probe_port}`; it must serve `POST /mutate` over TLS on `{port}`.

Each peer trusts the bench's TLS registry through SSL_CERT_FILE (Go reads it for its
system pool) and runs with a HOME of its own, so no docker config of the machine is read.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.processes import Process
from tests.support.process import free_port
from tests.support.tls import ServingCert, make_serving_cert

READY_SECONDS = 60.0


@dataclass(frozen=True)
class Recipe:
    """How to start one peer: its arguments and environment, with placeholders."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    fixed_port: int | None = None
    """A port the peer always serves its webhook on (noe: 8443), else `{port}` is free."""


RECIPES: dict[str, Recipe] = {
    # cmd/noe/main.go: the webhook server is controller-runtime's on :8443 with tls.crt and
    # tls.key from --cert-dir; the manager reads KUBECONFIG; its pod controller watches
    # every pod, as archfit's watcher does. Both architectures are schedulable.
    "noe": Recipe(
        args=(
            "--cert-dir={cert_dir}",
            "--metrics-addr=127.0.0.1:{metrics_port}",
            "--health-probe-addr=127.0.0.1:{probe_port}",
            "--cluster-schedulable-archs=amd64,arm64",
            "--preferred-arch=amd64",
        ),
        env={"KUBECONFIG": "{kubeconfig}"},
        fixed_port=8443,
    ),
    # k8smultiarcher.go: gin on HOST:PORT, TLS from CERT_PATH/KEY_PATH, in-memory cache.
    "k8smultiarcher": Recipe(
        env={
            "HOST": "127.0.0.1",
            "PORT": "{port}",
            "TLS_ENABLED": "true",
            "CERT_PATH": "{cert}",
            "KEY_PATH": "{key}",
            "GIN_MODE": "release",
        },
    ),
}


@dataclass(frozen=True)
class PeerSpec:
    """A peer named on the command line: its binary and how to start it."""

    name: str
    binary: Path
    recipe: Recipe


def parse_peers(
    peers: Sequence[str], args: Sequence[str] = (), env: Sequence[str] = ()
) -> list[PeerSpec]:
    """`--peer NAME=BINARY` (and `--peer-arg NAME=ARG`, `--peer-env NAME=KEY=VALUE`) read;
    a name with no recipe and no arguments is refused, as is a binary that is not there."""
    extra_args: dict[str, list[str]] = {}
    extra_env: dict[str, dict[str, str]] = {}
    for given in args:
        name, _, arg = given.partition("=")
        extra_args.setdefault(name, []).append(arg)
    for given in env:
        name, _, pair = given.partition("=")
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--peer-env {given!r}: not NAME=KEY=VALUE")
        extra_env.setdefault(name, {})[key] = value
    specs = []
    for given in peers:
        name, sep, binary = given.partition("=")
        if not sep or not name or not binary:
            raise ValueError(f"--peer {given!r}: not NAME=BINARY")
        path = Path(binary).resolve()
        # A directory passes X_OK too: a peer's source folder given for its binary.
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ValueError(f"--peer {name}: {path} is not an executable file")
        known = RECIPES.get(name)
        if known is None and name not in extra_args and name not in extra_env:
            raise ValueError(
                f"--peer {name}: no recipe for it ({', '.join(RECIPES)} have one); "
                "say how to start it with --peer-arg / --peer-env"
            )
        base = known or Recipe()
        recipe = Recipe(
            args=(*base.args, *extra_args.get(name, [])),
            env={**base.env, **extra_env.get(name, {})},
            fixed_port=base.fixed_port,
        )
        specs.append(PeerSpec(name, path, recipe))
    return specs


class Peer:
    """One peer webhook, started with its recipe, serving TLS with a certificate of ours."""

    def __init__(self, spec: PeerSpec, workdir: Path, kubeconfig: Path, registry_ca: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.spec = spec
        self.cert: ServingCert = make_serving_cert(workdir / "tls")
        # noe's --cert-dir wants tls.crt and tls.key by those names.
        cert_dir = workdir / "cert-dir"
        cert_dir.mkdir(exist_ok=True)
        (cert_dir / "tls.crt").write_bytes(self.cert.cert.read_bytes())
        (cert_dir / "tls.key").write_bytes(self.cert.key.read_bytes())
        self.port = spec.recipe.fixed_port or free_port()
        values = {
            "port": str(self.port),
            "cert": str(self.cert.cert),
            "key": str(self.cert.key),
            "cert_dir": str(cert_dir),
            "kubeconfig": str(kubeconfig),
            "ca": str(registry_ca),
            "metrics_port": str(free_port()),
            "probe_port": str(free_port()),
        }
        home = workdir / "home"
        home.mkdir(exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "SSL_CERT_FILE": str(registry_ca),
            **{key: value.format(**values) for key, value in spec.recipe.env.items()},
        }
        argv = [str(spec.binary), *(arg.format(**values) for arg in spec.recipe.args)]
        self.process = Process(f"peer-{spec.name}", argv, workdir, env)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mutate"

    def start(self) -> Peer:
        """Start it and wait until its webhook port completes a TLS handshake."""
        if self.spec.recipe.fixed_port is not None and port_taken(self.port):
            raise RuntimeError(
                f"peer {self.spec.name} serves on port {self.port}, which something else holds"
            )
        self.process.start()
        context = ssl.create_default_context(cafile=str(self.cert.ca_bundle))
        self.process.wait_ready(lambda: handshakes(self.port, context), timeout=READY_SECONDS)
        return self

    def stop(self) -> None:
        self.process.stop()


def port_taken(port: int) -> bool:
    """Whether something already listens on loopback `port`."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def handshakes(port: int, context: ssl.SSLContext) -> bool:
    """Whether a TLS handshake with loopback `port` completes."""
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=1) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1"),
        ):
            return True
    except OSError:
        time.sleep(0.05)
        return False
