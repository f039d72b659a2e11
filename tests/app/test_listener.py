"""`archfit serve` under attack on its own listener: real process, real sockets, bounded in time.

Every test runs on both loops archfit serves on (server.eventLoop): their TLS is not the same
code (extender.serving.listener.tls_by_loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from extender.config.settings import ServerSettings
from extender.event_loop import loop_factory
from extender.metrics import Metrics
from extender.once import OncePerCause
from extender.serving.listener import ConnectionGuard, GuardedSite
from tests.objects import args_full, args_names, node, pod
from tests.support.archfit_process import Archfit, is_closed, post, read_responses, running
from tests.support.process import free_port
from tests.support.tls import make_serving_cert
from tests.support.waiting import wait_for


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def serving_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """server.eventLoop of the archfit each test starts (its environment override)."""
    monkeypatch.setenv("ARCHFIT_SERVER__EVENT_LOOP", request.param)
    loop: str = request.param
    return loop


SKIPPED = orjson.dumps(
    args_full(pod("acme/amd:1", annotations={"archfit.io/skip": "true"}), node("n1"))
)
"""A good request that needs no registry: the pod opts out, so it is answered at once."""

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"


def test_a_request_behind_a_deeply_nested_one_on_the_same_connection_is_answered(tmp_path: Path):
    """Pipelined: a Node nested 300 deep, then a good request; both get answers, neither a 500."""
    deep = orjson.dumps(args_full(pod("acme/amd:1"), {**node("n1"), "x": "DEEP"}))
    deep = deep.replace(b'"DEEP"', b"[" * 300 + b"]" * 300)
    with running(tmp_path) as archfit, archfit.connect() as conn:
        conn.sendall(post("/scheduler/filter", deep) + post("/scheduler/filter", SKIPPED))
        answers = read_responses(conn, 2, seconds=10)
    assert [200, 200] == [status for status, _ in answers]


def test_connections_that_never_finish_their_headers_are_closed(tmp_path: Path):
    """Slowloris: 50 connections trickling headers are all closed after headerTimeoutSeconds."""
    with running(tmp_path, {"headerTimeoutSeconds": 1, "maxIdlePerClient": 100}) as archfit:
        conns = [archfit.connect() for _ in range(50)]
        try:
            for conn in conns:
                conn.sendall(b"POST /scheduler/filter HTTP/1.1\r\nHost: a\r\n")
            time.sleep(0.5)
            for conn in conns:
                conn.sendall(b"X-Slow: 1\r\n")  # still talking, never done
            closed = sum(is_closed(conn, seconds=3) for conn in conns)
        finally:
            for conn in conns:
                conn.close()
    assert 50 == closed


def test_a_body_that_trickles_in_gets_408_and_the_connection_closes(tmp_path: Path):
    """Headers in time, then 10 of 1,000 body bytes: 408 after bodyTimeoutSeconds, then EOF."""
    with running(tmp_path, {"bodyTimeoutSeconds": 1}) as archfit, archfit.connect() as conn:
        head = post("/scheduler/filter", b"x" * 1000)
        conn.sendall(head[: len(head) - 990])
        answers = read_responses(conn, 1, seconds=5)
        closed = is_closed(conn, seconds=3)
    assert ([408], True) == ([status for status, _ in answers], closed)


def test_a_connection_above_the_cap_closes_the_oldest_idle_one(tmp_path: Path):
    """maxConnections 5: a sixth connection is served, and the oldest idle one is closed."""
    with running(tmp_path, {"maxConnections": 5}) as archfit:
        time.sleep(0.3)  # the start-up probe's connection is gone
        first = [archfit.connect() for _ in range(5)]
        time.sleep(0.3)
        try:
            with archfit.connect() as sixth:
                sixth.sendall(HEALTHZ)
                served = [status for status, _ in read_responses(sixth, 1, seconds=5)]
            closed = [is_closed(conn, seconds=0.3) for conn in first]
        finally:
            for conn in first:
                conn.close()
    assert ([200], [True, False, False, False, False]) == (served, closed)


def test_connections_above_the_cap_are_closed_at_once_when_none_is_idle(tmp_path: Path):
    """maxConnections 2, both busy with a body still to come: a third is closed at once."""
    with running(tmp_path, {"maxConnections": 2, "bodyTimeoutSeconds": 5}) as archfit:
        time.sleep(0.3)
        busy = [archfit.connect() for _ in range(2)]
        try:
            for conn in busy:
                conn.sendall(post("/scheduler/filter", b"x" * 1000)[:-500])
            time.sleep(0.3)
            with archfit.connect() as third:
                extra_closed = is_closed(third, seconds=3)
            kept_open = [not is_closed(conn, seconds=0.1) for conn in busy]
        finally:
            for conn in busy:
                conn.close()
    assert (True, [True, True]) == (extra_closed, kept_open)


def _malformed_http(archfit: Archfit) -> None:
    with archfit.connect() as conn:
        conn.sendall(b"POST /scheduler/filter HTTP/1.1\r\nHost: a\r\nContent-Length: x1\r\n\r\n")
        read_responses(conn, 1, seconds=2)


def _disconnect_mid_body(archfit: Archfit) -> None:
    with archfit.connect() as conn:
        conn.sendall(post("/scheduler/filter", b"{" * 1000)[:-900])
        time.sleep(0.05)
    time.sleep(0.05)


def _node_names_without_an_index(archfit: Archfit) -> None:
    with archfit.connect() as conn:
        conn.sendall(post("/scheduler/filter", orjson.dumps(args_names(pod("acme/amd:1"), "n1"))))
        read_responses(conn, 1, seconds=2)


def _warned(lines: list[str]) -> list[str] | None:
    """`lines` once they hold a warning for each of the three causes, else None."""
    causes = ("disconnected", "malformed_http", "no_node_index")
    return lines if all(f'"event":"{cause}"' in "".join(lines) for cause in causes) else None


def test_client_mistakes_are_one_json_warning_per_cause_and_all_counted(tmp_path: Path):
    """Malformed HTTP, lost clients and NodeNames without a node index, 10 each: every log
    line is JSON, none is an error, each cause is logged once and counted ten times."""
    with running(tmp_path) as archfit:
        for attack in (_malformed_http, _disconnect_mid_body, _node_names_without_an_index):
            for _ in range(10):
                attack(archfit)
        with archfit.connect() as conn:
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
            metrics = read_responses(conn, 1, seconds=5)[0][1].decode()
        lines = wait_for(lambda: _warned(archfit.log_lines()), "the three warnings logged", 10)
    records = [orjson.loads(line) for line in lines]  # every line parses as JSON
    assert [] == [r for r in records if r.get("level") in ("error", "critical")]
    warned = sorted(r["event"] for r in records if r.get("level") == "warning")
    assert ["disconnected", "malformed_http", "no_node_index"] == warned
    counted = {
        cause: f'archfit_client_problems_total{{cause="{cause}"}} 10.0' in metrics
        for cause in ("disconnected", "malformed_http", "no_node_index")
    }
    assert {"disconnected": True, "malformed_http": True, "no_node_index": True} == counted


def _empty_objects(count: int) -> bytes:
    return b'{"Pod":{"spec":{"volumes":[' + b",".join([b"{}"] * count) + b']}},"NodeNames":[]}'


_MIB = 1 << 20


def test_a_huge_body_does_not_stall_a_concurrent_good_request(tmp_path: Path):
    """30 MB of empty objects (within maxBodyBytes) is refused by counting, never parsed;
    meanwhile a good request on another connection is answered while the huge body still
    arrives. Judged by what was answered and why, not by a clock, so a loaded machine
    cannot turn it red."""
    huge = post("/scheduler/filter", _empty_objects(10_000_000))
    chunks = [huge[i : i + _MIB] for i in range(0, len(huge), _MIB)]
    with running(tmp_path) as archfit:
        sent = threading.Event()
        done = threading.Event()
        good_answered = threading.Semaphore(0)
        answers: list[tuple[int, bytes]] = []

        def attack() -> None:
            with archfit.connect(timeout=30) as conn:
                for chunk in chunks:
                    conn.sendall(chunk)
                    # The next megabyte only once the good connection has had an answer: the
                    # body is still arriving while it is answered, however fast the loop reads.
                    good_answered.acquire(timeout=10)
                sent.set()
                answers.extend(read_responses(conn, 1, seconds=30))
            done.set()

        attacker = threading.Thread(target=attack)
        answered_while_sending = 0
        with archfit.connect() as good:
            attacker.start()
            give_up = time.monotonic() + 60  # the attacker's own reads give up by then
            while not done.is_set() and time.monotonic() < give_up:
                good.sendall(post("/scheduler/filter", SKIPPED))
                assert [200] == [s for s, _ in read_responses(good, 1, seconds=10)]
                answered_while_sending += not sent.is_set()
                good_answered.release()
            attacker.join(timeout=30)
    [(status, body)] = answers
    assert 400 == status
    # Refused by counting its objects before any parser saw it: parsing 10 million objects
    # would hold the event loop, and every other request with it.
    assert b"more than any real request" in body, body[:300]
    # One answer for each megabyte sent, bar the last: a stalled loop answers none of them.
    assert answered_while_sending >= len(chunks) - 1


def test_the_webhook_listener_closes_slow_handshakes_and_slow_headers(tmp_path: Path):
    """On the TLS listener: a client that never starts TLS, and one that trickles its
    headers after it, are both closed after headerTimeoutSeconds."""
    with running(tmp_path, {"headerTimeoutSeconds": 1}, webhook=True) as archfit:
        silent = socket.create_connection(("127.0.0.1", archfit.webhook_port), timeout=10)
        slow = archfit.connect_webhook()
        try:
            slow.sendall(b"POST /mutate HTTP/1.1\r\nHost: a\r\n")
            closed = [is_closed(silent, seconds=4), is_closed(slow, seconds=4)]
        finally:
            silent.close()
            slow.close()
    assert [True, True] == closed


def _idle_after_one_request(conn: socket.socket) -> int:
    conn.sendall(HEALTHZ)
    return read_responses(conn, 1, seconds=5)[0][0]


def test_an_idle_keep_alive_connection_is_closed_after_keepalive_timeout_seconds(tmp_path: Path):
    """keepaliveTimeoutSeconds 1: after one request, an idle connection is closed within 3 s
    on the extender's listener and on the webhook's (aiohttp alone keeps it 3,630 s)."""
    with running(tmp_path, {"keepaliveTimeoutSeconds": 1}, webhook=True) as archfit:
        plain, tls = archfit.connect(), archfit.connect_webhook()
        try:
            statuses = [_idle_after_one_request(plain), _idle_after_one_request(tls)]
            closed = [is_closed(plain, seconds=3), is_closed(tls, seconds=3)]
        finally:
            plain.close()
            tls.close()
    assert ([200, 404], [True, True]) == (statuses, closed)


def test_idle_connections_from_one_address_cannot_lock_out_another(tmp_path: Path):
    """maxConnections 40, maxIdlePerClient 10: 100 idle connections from 127.0.0.2 leave it
    10 open, and a client on 127.0.0.1 is still served."""
    with running(tmp_path, {"maxConnections": 40, "maxIdlePerClient": 10}) as archfit:
        time.sleep(0.3)
        flood = [archfit.connect(source="127.0.0.2") for _ in range(100)]
        try:
            for conn in flood:
                conn.sendall(HEALTHZ)
            time.sleep(0.5)
            with archfit.connect() as scheduler:
                served = _idle_after_one_request(scheduler)
            still_open = sum(not is_closed(conn, seconds=0.05) for conn in flood)
        finally:
            for conn in flood:
                conn.close()
    assert (200, 10) == (served, still_open)


def test_3000_connections_that_never_start_tls_keep_the_webhook_below_256_mib(tmp_path: Path):
    """maxConnections 3,000: 3,000 TCP connections that never send a ClientHello are counted
    (a TLS client then closes the oldest to get in) and RSS stays below 256 MiB."""
    server = {"maxConnections": 3000, "maxIdlePerClient": 4000, "headerTimeoutSeconds": 60}
    server["handshakeTimeoutSeconds"] = 60
    with running(tmp_path, server, webhook=True) as archfit:
        time.sleep(0.5)
        silent = [
            socket.create_connection(("127.0.0.1", archfit.webhook_port), timeout=10)
            for _ in range(3000)
        ]
        try:
            time.sleep(2)
            rss = archfit.rss_bytes()
            with archfit.connect_webhook() as late:
                served = _idle_after_one_request(late)
            metrics = _metrics(archfit)
        finally:
            for conn in silent:
                conn.close()
    assert rss < 256 << 20, rss >> 20
    closed = 'archfit_client_problems_total{cause="idle_connection_closed"} 1.0' in metrics
    assert (404, True) == (served, closed)


def _metrics(archfit: Archfit) -> str:
    with archfit.connect() as conn:
        conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        return read_responses(conn, 1, seconds=5)[0][1].decode()


def _strings(size: int) -> bytes:
    """A JSON array of one-letter strings, `size` bytes long."""
    return b"[" + b",".join([b'"a"'] * (size // 4)) + b"]"


def test_a_32_mib_body_of_short_strings_keeps_both_listeners_below_256_mib(tmp_path: Path):
    """The value bomb in a Pod, in NodeNames and in an AdmissionReview: 400, 400 and 413,
    and archfit's peak RSS stays below 256 MiB."""
    bomb = _strings(32 << 20)
    in_pod = b'{"Pod":{"spec":{"containers":[{"args":' + bomb + b'}]}},"NodeNames":[]}'
    in_names = b'{"Pod":' + orjson.dumps(pod("acme/amd:1")) + b',"NodeNames":' + bomb + b"}"
    review = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":' + bomb
    statuses = []
    with running(tmp_path, {"maxBodyBytes": 33 << 20}, webhook=True) as archfit:
        for body in (in_pod, in_names):
            with archfit.connect(timeout=30) as conn:
                conn.sendall(post("/scheduler/filter", body))
                statuses += [status for status, _ in read_responses(conn, 1, seconds=30)]
        with archfit.connect_webhook(timeout=30) as conn:
            # answered 413 and closed, maybe before the whole body was sent
            with contextlib.suppress(OSError):
                conn.sendall(post("/mutate", review + b"}"))
            statuses += [status for status, _ in read_responses(conn, 1, seconds=30)]
        peak = archfit.rss_bytes("VmHWM")
    assert [400, 400, 413] == statuses
    assert peak < 256 << 20, peak >> 20


