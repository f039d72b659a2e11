"""Fuzz and soak a real `archfit serve`: a hundred thousand malformed requests, then a steady rate.

Starts archfit (kubernetes off, the webhook on its own TLS listener with a test CA) on
loopback, then:

- fuzz: `--requests` mixed malformed requests over a few keep-alive connections:
  mutated ExtenderArgs to /scheduler/filter and /scheduler/prioritize, mutated
  AdmissionReviews to /mutate over TLS, text that is not UTF-8 on all three, broken
  HTTP, bodies cut off mid-way, deep nesting, integers above 64 bits and absurd counts.
  Meanwhile one connection sends a good request every 10 ms and records its latency.
- loosening: `--loosening` random realistic pods (empty terms, matchFields, nodeSelectors,
  every operator) through the webhook's decision, each patch applied as the apiserver
  applies it; a pod is loosened when the patched pod admits a node the original did not
  (tests/support/affinity.py reads node affinity as kube-scheduler does). Target: 0.
- soak: `--rate` valid filter calls a second for `--soak-seconds`, each naming a new tag
  on a refused registry (a failing lookup each, the case where RSS used to creep), with
  archfit's RSS sampled every second.
- idle flood: a 32 MiB body of one-letter strings to each listener, then `--idle-flood`
  connections to the webhook that never finish a TLS handshake (silent, then with the
  first ClientHello bytes) with RSS and a real client beside them, then how long an idle
  connection lives on each listener.

It prints requests sent, answers by status, 5xx, hung requests, whether the process
survived, the good request's worst latency and the RSS slope over the soak.

    .venv/bin/python -m bench.fuzz [--requests 100000] [--rate 200] [--soak-seconds 120]
                                   [--loosening 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import ssl
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import jsonpatch
import orjson

from extender.core.mutation import MutationRules, decide_mutation
from extender.core.platforms import Rule
from extender.core.pods import read_pod
from tests.objects import args_full, args_names, node, pod
from tests.support import affinity
from tests.support.archfit_process import Archfit, post, running

_TIMEOUT = 15.0
_VERBS = ("/scheduler/filter", "/scheduler/prioritize")
_GOOD = orjson.dumps(
    args_full(pod("acme/amd:1", annotations={"archfit.io/skip": "true"}), node("n1"))
)
_WRONG: list[Any] = [None, 0, -1, 1.5, True, "", "\x00\u202e", [], [None], {}, 2**70]


def _review(obj: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "f0f0",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "shop",
            "object": obj,
        },
    }


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list) and value:
        found += _paths(value[0], (*prefix, 0))
    return found


def _replaced(body: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copied = orjson.loads(orjson.dumps(body))
    target = copied
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return copied


def _encode(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:  # 2**70
        import json

        return json.dumps(value).encode()


def _bodies(rng: random.Random, count: int) -> list[tuple[str, bytes, bool]]:
    """(path, body, over TLS) of malformed requests, mixed, made once and cycled."""
    image = "127.0.0.1:1/fuzz/app:1"  # refused by the address guard: no traffic leaves
    full = args_full(pod(image, init_images=(image,), pull_secrets=("s",)), node("n1"))
    names = args_names(pod(image), "n1", "n2")
    review = _review(pod(image))
    deep = b"[" * 1010 + b"]" * 1010
    made: list[tuple[str, bytes, bool]] = []
    for _ in range(count):
        kind = rng.randrange(8)
        base, path, tls = rng.choice(
            [
                (full, rng.choice(_VERBS), False),
                (names, rng.choice(_VERBS), False),
                (review, "/mutate", True),
            ]
        )
        if kind <= 2:  # a field replaced by a wrong type
            where = rng.choice(_paths(base))
            body = _encode(_replaced(base, where, rng.choice(_WRONG)))
        elif kind == 3:  # bytes flipped
            raw = bytearray(orjson.dumps(base))
            for _ in range(rng.randrange(1, 8)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            body = bytes(raw)
        elif kind == 4:  # cut short
            raw = orjson.dumps(base)
            body = raw[: rng.randrange(len(raw))]
        elif kind == 5:  # deep nesting somewhere
            where = rng.choice(_paths(base))
            body = orjson.dumps(_replaced(base, where, "DEEP")).replace(b'"DEEP"', deep, 1)
        elif kind == 6:  # integers above 64 bits
            body = orjson.dumps(base).replace(b'"n1"', b'"n1","g":123456789012345678901234', 1)
        else:  # shapes no real request has
            body = b'{"Pod":{"spec":{"containers":[' + b",".join([b"{}"] * 2000) + b"]}}}"
        made.append((path, body, tls))
    return made


# Byte sequences that are not UTF-8 (RFC 3629), and escapes of half a UTF-16 pair, which
# are ASCII but no Unicode text.
_NOT_UTF8 = [
    b"\xff\xfe",  # never in UTF-8
    b"\xe9t\xe9",  # Latin-1
    b"\xc0\xaf",  # overlong "/"
    b"\xe2\x82",  # cut short
    b"\xed\xa0\x80",  # a surrogate, encoded
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"\\ud800",
    b"\\udc00x",
]


def _not_utf8_bodies(rng: random.Random, count: int) -> list[tuple[str, bytes, bool]]:
    """(path, body, over TLS) of otherwise valid requests with text that is not UTF-8 in
    a string somewhere (a name, an image, a label, a field archfit skips), on every
    endpoint, some beside an integer above 64 bits (the standard library's parser)."""
    image = "127.0.0.1:1/fuzz/app:1"
    bases = [
        (args_full(pod(image), node("n1"), node("n2", "arm64")), False),
        (args_names(pod(image), "n1", "n2"), False),
        (_review(pod(image)), True),
    ]
    made: list[tuple[str, bytes, bool]] = []
    for _ in range(count):
        base, tls = rng.choice(bases)
        path = "/mutate" if tls else rng.choice(_VERBS)
        raw = orjson.dumps(base)
        quotes = [i for i, byte in enumerate(raw) if byte == ord('"')]
        at = rng.choice(quotes) + 1  # just inside a key or a string
        body = raw[:at] + rng.choice(_NOT_UTF8) + raw[at:]
        if rng.random() < 0.25:
            body = body.replace(b"{", b'{"g":123456789012345678901234,', 1)
        elif rng.random() < 0.05:
            body = raw.decode().encode("utf-16")  # the whole body in another encoding
        made.append((path, body, tls))
    return made


_BROKEN_HTTP = [
    b"POST /scheduler/filter HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
    b"POST /scheduler/filter HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /scheduler/filter HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /scheduler/filter HTTP/1.1\r\nHost: a\r\n" + b"X: " + b"a" * 20000 + b"\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40,
]


class Tally:
    def __init__(self) -> None:
        self.sent = 0
        self.statuses: Counter[int] = Counter()
        self.closed = 0
        self.hung = 0
        self.cut_off = 0


async def _connect(
    archfit: Archfit, tls: bool
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if not tls:
        return await asyncio.open_connection("127.0.0.1", archfit.port)
    assert archfit.ca_file is not None
    context = ssl.create_default_context(cafile=str(archfit.ca_file))
    return await asyncio.open_connection(
        "127.0.0.1", archfit.webhook_port, ssl=context, server_hostname="127.0.0.1"
    )


async def _read_status(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """(status, connection still usable)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length, close = 0, lines[0].startswith(b"HTTP/1.0")
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        if name.strip().lower() == b"connection" and value.strip().lower() == b"close":
            close = True
    await reader.readexactly(length)
    return int(lines[0].split(b" ", 2)[1]), not close


async def _worker(
    archfit: Archfit, jobs: list[tuple[str, bytes, bool]], count: int, seed: int, tally: Tally
) -> None:
    rng = random.Random(seed)
    connections: dict[bool, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
    for _ in range(count):
        tally.sent += 1
        roll = rng.random()
        if roll < 0.02:  # cut off mid-body on a connection of its own
            _, writer = await _connect(archfit, rng.random() < 0.5)
            whole = post("/scheduler/filter", b"{" * 5000)
            writer.write(whole[: len(whole) // 2])
            await writer.drain()
            writer.close()
            tally.cut_off += 1
            continue
        if roll < 0.05:
            job: tuple[bytes, bool] = (rng.choice(_BROKEN_HTTP), False)
        else:
            path, body, tls = rng.choice(jobs)
            job = (post(path, body), tls)
        raw, tls = job
        if tls not in connections:
            connections[tls] = await _connect(archfit, tls)
        reader, writer = connections[tls]
        try:
            writer.write(raw)
            await writer.drain()
            status, usable = await asyncio.wait_for(_read_status(reader), _TIMEOUT)
            tally.statuses[status] += 1
        except TimeoutError:
            tally.hung += 1
            usable = False
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            tally.closed += 1
            usable = False
        if not usable:
            connections.pop(tls)[1].close()
    for _, writer in connections.values():
        writer.close()


async def _prober(archfit: Archfit, stop: asyncio.Event, latencies: list[float]) -> None:
    reader, writer = await _connect(archfit, False)
    request = post("/scheduler/filter", _GOOD)
    while not stop.is_set():
        started = time.perf_counter()
        writer.write(request)
        status, _ = await asyncio.wait_for(_read_status(reader), _TIMEOUT)
        assert 200 == status, status
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(0.01)
    writer.close()


async def fuzz(
    archfit: Archfit, requests: int, workers: int, seed: int
) -> tuple[Tally, list[float], float]:
    jobs = _bodies(random.Random(seed), 3000)
    jobs += _not_utf8_bodies(random.Random(seed + 1), 600)
    tally, latencies, stop = Tally(), [], asyncio.Event()
    probe = asyncio.create_task(_prober(archfit, stop, latencies))
    started = time.perf_counter()
    share = requests // workers
    await asyncio.gather(*(_worker(archfit, jobs, share, seed + i, tally) for i in range(workers)))
    elapsed = time.perf_counter() - started
    stop.set()
    await probe
    return tally, latencies, elapsed


async def soak(
    archfit: Archfit, rate: int, seconds: float
) -> tuple[int, Counter[int], list[tuple[float, int]]]:
    connections = [await _connect(archfit, False) for _ in range(4)]
    statuses: Counter[int] = Counter()
    samples: list[tuple[float, int]] = []
    started = time.perf_counter()
    sent = 0
    next_sample = started
    while (now := time.perf_counter()) - started < seconds:
        if now >= next_sample:
            samples.append((now - started, archfit.rss_bytes()))
            next_sample += 1.0
        due = int((now - started) * rate)
        batch = []
        while sent < due:
            image = f"127.0.0.1:1/soak/app:{sent}"  # a new failing tag every call
            body = orjson.dumps(args_full(pod(image), node("n1", "amd64"), node("n2", "arm64")))
            batch.append((connections[sent % 4], post("/scheduler/filter", body)))
            sent += 1
        for (_, writer), raw in batch:
            writer.write(raw)
        for (reader, _), _ in batch:
            status, _ = await asyncio.wait_for(_read_status(reader), _TIMEOUT)
            statuses[status] += 1
        await asyncio.sleep(0.005)
    for _, writer in connections:
        writer.close()
    return sent, statuses, samples


def _slope_mb_per_minute(samples: list[tuple[float, int]]) -> float:
    """Least-squares slope of RSS over `samples`, MB a minute."""
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_r = sum(r for _, r in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    cov = sum((t - mean_t) * (r - mean_r) for t, r in samples)
    return cov / var * 60 / 1e6 if var else 0.0


def loosening(count: int, seed: int) -> tuple[int, int]:
    """(pods loosened, pods patched) of `count` random pods through the webhook's decision."""
    rng = random.Random(seed)
    nodes = affinity.nodes()
    names = [n.name for n in nodes]
    loosened = patched_pods = 0
    for _ in range(count):
        images = affinity.random_images(rng)
        obj = affinity.random_pod(rng, tuple(images), names)
        rules = MutationRules(
            platforms=frozenset(rng.sample(affinity.PLATFORMS, rng.randint(1, 4))),
            arch_preference={"arm64": 10, "amd64": 0},
            rule=rng.choice(list(Rule)),
        )
        operations = decide_mutation(read_pod(obj), tuple(images), dict(images), rules).operations(
            False
        )
        patched_pods += bool(operations)
        patched = jsonpatch.apply_patch(obj, operations)
        loosened += any(affinity.admits(patched, n) and not affinity.admits(obj, n) for n in nodes)
    return loosened, patched_pods


async def main(args: argparse.Namespace) -> None:
    if args.loosening > 0:
        started = time.perf_counter()
        loosened, patched = loosening(args.loosening, args.seed)
        print(
            f"loosening: {loosened} of {args.loosening} random pods loosened (target 0); "
            f"{patched} patched; {time.perf_counter() - started:.1f} s"
        )
    server = {"gcIntervalSeconds": args.gc_interval}
    with tempfile.TemporaryDirectory() as tmp, running(Path(tmp), server, webhook=True) as archfit:
        if args.requests > 0:
            await _fuzz_and_print(archfit, args)
        if args.soak_seconds > 0:
            await _soak_and_print(archfit, args)
        if args.idle_flood > 0:
            await asyncio.to_thread(_idle_flood_and_print, archfit, args)
        print(f"  archfit still running at the end: {archfit.process.poll() is None}")
        levels: Counter[str] = Counter()
        for line in archfit.log_lines():
            try:
                record = orjson.loads(line)
                levels[f"{record.get('level')}:{record.get('event')}"] += 1
            except orjson.JSONDecodeError:
                levels["not JSON"] += 1
        print(f"  archfit's log lines by level: {dict(levels)}")
        errors = sum(n for key, n in levels.items() if key.split(":")[0] in ("error", "critical"))
        print(f"  error-level lines: {errors}")


async def _fuzz_and_print(archfit: Archfit, args: argparse.Namespace) -> None:
    tally, latencies, elapsed = await fuzz(archfit, args.requests, args.workers, args.seed)
    alive = archfit.process.poll() is None
    print(f"fuzz: {tally.sent} requests in {elapsed:.1f} s ({tally.sent / elapsed:.0f}/s)")
    print(f"  answers by status: {dict(sorted(tally.statuses.items()))}")
    fives = sum(n for s, n in tally.statuses.items() if s >= 500)
    print(
        f"  5xx: {fives}   hung: {tally.hung}   closed by archfit: {tally.closed}   "
        f"cut off by the client on purpose: {tally.cut_off}"
    )
    print(f"  archfit crashed: {0 if alive else 1}")
    print(
        f"  good request beside it: {len(latencies)} calls, max {max(latencies) * 1e3:.1f} ms, "
        f"p99 {sorted(latencies)[int(len(latencies) * 0.99)] * 1e3:.1f} ms"
    )


async def _soak_and_print(archfit: Archfit, args: argparse.Namespace) -> None:
    sent, statuses, samples = await soak(archfit, args.rate, args.soak_seconds)
    rss = [r for _, r in samples]
    print(
        f"soak: {sent} filter calls at {args.rate}/s for {args.soak_seconds:.0f} s, "
        "each a new failing tag"
    )
    print(f"  answers by status: {dict(sorted(statuses.items()))}")
    print(
        f"  RSS {rss[0] / 1e6:.1f} -> {rss[-1] / 1e6:.1f} MB (max {max(rss) / 1e6:.1f}); "
        f"slope {_slope_mb_per_minute(samples):+.2f} MB/min, over the second half "
        f"{_slope_mb_per_minute(samples[len(samples) // 2 :]):+.2f} MB/min"
    )


def idle_survival(archfit: Archfit, limit: float = 120.0) -> dict[str, float]:
    """Seconds an idle connection lives after one request, on each listener (`limit`: never
    closed within it)."""

    from tests.support.archfit_process import read_responses

    lived: dict[str, float] = {}
    for name, connect in (("extender", archfit.connect), ("webhook", archfit.connect_webhook)):
        with connect(timeout=limit + 5) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
            read_responses(conn, 1, seconds=5)
            started = time.monotonic()
            conn.settimeout(limit)
            try:
                conn.recv(1)
            except TimeoutError:
                pass
            except OSError:
                pass
            lived[name] = time.monotonic() - started
    return lived


def idle_flood(archfit: Archfit, count: int = 3000, hello: bool = False) -> dict[str, Any]:
    """`count` connections to the webhook that never finish a TLS handshake, from 100 loopback
    addresses (30 each, under the per-client cap): archfit's RSS while they are open, and
    whether a real TLS client is still served. `hello` sends the first bytes of a ClientHello
    (so TLS state is allocated) and nothing more."""
    import socket as sockets

    from tests.support.archfit_process import read_responses

    base = archfit.rss_bytes()
    conns: list[sockets.socket] = []
    refused = 0
    for index in range(count):
        source = f"127.0.1.{2 + index % 100}"
        try:
            conn = sockets.create_connection(
                ("127.0.0.1", archfit.webhook_port), timeout=10, source_address=(source, 0)
            )
        except OSError:
            refused += 1
            continue
        if hello:
            conn.sendall(b"\x16\x03\x01\x02\x00")
        conns.append(conn)
    time.sleep(2)
    during = archfit.rss_bytes()
    try:
        with archfit.connect_webhook() as good:
            good.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
            served = [status for status, _ in read_responses(good, 1, seconds=10)]
    except OSError as error:
        served = [f"{type(error).__name__}"]  # type: ignore[list-item]
    closed_by_archfit = 0
    for conn in conns:
        conn.settimeout(0.01)
        try:
            closed_by_archfit += conn.recv(1) == b""
        except TimeoutError:
            pass
        except OSError:
            closed_by_archfit += 1
        conn.close()
    return {
        "base_mib": base >> 20,
        "during_mib": during >> 20,
        "peak_mib": archfit.rss_bytes("VmHWM") >> 20,
        "good_client": served,
        "closed_by_archfit": closed_by_archfit,
        "refused_at_connect": refused,
    }


def value_bomb(archfit: Archfit, size: int = (32 << 20) - 4096) -> dict[str, Any]:
    """A body of one-letter strings, `size` bytes, in a filter call's Pod and as an
    AdmissionReview: the statuses, and archfit's peak RSS."""
    import contextlib

    from tests.support.archfit_process import read_responses

    strings = b"[" + b",".join([b'"a"'] * (size // 4)) + b"]"
    bodies = {
        "extender": b'{"Pod":{"spec":{"containers":[{"args":' + strings + b'}]}},"NodeNames":[]}',
        "webhook": b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
        + strings
        + b"}",
    }
    statuses: dict[str, list[int]] = {}
    for name, body in bodies.items():
        path = "/scheduler/filter" if name == "extender" else "/mutate"
        connect = archfit.connect if name == "extender" else archfit.connect_webhook
        with connect(timeout=60) as conn:
            with contextlib.suppress(OSError):
                conn.sendall(post(path, body))
            statuses[name] = [status for status, _ in read_responses(conn, 1, seconds=60)]
    return {"statuses": statuses, "peak_mib": archfit.rss_bytes("VmHWM") >> 20}


def _idle_flood_and_print(archfit: Archfit, args: argparse.Namespace) -> None:
    bomb = value_bomb(archfit)
    print(f"value bomb (32 MiB of one-letter strings): {bomb}")
    for hello in (False, True):
        what = "first ClientHello bytes only" if hello else "silent"
        result = idle_flood(archfit, args.idle_flood, hello)
        print(f"idle flood, {args.idle_flood} connections, {what}: {result}")
    print(f"idle connection lifetime after one request, s: {idle_survival(archfit)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rate", type=int, default=200, help="soak requests a second")
    parser.add_argument("--soak-seconds", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--loosening", type=int, default=20_000, help="random pods for the loosening check"
    )
    parser.add_argument(
        "--idle-flood", type=int, default=3000, help="connections that never finish TLS (0: off)"
    )
    parser.add_argument(
        "--gc-interval", type=float, default=60.0, help="server.gcIntervalSeconds (0: off)"
    )
    asyncio.run(main(parser.parse_args()))
