"""archfit's side of the differential test, run as its own process (`python -m
tests.clientgo.observe`): one case per line of JSON on stdin, one observation per line on
stdout, in the shape clientgo-observe prints (tests/clientgo/main.go).

Its stdin is not a terminal, as clientgo-observe's is not, so an exec plugin is run without
one by both.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import sys
from pathlib import Path
from typing import Any

import orjson
import urllib3

from extender.config.settings import KubernetesSettings


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def certificates(pem: bytes) -> list[bytes]:
    """The DER certificates of PEM text that parse, as x509.CertPool.AppendCertsFromPEM takes."""
    from cryptography import x509

    found = []
    for block in pem.split(b"-----BEGIN ")[1:]:
        kind, _, rest = block.partition(b"-----")
        if kind != b"CERTIFICATE":
            continue
        body, end, _ = rest.partition(b"-----END CERTIFICATE-----")
        if not end:
            continue
        try:
            der = ssl.PEM_cert_to_DER_cert(
                "-----BEGIN CERTIFICATE-----" + body.decode() + "-----END CERTIFICATE-----\n"
            )
            x509.load_der_x509_certificate(der)
        except ValueError:
            continue
        found.append(der)
    return found


def observe(case: dict[str, Any]) -> dict[str, Any]:
    """What archfit's loader makes of one case."""
    os.chdir(case["cwd"])
    os.environ.clear()
    os.environ.update(case["env"])
    out: dict[str, Any] = {"stage": "", "tls": None, "proxy": "", "requests": [], "namespace": ""}
    from extender.kube import client as kube_client
    from extender.kube.api import _proxy
    from extender.kube.connection import in_cluster

    settings = KubernetesSettings(
        mode=case["mode"], kubeconfig=case["kubeconfig"], context=case["context"]
    )
    try:
        out["namespace"] = kube_client.current_namespace(settings)
    except Exception as error:
        out["namespace_error"] = str(error)
    try:
        if case["mode"] == "in-cluster":
            connection = in_cluster(os.environ, Path(case["account"]))
        else:
            paths = kube_client._kubeconfig(settings)
            connection = kube_client._from_kubeconfig(paths, settings)
    except Exception as error:
        return {**out, "stage": "config", "error": f"{type(error).__name__}: {error}"}
    out["proxy"] = _proxy(connection)
    if connection.host.lower().startswith("https"):
        ca = b""
        if connection.ca_data:
            ca = connection.ca_data.encode()
        elif connection.ca_file:
            ca = Path(connection.ca_file).read_bytes()
        cert = connection.cert_data or (
            Path(connection.cert_file).read_bytes() if connection.cert_file else b""
        )
        out["tls"] = {
            "insecure": not connection.verify,
            "server_name": connection.tls_server_name,
            "ca": sorted(digest(der) for der in certificates(ca)) if ca else None,
            "system": not ca,
            "client_cert": [digest(der) for der in certificates(cert)],
        }
    for index in range(2):
        if index == 1:
            for source, target in case["rotate"]:
                os.replace(source, target)
        # What urllib3 makes of the URL KubeApi writes (a missing scheme is http).
        sent = urllib3.util.parse_url(connection.host + "/api/v1/nodes")
        url = sent._replace(scheme=sent.scheme or "http", auth=None).url
        request: dict[str, Any] = {"url": url, "headers": {}}
        try:
            authorization = connection.credentials.authorization() if connection.credentials else None
        except Exception as error:
            request["error"] = str(error)
        else:
            if authorization:
                scheme = authorization.split(" ", 1)[0]
                request["headers"]["authorization"] = [
                    f"{scheme} {digest(authorization.encode())}"
                ]
        out["requests"].append(request)
    return out


def main() -> None:
    for line in sys.stdin.buffer:
        case = orjson.loads(line)
        try:
            seen = observe(case)
        except (Exception, MemoryError) as error:  # an observation, not the batch's end
            seen = {"stage": "crash", "error": f"{type(error).__name__}: {error}", "tls": None,
                    "proxy": "", "requests": [], "namespace": ""}
        sys.stdout.buffer.write(orjson.dumps(seen) + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
