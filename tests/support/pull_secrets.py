"""Registry credentials as Kubernetes carries them: `auth` fields, docker config JSON, Secrets.

One builder each, so every test writes a pull secret the way kubelet and docker read one.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from extender.registry.pure.credentials import DOCKER_CONFIG_JSON, DOCKERCFG, PullSecret


def b64(raw: bytes) -> str:
    """Standard base64 with padding, as Secret `data` and `auth` fields carry it."""
    return base64.b64encode(raw).decode()


def auth_field(user: str, password: str) -> str:
    """A docker config `auth` field, base64 of `user:password` (also a Basic header's value)."""
    return b64(f"{user}:{password}".encode())


def docker_config(registry: str, user: str, password: str, *, fields: bool = False) -> bytes:
    """A config.json / `.dockerconfigjson` with one registry under `auths`.

    `fields=True` also writes `username` and `password` beside `auth`, as `kubectl create
    secret docker-registry` does.
    """
    entry = {"auth": auth_field(user, password)}
    if fields:
        entry = {"username": user, "password": password, **entry}
    return json.dumps({"auths": {registry: entry}}).encode()


def pull_secret(
    name: str, registry: str, user: str, password: str, namespace: str = "team-a"
) -> PullSecret:
    """A kubernetes.io/dockerconfigjson Secret, as the SecretSource hands it to the keychain."""
    raw = docker_config(registry, user, password)
    return PullSecret(namespace, name, DOCKER_CONFIG_JSON, {".dockerconfigjson": raw})


def pull_secret_of(kind: str, payload: object, name: str = "regcred") -> PullSecret:
    """A Secret of `kind` (dockerconfigjson or dockercfg) holding `payload` as JSON, verbatim."""
    key = ".dockercfg" if kind == DOCKERCFG else ".dockerconfigjson"
    return PullSecret("team-a", name, kind, {key: json.dumps(payload).encode()})


def secret_manifest(namespace: str, name: str, config: object) -> dict[str, Any]:
    """A v1 Secret of type kubernetes.io/dockerconfigjson, as the API server serves it.

    `config` is the docker config: bytes verbatim, anything else written as JSON.
    """
    raw = config if isinstance(config, bytes) else json.dumps(config).encode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": DOCKER_CONFIG_JSON,
        "metadata": {"name": name, "namespace": namespace},
        "data": {".dockerconfigjson": b64(raw)},
    }