def test_the_start_line_names_the_loop_the_test_asked_for(tmp_path: Path, serving_loop: str):
    """The environment override reaches the process: each test here runs on that loop."""
    with running(tmp_path) as archfit:
        lines = wait_for(
            lambda: [line for line in archfit.log_lines() if "archfit_starting" in line],
            "the start line",
            10,
        )
    assert serving_loop == orjson.loads(lines[0])["event_loop"]


TLS_TRANSPORT = {"asyncio": "asyncio.sslproto", "uvloop": "uvloop.loop"}
"""The module of the TLS transport a request arrives on: the loop's own TLS on uvloop."""


def _on_a_guarded_tls_site(
    loop: str, tmp_path: Path, server: ServerSettings, client: Callable[[int, Path], Any]
) -> tuple[Any, int, str]:
    """Run `client(port, ca_file)` in a thread against a guarded TLS site of an app whose
    GET / answers the module of the transport it came on, on `loop`; what it returned, the
    connections the guard held once they had all closed (or after 10 s), and the metrics."""
    cert = make_serving_cert(tmp_path / "tls")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert.cert, cert.key)

    async def transport_module(request: web.Request) -> web.Response:
        return web.Response(text=type(request.transport).__module__)

    async def serve() -> tuple[Any, int, str]:
        app = web.Application()
        app.router.add_get("/", transport_module)
        metrics = Metrics()
        guard = ConnectionGuard(server, metrics, OncePerCause())
        guard.install(app)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await GuardedSite(runner, "127.0.0.1", port, guard, context).start()
        try:
            result = await asyncio.to_thread(client, port, cert.ca_bundle)
            for _ in range(100):
                if not guard.open:
                    break
                await asyncio.sleep(0.1)
            return result, guard.open, metrics.render().decode()
        finally:
            await runner.cleanup()

    _, new_loop = loop_factory(loop)  # type: ignore[arg-type]  # a param of the fixture
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(serve())


