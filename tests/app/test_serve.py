"""`archfit serve` as a process: it starts from config, answers, and drains on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import orjson
import pytest

from tests.objects import args_names, pod
from tests.support.archfit_process import wait_listening
from tests.support.process import free_port, silent_listener


def start_serve(
    tmp_path, config: str, port: int, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`archfit serve` on `config` (YAML) in a child process, once it listens on `port`."""
    path = tmp_path / "archfit.yaml"
    path.write_text(config)
    process = subprocess.Popen(
        [sys.executable, "-m", "extender", "serve", "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        wait_listening(port, process)
    except BaseException:
        process.kill()
        process.communicate(timeout=15)
        raise
    return process


def test_sigterm_lets_an_in_flight_request_finish_before_exiting(tmp_path):
    """A request still waiting at SIGTERM gets its full answer, and the exit status is 0.

    The request waits because the API server (a socket that never answers) has
    not listed Nodes yet: the handler waits out its deadline, then fails open.
    """
    silent = silent_listener()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{silent.getsockname()[1]}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    port = free_port()
    process = start_serve(
        tmp_path,
        f"server: {{host: 127.0.0.1, port: {port}, shutdownGraceSeconds: 10}}\n"
        f"kubernetes: {{mode: kubeconfig, kubeconfig: '{kubeconfig}'}}\n"
        "policy: {resolveDeadlineSeconds: 2}\nlogging: {format: json}\n",
        port,
    )
    try:
        body = orjson.dumps(args_names(pod("acme/amd:1"), "n1", "n2"))
        request = (
            f"POST /scheduler/filter HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with socket.create_connection(("127.0.0.1", port), timeout=15) as conn:
            started = time.monotonic()
            conn.sendall(request)
            time.sleep(0.3)  # the handler is now waiting for the node index
            process.send_signal(signal.SIGTERM)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
            waited = time.monotonic() - started
        status_line, _, rest = answer.partition(b"\r\n")
        result = orjson.loads(rest.split(b"\r\n\r\n", 1)[1])
        assert (b"HTTP/1.1 200 OK", ["n1", "n2"]) == (status_line, result["NodeNames"])
        assert waited >= 1.5, "the answer came before the handler's wait was over"
        assert 0 == process.wait(timeout=15)
    finally:
        silent.close()
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _run(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """`archfit ARGS` in a fresh interpreter; `prelude` runs first (to hide a library)."""
    code = (
        f"import sys\n{prelude}\nfrom extender.cli.main import main\nsys.exit(main({list(args)!r}))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_archfit_version_prints_the_installed_version():
    """`archfit --version` is an answer, not a usage error."""
    from extender import __version__

    done = _run("--version")
    assert (0, f"archfit {__version__}\n") == (done.returncode, done.stdout)


HIDE_REDIS = "sys.modules['redis'] = None  # as if `pip install .` left the extra out"


def test_a_redis_cache_without_the_redis_extra_is_a_clear_exit_2_not_a_traceback(tmp_path):
    """serve and config both refuse it, naming the setting and the extra to install."""
    path = tmp_path / "archfit.yaml"
    path.write_text("cache: {url: 'redis://127.0.0.1:1/0'}\nkubernetes: {mode: 'off'}\n")
    for command in ("serve", "config"):
        done = _run(command, "--config", str(path), prelude=HIDE_REDIS)
        assert 2 == done.returncode, command
        assert "cache.url is a Redis URL" in done.stderr
        assert "pip install 'archfit[redis]'" in done.stderr
        assert "Traceback" not in done.stderr


def test_serve_says_at_start_what_it_runs_where_and_from_which_config(tmp_path):
    """One archfit_starting line: version, config path, listen address, webhook, mode."""
    from extender import __version__

    port = free_port()
    config = f"server: {{host: 127.0.0.1, port: {port}}}\nkubernetes: {{mode: 'off'}}\n"
    process = start_serve(tmp_path, config + "logging: {format: json}\n", port)
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=15)
    path = tmp_path / "archfit.yaml"
    first = orjson.loads(out.splitlines()[0])
    assert {
        "event": "archfit_starting",
        "version": __version__,
        "config": str(path.resolve()),
        "listen": f"http://127.0.0.1:{port}",
        "webhook": None,
        "mode": "enforce",
    } == {k: first[k] for k in ("event", "version", "config", "listen", "webhook", "mode")}


def test_serve_speaks_https_with_the_configured_certificate(tmp_path):
    """server.certFile/keyFile: the verbs answer over TLS, verified against the CA."""
    import ssl
    import urllib.request

    from tests.support.tls import make_serving_cert

    cert = make_serving_cert(tmp_path / "tls")
    port = free_port()
    process = start_serve(
        tmp_path,
        f"server: {{host: 127.0.0.1, port: {port}, certFile: '{cert.cert}',"
        f" keyFile: '{cert.key}'}}\nkubernetes: {{mode: 'off'}}\nlogging: {{format: json}}\n",
        port,
    )
    try:
        context = ssl.create_default_context(cafile=str(cert.ca_bundle))
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context) as answer:
            assert 200 == answer.status
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=15)


def test_an_unreadable_server_certificate_is_exit_2_naming_the_setting(tmp_path):
    """A certFile that does not exist stops serve before it binds, with the key's name."""
    path = tmp_path / "archfit.yaml"
    path.write_text(
        "server: {certFile: /nonexistent/tls.crt, keyFile: /nonexistent/tls.key}\n"
        "kubernetes: {mode: 'off'}\n"
    )
    done = _run("serve", "--config", str(path))
    assert 2 == done.returncode
    assert "server.certFile/keyFile: cannot load /nonexistent/tls.crt" in done.stderr


def test_a_taken_port_is_one_line_and_no_services_start_first(tmp_path):
    """Nothing logged before the bind error, which names the setting that moves the port: the
    port is checked before anything starts."""
    port, done = _serve_on_a_taken_port(
        tmp_path,
        lambda port: (
            f"server: {{host: 127.0.0.1, port: {port}}}\nkubernetes: {{mode: 'off'}}\n"
            "logging: {format: json}\n"
        ),
    )
    events = [orjson.loads(line)["event"] for line in done.stdout.splitlines()]
    expected = (
        f"archfit: cannot listen on 127.0.0.1:{port}: Address already in use; another process "
        "listens there: stop it, or set server.port (ARCHFIT_SERVER__PORT)\n"
    )
    assert (1, [], expected) == (done.returncode, events, done.stderr)


@pytest.mark.parametrize("listener", ["server", "webhook"])
def test_a_taken_port_on_either_listener_is_one_line_on_stderr_and_exit_1(tmp_path, listener):
    """The webhook's listener fails as the extender's does: one line naming its setting, exit 1."""
    from tests.support.tls import make_serving_cert

    cert = make_serving_cert(tmp_path / "tls")
    free = {"server": free_port(), "webhook": free_port()}

    def config(taken: int) -> str:
        ports = {**free, listener: taken}
        return (
            f"server: {{host: 127.0.0.1, port: {ports['server']}}}\n"
            f"webhook: {{enabled: true, host: 127.0.0.1, port: {ports['webhook']},"
            f" certFile: '{cert.cert}', keyFile: '{cert.key}'}}\n"
            "kubernetes: {mode: 'off'}\nlogging: {format: json}\n"
        )

    port, done = _serve_on_a_taken_port(tmp_path, config)
    expected = [
        f"archfit: cannot listen on 127.0.0.1:{port}: Address already in use; another process "
        f"listens there: stop it, or set {listener}.port (ARCHFIT_{listener.upper()}__PORT)"
    ]
    assert (1, expected) == (done.returncode, done.stderr.splitlines())


def _serve_on_a_taken_port(
    tmp_path, config: Callable[[int], str]
) -> tuple[int, subprocess.CompletedProcess[str]]:
    """`archfit serve` on `config(port)`, while a real socket holds `port`."""
    taken = silent_listener()
    port = taken.getsockname()[1]
    path = tmp_path / "archfit.yaml"
    path.write_text(config(port))
    try:
        return port, _run("serve", "--config", str(path))
    finally:
        taken.close()


def test_a_crash_in_a_c_extension_leaves_every_threads_stack_on_stderr(tmp_path):
    """A segfault (in the TLS library or the event loop, say) is not only exit status -11 in
    the pod's history: the container's log shows where each thread was."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    process = start_serve(
        tmp_path,
        f"server: {{host: 127.0.0.1, port: {port}}}\nkubernetes: {{mode: 'off'}}\n",
        port,
        env,
    )
    process.send_signal(signal.SIGSEGV)
    _, err = process.communicate(timeout=30)
    text = err.decode()
    assert (-signal.SIGSEGV, True, True) == (
        process.returncode,
        "Fatal Python error: Segmentation fault" in text,
        "extender/server.py" in text,
    ), text[-2000:]


def test_sigterm_is_logged_when_it_arrives_and_when_the_process_is_done(tmp_path):
    """`archfit_stopping` names the signal and the grace; `archfit_stopped` is the last line."""
    port = free_port()
    process = start_serve(
        tmp_path,
        f"server: {{host: 127.0.0.1, port: {port}, shutdownGraceSeconds: 3}}\n"
        "kubernetes: {mode: 'off'}\nlogging: {format: json}\n",
        port,
    )
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    lines = [orjson.loads(line) for line in out.splitlines()]
    stopping = next(line for line in lines if line["event"] == "archfit_stopping")
    assert (0, "SIGTERM", 3.0, "archfit_stopped") == (
        process.returncode,
        stopping["signal"],
        stopping["grace_s"],
        lines[-1]["event"],
    )


def test_a_client_ca_makes_the_listener_require_a_certificate_it_signed(tmp_path):
    """server.clientCaFile: a client with a certificate from that CA is served; one with no
    certificate, or one from another CA, fails the handshake."""
    import ssl
    import urllib.error
    import urllib.request

    from tests.support.tls import make_client_cert, make_serving_cert

    cert = make_serving_cert(tmp_path / "tls")
    scheduler = make_client_cert(tmp_path / "scheduler")
    stranger = make_client_cert(tmp_path / "stranger")
    port = free_port()
    process = start_serve(
        tmp_path,
        f"server: {{host: 127.0.0.1, port: {port}, certFile: '{cert.cert}',"
        f" keyFile: '{cert.key}', clientCaFile: '{scheduler.ca_bundle}'}}\n"
        "kubernetes: {mode: 'off'}\nlogging: {format: json}\n",
        port,
    )

    def healthz(client: object) -> object:
        context = ssl.create_default_context(cafile=str(cert.ca_bundle))
        if client is not None:
            context.load_cert_chain(client.cert, client.key)
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/healthz", context=context, timeout=10
            ) as answer:
                return answer.status
        except (urllib.error.URLError, ssl.SSLError, ConnectionError):
            # TLS 1.3 sends the server's verdict after the client's handshake is done: an
            # alert or a closed connection on the first read, never an HTTP answer.
            return "refused"

    try:
        assert [200, "refused", "refused"] == [healthz(c) for c in (scheduler, None, stranger)]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=15)


def test_a_client_ca_without_https_is_refused_naming_the_setting(tmp_path):
    """clientCaFile asks for client certificates, which plain HTTP cannot."""
    path = tmp_path / "archfit.yaml"
    path.write_text("server: {clientCaFile: /etc/ca.pem}\nkubernetes: {mode: 'off'}\n")
    done = _run("serve", "--config", str(path))
    assert (2, True) == (done.returncode, "server.clientCaFile: needs certFile" in done.stderr)


def _detached(tmp_path, config: str, pid_file: str, log_file: str):
    """`archfit serve --detach` in `tmp_path` on `config` (YAML)."""
    path = tmp_path / "archfit.yaml"
    path.write_text(config)
    return _run(
        "serve", "--config", str(path), "--detach",
        "--pid-file", str(tmp_path / pid_file), "--log-file", str(tmp_path / log_file),
    )  # fmt: skip


def _stop(pid_file) -> None:
    """SIGTERM the process `pid_file` names, and wait until it is gone."""
    pid = int(pid_file.read_text())
    os.kill(pid, signal.SIGTERM)
    for _ in range(600):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def test_a_second_serve_leaves_the_first_ones_process_pid_and_log_alone(tmp_path):
    """Run twice: the second refuses the pid file of a running serve, or (another pid file)
    the taken port, naming server.port; the first keeps its files and answers; its pid file
    goes when it stops."""
    port = free_port()
    config = f"server: {{host: 127.0.0.1, port: {port}}}\nkubernetes: {{mode: 'off'}}\n"
    first = _detached(tmp_path, config, "archfit.pid", "archfit.log")
    pid_file, log_file = tmp_path / "archfit.pid", tmp_path / "archfit.log"
    try:
        before = (pid_file.read_text(), log_file.read_text())
        again = _detached(tmp_path, config, "archfit.pid", "archfit.log")
        elsewhere = _detached(tmp_path, config, "other.pid", "other.log")
        after = (pid_file.read_text(), log_file.read_text())
        socket.create_connection(("127.0.0.1", port), timeout=10).close()  # still answers
    finally:
        if pid_file.exists():
            _stop(pid_file)
    pid = before[0].strip()
    assert (0, "archfit serve: listening") == (first.returncode, first.stderr[:24])
    assert (1, f"archfit serve: {pid_file} names process {pid}, which is running") == (
        again.returncode,
        again.stderr.split(" (")[0],
    )
    assert (1, True) == (
        elsewhere.returncode,
        "set server.port (ARCHFIT_SERVER__PORT)" in elsewhere.stderr,
    )
    assert (before, [], False) == (after, sorted(tmp_path.glob("other.*")), pid_file.exists())


def test_a_detached_serve_that_cannot_start_says_why_and_leaves_no_pid_file(tmp_path):
    """A certificate that cannot load: the reason from its log, its exit status, no pid file."""
    config = (
        f"server: {{host: 127.0.0.1, port: {free_port()}, certFile: /nonexistent/tls.crt,"
        " keyFile: /nonexistent/tls.key}\nkubernetes: {mode: 'off'}\n"
    )
    done = _detached(tmp_path, config, "archfit.pid", "archfit.log")
    assert (2, True, True, False) == (
        done.returncode,
        "archfit serve: stopped before it listened (exit status 2)" in done.stderr,
        "server.certFile/keyFile: cannot load /nonexistent/tls.crt" in done.stderr,
        (tmp_path / "archfit.pid").exists(),
    )
