"""A loopback HTTP server that answers every GET with JSON a function makes of the request's
path and headers: a stand-in for an API server where only what it was sent matters, or that
plays back recorded answers (a `Status` for one that is not 200)."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from email.message import Message
from typing import Any, NamedTuple


class Status(NamedTuple):
    """An answer with its own HTTP status (an API server's 404 Status object, say)."""

    code: int
    body: Any


@contextlib.contextmanager
def json_server(answer: Callable[[str, Message], Any]) -> Iterator[str]:
    """Serve `answer(path, headers)` to every GET, as JSON (bytes as they are: a watch's
    stream), with status 200 unless it is a `Status`; `path` has the query string. Yields the
    server's http:// URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answered = answer(self.path, self.headers)
            code, answered = answered if isinstance(answered, Status) else (200, answered)
            body = answered if isinstance(answered, bytes) else json.dumps(answered).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