def test_tls_runs_in_the_loops_own_implementation(tmp_path: Path, serving_loop: str):
    """The guarded TLS listener on each loop: a request sent in one segment with the client's
    Finished (read with the handshake's last flight) is answered, over uvloop's compiled TLS
    on uvloop, not asyncio's pure-Python one."""
    server = ServerSettings()
    answer, _, _ = _on_a_guarded_tls_site(
        serving_loop, tmp_path, server, _request_with_the_last_flight
    )
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert TLS_TRANSPORT[serving_loop] == answer.split(b"\r\n\r\n", 1)[1].decode()


def _misbehave_then_behave(port: int, ca_file: Path) -> list[bool]:
    """A handshake the client refuses (unknown CA), junk instead of a ClientHello, a
    ClientHello's first byte and no more, then a good request: whether the junk and the
    stalled one were closed, and whether the good one was served."""
    address = ("127.0.0.1", port)
    refused = socket.create_connection(address, timeout=10)
    with contextlib.suppress(ssl.SSLError), refused:
        ssl.create_default_context().wrap_socket(refused, server_hostname="127.0.0.1")
    with socket.create_connection(address, timeout=10) as junk:
        junk.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        closed = [is_closed(junk, seconds=5)]
    with socket.create_connection(address, timeout=10) as stalled:
        stalled.sendall(b"\x16")
        closed.append(is_closed(stalled, seconds=5))  # after handshakeTimeoutSeconds
    answer = _request_with_the_last_flight(port, ca_file)
    return [*closed, answer.startswith(b"HTTP/1.1 200")]


