"""A mutating webhook that decides nothing, on aiohttp and the loop's TLS as archfit serves.

bench/webhook_latency's second floor, beside the Go do-nothing webhook: what any webhook on
archfit's stack costs per pod, so archfit's CPU splits into the stack's and its own. POST
/allow reads the review (orjson) and answers it allowed, unchanged, its uid echoed; GET
/readyz answers 200. No access log, as archfit's listener. `--loop uvloop` serves on uvloop
and its compiled TLS, `asyncio` (the default) on asyncio's loop and its pure-Python TLS.

    python -m bench.aiohttp_webhook --port 8443 --cert tls.crt --key tls.key [--loop uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import ssl

import orjson
from aiohttp import web


async def allow(request: web.Request) -> web.Response:
    uid = orjson.loads(await request.read())["request"]["uid"]
    answer = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": True},
    }
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


async def ready(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    app = web.Application()
    app.router.add_post("/allow", allow)
    app.router.add_get("/readyz", ready)
    loop = new_loop(args.loop)
    web.run_app(
        app, host="127.0.0.1", port=args.port, ssl_context=context, access_log=None, loop=loop
    )


def new_loop(name: str) -> asyncio.AbstractEventLoop:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


if __name__ == "__main__":
    main()
