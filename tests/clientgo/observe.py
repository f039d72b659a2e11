"""archfit's side of the differential test, run as its own process (`python -m
tests.clientgo.observe`): one case per line of JSON on stdin, one observation per line on
stdout, in the shape clientgo-observe prints (tests/clientgo/main.go).

Its stdin is not a terminal, as clientgo-observe's is not, so an exec plugin is run without
one by both.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from extender.config.settings import KubernetesSettings


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def observe(case: dict[str, Any]) -> dict[str, Any]:
    """What archfit would send for one case: its settings' client, built as `archfit serve`
    builds it (extender.kube.connect), then the two requests' URL and headers."""
    from extender.kube import connect
    from extender.kube.client.tls import certificates

    os.chdir(case["cwd"])
    environ = case["env"]
    account = Path(case["account"])
    out: dict[str, Any] = {"stage": "", "tls": None, "proxy": "", "requests": [], "namespace": ""}
    settings = KubernetesSettings(
        mode=case["mode"], kubeconfig=case["kubeconfig"], context=case["context"]
    )
    try:
        out["namespace"] = connect.namespace(settings, environ, account)
    except Exception as error:
        out["namespace_error"] = f"{type(error).__name__}: {error}"
    try:
        api = connect.build_api_client(settings, environ=environ, account=account)
    except Exception as error:
        return {**out, "stage": "config", "error": f"{type(error).__name__}: {error}"}
    assert api is not None
    transport = api.transport
    out["proxy"] = str(transport.proxy) if transport.proxy is not None else ""
    if transport.tls is not None:
        trusted = transport.tls.trusted()
        seen: dict[str, Any] = {
            "insecure": transport.tls.settings.insecure,
            "server_name": transport.tls.settings.server_name,
            "ca": None if trusted is None else sorted(digest(der) for der in trusted),
            "system": trusted is None,
            "client_cert": [],
        }
        try:
            pair = transport.tls.client_pair()
        except Exception as error:
            seen["client_cert_error"] = f"{type(error).__name__}: {error}"
        else:
            seen["client_cert"] = [digest(der) for der in certificates(pair[0])] if pair else []
        out["tls"] = seen
    for index in range(2):
        if index == 1:
            for source, target in case["rotate"]:
                os.replace(source, target)
        request: dict[str, Any] = {"url": transport.url("/api/v1/nodes"), "headers": {}}
        try:
            headers, _ = transport.headers()
        except Exception as error:
            request["error"] = f"{type(error).__name__}: {error}"
        else:
            for name, value in headers:
                lowered = name.lower()
                if lowered == "authorization":
                    value = f"{value.split(' ', 1)[0]} {digest(value.encode())}"
                request["headers"].setdefault(lowered, []).append(value)
        out["requests"].append(request)
    api.close()
    return out


def main() -> None:
    for line in sys.stdin.buffer:
        case = orjson.loads(line)
        try:
            seen = observe(case)
        except (Exception, MemoryError) as error:  # an observation, not the batch's end
            seen = {
                "stage": "crash",
                "error": f"{type(error).__name__}: {error}",
                "tls": None,
                "proxy": "",
                "requests": [],
                "namespace": "",
            }
        sys.stdout.buffer.write(orjson.dumps(seen) + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