def test_every_tls_connection_gives_its_slot_back(tmp_path: Path, serving_loop: str):
    """Failed, junk and timed-out handshakes are closed, a good request is served after them,
    and once all are closed the guard holds no connection: every slot came back, a failed
    handshake's at once (only the stalled one is counted late, by its own timer)."""
    server = ServerSettings(handshake_timeout_seconds=1)
    closed, held, metrics = _on_a_guarded_tls_site(
        serving_loop, tmp_path, server, _misbehave_then_behave
    )
    late = 'archfit_client_problems_total{cause="handshake_timeout"} 1.0' in metrics
    assert ([True, True, True], 0, True) == (closed, held, late)


def _request_with_the_last_flight(port: int, ca_file: Path) -> bytes:
    """GET / over TLS, its bytes sent with the client's Finished in one write; the answer."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context(cafile=str(ca_file))
    tls = client.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                incoming.write(sock.recv(65536) or b"")
        tls.write(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        sock.sendall(outgoing.read())
        answer = b""
        while not _whole(answer) and (received := sock.recv(65536)):
            incoming.write(received)
            with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                while chunk := tls.read(65536):
                    answer += chunk
    return answer


def _whole(answer: bytes) -> bool:
    """Whether `answer` holds an HTTP response's head and all its Content-Length body."""
    head, found, body = answer.partition(b"\r\n\r\n")
    for line in head.lower().split(b"\r\n"):
        if found and line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


