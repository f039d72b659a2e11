"""A small REST client for the e2e kube-apiserver: discovery, server-side apply, create.

Objects are applied the way `kubectl apply --server-side --dry-run=server` does it:
PATCH with application/apply-patch+yaml, `dryRun=All` and strict field validation,
so a misspelt or unknown field is an error, not a silently dropped key.
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FIELD_MANAGER = "archfit-deploy-tests"


class ApiError(Exception):
    """The apiserver answered with an error status."""

    def __init__(self, status: int, what: str, body: str) -> None:
        try:
            message = json.loads(body).get("message", body)
        except ValueError:
            message = body
        super().__init__(f"{what}: HTTP {status}: {message[:2000]}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Answer:
    """One response: the decoded body and the apiserver's warnings."""

    body: dict[str, Any]
    warnings: list[str]


@dataclass
class ApiServer:
    """Talks to one kube-apiserver as the identity the SSL context presents."""

    server: str
    context: ssl.SSLContext
    token: str | None = None
    _resources: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        what: str = "",
    ) -> Answer:
        """Send one request; raise ApiError for any status >= 400."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.server}{path}", data=data, method=method)  # noqa: S310
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:  # noqa: S310
                raw = response.read().decode()
                warnings = response.headers.get_all("Warning") or []
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, what or f"{method} {path}", error.read().decode()) from None
        return Answer(json.loads(raw) if raw else {}, [_warning_text(w) for w in warnings])

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural resource name, namespaced) of a kind, from discovery."""
        if (api_version, kind) not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for entry in self.request("GET", base).body["resources"]:
                if "/" not in entry["name"]:
                    self._resources[api_version, entry["kind"]] = (
                        entry["name"],
                        bool(entry["namespaced"]),
                    )
        if (api_version, kind) not in self._resources:
            raise LookupError(f"the apiserver serves no {kind} in {api_version}")
        return self._resources[api_version, kind]

    def collection_path(self, api_version: str, kind: str, namespace: str = "") -> str:
        """The URL path of a kind's collection (in namespace, if the kind is namespaced)."""
        plural, namespaced = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            if not namespace:
                raise ValueError(f"{kind} is namespaced but no namespace was given")
            return f"{base}/namespaces/{namespace}/{plural}"
        return f"{base}/{plural}"

    def apply(self, obj: Mapping[str, Any], dry_run: bool = True) -> Answer:
        """Server-side apply of one object; with dry_run nothing is persisted."""
        meta = obj["metadata"]
        path = self.collection_path(obj["apiVersion"], obj["kind"], meta.get("namespace", ""))
        query = {"fieldManager": FIELD_MANAGER, "force": "true", "fieldValidation": "Strict"}
        if dry_run:
            query["dryRun"] = "All"
        what = f"apply {obj['kind']} {meta.get('namespace', '')}/{meta['name']}"
        return self.request(
            "PATCH",
            f"{path}/{urllib.parse.quote(meta['name'])}?{urllib.parse.urlencode(query)}",
            obj,
            content_type="application/apply-patch+yaml",  # JSON is YAML
            what=what,
        )

    def service_account_token(self, namespace: str, account: str) -> str:
        """A token of a ServiceAccount (TokenRequest, an hour), as a pod of it is given."""
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        }
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
        return str(self.request("POST", path, request).body["status"]["token"])


def token_kubeconfig(path: Path, server: str, ca: Path, token: str, namespace: str) -> Path:
    """A kubeconfig that authenticates with a ServiceAccount token, in the ServiceAccount's
    namespace, as a pod would (in-cluster, the pod's own namespace is the current one)."""
    cluster_entry = {"server": server, "certificate-authority": str(ca)}
    context = {"cluster": "e2e", "user": "sa", "namespace": namespace}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "e2e", "cluster": cluster_entry}],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "e2e", "context": context}],
                "current-context": "e2e",
            }
        )
    )
    return path


def _warning_text(header: str) -> str:
    # RFC 7234 warning: `299 - "text"`, text a quoted-string with backslash escapes.
    code, _, rest = header.partition(" ")
    _agent, _, text = rest.partition(" ")
    text = text.strip()
    if code != "299" or len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return header
    return re.sub(r"\\(.)", r"\1", text[1:-1])
