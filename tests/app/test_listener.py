"""`archfit serve` under attack on its own listener: real process, real sockets, bounded in time."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import orjson

from tests.objects import args_full, args_names, node, pod
from tests.support.archfit_process import Archfit, is_closed, post, read_responses, running
from tests.support.waiting import wait_for

SKIPPED = orjson.dumps(
    args_full(pod("acme/amd:1", annotations={"archfit.io/skip": "true"}), node("n1"))
)
"""A good request that needs no registry: the pod opts out, so it is answered at once."""


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
    with running(tmp_path, {"headerTimeoutSeconds": 1}) as archfit:
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


def test_connections_above_the_cap_are_closed_at_once(tmp_path: Path):
    """maxConnections 5: a sixth idle connection is closed while the five stay open."""
    with running(tmp_path, {"maxConnections": 5}) as archfit:
        time.sleep(0.3)  # the start-up probe's connection is gone
        first = [archfit.connect() for _ in range(5)]
        time.sleep(0.3)
        try:
            with archfit.connect() as sixth:
                extra_closed = is_closed(sixth, seconds=3)
            kept_open = [not is_closed(conn, seconds=0.1) for conn in first]
        finally:
            for conn in first:
                conn.close()
    assert (True, [True] * 5) == (extra_closed, kept_open)


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


def test_a_huge_body_does_not_stall_a_concurrent_good_request(tmp_path: Path):
    """30 MB of empty objects (within maxBodyBytes) is refused before parsing; meanwhile a
    good request on another connection is never delayed by more than half a second."""
    huge = b'{"Pod":{"spec":{"volumes":[' + b",".join([b"{}"] * 10_000_000) + b']}},"NodeNames":[]}'
    latencies: list[float] = []
    with running(tmp_path) as archfit:
        done = threading.Event()
        statuses: list[int] = []

        def attack() -> None:
            with archfit.connect(timeout=30) as conn:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
                conn.sendall(post("/scheduler/filter", huge))
                statuses.extend(status for status, _ in read_responses(conn, 1, seconds=30))
            done.set()

        attacker = threading.Thread(target=attack)
        with archfit.connect() as good:
            attacker.start()
            deadline = time.monotonic() + 30
            while not done.is_set() and time.monotonic() < deadline:
                started = time.monotonic()
                good.sendall(post("/scheduler/filter", SKIPPED))
                assert [200] == [s for s, _ in read_responses(good, 1, seconds=10)]
                latencies.append(time.monotonic() - started)
            attacker.join(timeout=30)
    assert max(latencies) < 0.5, max(latencies)
    assert [400] == statuses


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