BIG_BODY = 16 << 20
"""A response far larger than loopback's socket buffers: its write waits on the client."""


def _on_a_guarded_site(
    loop: str, server: ServerSettings, client: Callable[[int], Any], *, install: bool = True
) -> Any:
    """Run `client(port)` in a thread against a guarded plain site of an app whose GET /big
    answers BIG_BODY bytes, on `loop`; what it returned."""

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * BIG_BODY)

    async def serve() -> Any:
        app = web.Application()
        app.router.add_get("/big", big)
        guard = ConnectionGuard(server, Metrics(), OncePerCause())
        if install:
            guard.install(app)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        try:
            await GuardedSite(runner, "127.0.0.1", port, guard).start()
            return await asyncio.to_thread(client, port)
        finally:
            await runner.cleanup()

    _, new_loop = loop_factory(loop)  # type: ignore[arg-type]  # a param of the fixture
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(serve())


def _another_while_a_response_is_written(port: int) -> tuple[bool, int]:
    """Ask for /big and read its first bytes only, then open a second connection: whether
    that one was closed, and how many body bytes the first then read."""
    with socket.socket() as first:
        first.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        first.settimeout(10)
        first.connect(("127.0.0.1", port))
        first.sendall(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        answer = first.recv(1 << 10)  # the head has come: the response is being written
        with socket.create_connection(("127.0.0.1", port), timeout=10) as second:
            second_closed = is_closed(second, seconds=3)
        while (size := len(answer.partition(b"\r\n\r\n")[2])) < BIG_BODY:
            received = first.recv(1 << 20)
            if not received:
                break
            answer += received
    return second_closed, size


def test_a_connection_whose_response_is_still_being_written_is_not_closed_to_make_room(
    serving_loop: str,
):
    """maxConnections 1, its response to a slow reader still being written: a second
    connection is closed at once, and the first still gets its whole response."""
    server = ServerSettings(max_connections=1)
    answered = _on_a_guarded_site(serving_loop, server, _another_while_a_response_is_written)
    assert (True, BIG_BODY) == answered


def test_a_guarded_site_does_not_start_for_an_app_whose_requests_its_guard_does_not_count(
    serving_loop: str,
):
    """Without the guard's middleware every connection would look idle: start refuses."""
    with pytest.raises(RuntimeError, match="middleware"):
        _on_a_guarded_site(serving_loop, ServerSettings(), lambda port: None, install=False)
