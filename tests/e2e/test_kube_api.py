"""archfit's own API client (extender.kube.client.api) against the real kube-apiserver: a
kubeconfig with client certificates read natively, JSON in and out, a watch streamed, and
every refusal an ApiError carrying the server's status, reason and Status body."""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Iterator

import orjson
import pytest

from extender.kube.client.api import JSON_PATCH, STRATEGIC_MERGE_PATCH, KubeApi, connect
from extender.kube.client.errors import ApiError
from extender.kube.client.kubeconfig import ClientConfig, LoadingRules, read_files
from extender.kube.client.watching import watch_lines
from tests.e2e.controlplane import ControlPlane

pytestmark = pytest.mark.e2e

TIMEOUT = (5, 15)


@pytest.fixture
def api(control_plane: ControlPlane) -> Iterator[KubeApi]:
    """The admin kubeconfig (client certificate files, a CA file), read without `kubernetes`."""
    rules = LoadingRules(explicit=str(control_plane.admin_kubeconfig))
    with connect(ClientConfig(read_files(rules)).rest_config(), {}) as api:
        yield api


def _refusal(call) -> ApiError:
    with pytest.raises(ApiError) as raised:
        call()
    return raised.value


def test_the_version_is_read_with_the_client_certificate(api):
    """GET /version answers the server's gitVersion."""
    assert api.get("/version", timeout=TIMEOUT)["gitVersion"].startswith("v1.")


def test_connections_opened_in_many_threads_at_once_never_load_into_the_shared_context(api):
    """Watches and calls run in threads, each opening connections; loading the client pair
    into the context they share while another handshakes crashes the process (OpenSSL), so
    no connection changes it: a renewed pair makes a new context instead."""
    tls = api.transport.tls
    assert tls is not None
    context = tls.context()
    loaded: list[str] = []
    for name in ("load_cert_chain", "load_verify_locations"):
        setattr(context, name, lambda *a, _name=name, **k: loaded.append(_name))
    with concurrent.futures.ThreadPoolExecutor(8) as threads:
        versions = list(
            threads.map(lambda _: api.get("/version", timeout=TIMEOUT)["major"], range(32))
        )
    assert ([versions[0]] * 32, []) == (versions, loaded)


def test_a_missing_object_is_a_404_with_the_servers_status_body(api, namespace):
    """The status, reason, the Status object and the headers are all there."""
    error = _refusal(lambda: api.get(f"/api/v1/namespaces/{namespace}/pods/nope", timeout=TIMEOUT))
    assert (404, "Not Found", "NotFound", 'pods "nope" not found', "application/json") == (
        error.status,
        error.reason,
        orjson.loads(error.body)["reason"],
        error.message,
        error.headers.get("Content-Type"),
    )


def test_creating_twice_is_a_409_and_an_invalid_name_a_422(api, namespace):
    """AlreadyExists and Invalid come back as such."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    api.post(path, {"metadata": {"name": "twice"}}, timeout=TIMEOUT)
    again = _refusal(lambda: api.post(path, {"metadata": {"name": "twice"}}, timeout=TIMEOUT))
    invalid = _refusal(lambda: api.post(path, {"metadata": {"name": "Not_Valid"}}, timeout=TIMEOUT))
    assert (409, 422) == (again.status, invalid.status)


def test_a_failing_webhook_is_a_500(api, namespace):
    """An Internal error from the server itself: a fail-closed webhook nobody serves."""
    name = f"unserved-{namespace}"[:63]
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "unserved.archfit.io",
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        }],
    }  # fmt: skip
    webhooks = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    api.post(webhooks, configuration, timeout=TIMEOUT)
    try:
        error = _refusal(
            lambda: api.post(
                f"/api/v1/namespaces/{namespace}/configmaps",
                {"metadata": {"name": "blocked"}},
                timeout=TIMEOUT,
            )
        )
    finally:
        api.delete(f"{webhooks}/{name}", timeout=TIMEOUT)
    assert (500, "InternalError") == (error.status, orjson.loads(error.body)["reason"])


def test_patches_are_sent_as_the_content_type_they_name(api, namespace):
    """A strategic merge deletes a key given as null; a JSON patch's failed `test` is a 422."""
    path = f"/api/v1/namespaces/{namespace}/configmaps/patched"
    api.post(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"metadata": {"name": "patched"}, "data": {"a": "1", "b": "2"}},
        timeout=TIMEOUT,
    )
    merged = api.patch(
        path, {"data": {"a": None, "c": "3"}}, content_type=STRATEGIC_MERGE_PATCH, timeout=TIMEOUT
    )
    failed = _refusal(
        lambda: api.patch(
            path,
            [{"op": "test", "path": "/data/b", "value": "nine"}],
            content_type=JSON_PATCH,
            timeout=TIMEOUT,
        )
    )
    assert ({"b": "2", "c": "3"}, 422) == (merged["data"], failed.status)


def test_a_watch_streams_events_line_by_line(api, namespace):
    """stream() leaves the body unread; watch_lines reads one event per line."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = api.get(path, timeout=TIMEOUT)
    version = listed["metadata"]["resourceVersion"]
    api.post(path, {"metadata": {"name": "watched"}}, timeout=TIMEOUT)
    response = api.stream(
        path,
        query={"watch": True, "resourceVersion": version, "timeoutSeconds": 5},
        timeout=(5, 15),
    )
    seen = []
    with contextlib.closing(response):
        for line in watch_lines(response):
            event = orjson.loads(line)
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if event["object"]["metadata"]["name"] == "watched":
                break
        response.release_conn()
    assert ("ADDED", "watched") == seen[-1]
