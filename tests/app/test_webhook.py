"""The admission webhook through its own TLS listener, as kube-apiserver calls it."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import orjson
import pytest
from structlog.testing import capture_logs

from extender.app_keys import METRICS, WEBHOOK_CERTIFICATE
from extender.config.settings import Settings, WebhookSettings
from extender.core.platforms import Platform
from extender.core.pods import PullSecretsRef
from extender.server import create_app
from tests.app.conftest import TABLE, settings, table_resolver
from tests.objects import node, pod
from tests.support.fakes import FunctionResolver, StaticNodes
from tests.support.process import free_port
from tests.support.tls import ServingCert, make_serving_cert

Review = dict[str, Any]


def review(obj: dict[str, Any], operation: str = "CREATE", uid: str = "u-1") -> Review:
    """An AdmissionReview request for a pod, as kube-apiserver sends it."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": obj["metadata"].get("namespace", "shop"),
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


class Webhook:
    """A running archfit app with the webhook enabled, and an HTTPS client that trusts it."""

    def __init__(
        self, cert: ServingCert, port: int, client: Any, session: aiohttp.ClientSession
    ) -> None:
        self.cert, self.port, self.session = cert, port, session
        self.client = client
        """The test client of the extender's own (plain HTTP) listener."""
        self.app = client.app

    async def call(self, body: Any, status: int = 200, path: str = "/mutate") -> dict[str, Any]:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        async with self.session.post(
            f"https://127.0.0.1:{self.port}{path}", data=data, ssl=self.trust()
        ) as response:
            assert status == response.status, await response.text()
            return dict(orjson.loads(await response.read()))

    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert.ca_bundle))

    async def admit(self, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the pod after archfit's patch, the AdmissionResponse)."""
        answer = (await self.call(review(obj)))["response"]
        patch = orjson.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []
        return jsonpatch.apply_patch(copy.deepcopy(obj), patch), answer


Start = Callable[..., Awaitable[Webhook]]


def webhook_settings(cert: ServingCert, port: int, **overrides: Any) -> Settings:
    hook = {
        "enabled": True,
        "host": "127.0.0.1",
        "port": port,
        "certFile": str(cert.cert),
        "keyFile": str(cert.key),
        "resolveDeadlineSeconds": 0.5,
    }
    hook.update(overrides.pop("webhook", {}))
    return settings(webhook=hook, **overrides)


@pytest.fixture
async def start(aiohttp_client: Any, tmp_path: Path) -> AsyncIterator[Start]:
    sessions: list[aiohttp.ClientSession] = []

    async def make(resolver: Any = None, nodes: Any = None, **overrides: Any) -> Webhook:
        cert = make_serving_cert(tmp_path / f"tls-{len(sessions)}")
        port = free_port()
        app = create_app(
            webhook_settings(cert, port, **overrides),
            resolver=resolver or FunctionResolver(table_resolver),
            nodes=nodes,
        )
        client = await aiohttp_client(app)  # the app's start-up opens the TLS listener
        session = aiohttp.ClientSession()
        sessions.append(session)
        return Webhook(cert, port, client, session)

    yield make
    for session in sessions:
        await session.close()


async def test_an_amd64_only_pod_is_allowed_with_a_patch_that_requires_amd64(start: Start) -> None:
    """The answer echoes the uid, allows the pod and pins it to amd64 in a JSONPatch."""
    hook = await start()
    patched, answer = await hook.admit(pod("acme/amd:1"))
    assert ("u-1", True, "JSONPatch") == (answer["uid"], answer["allowed"], answer["patchType"])
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
    ] == terms["nodeSelectorTerms"]


async def test_a_conflicting_pod_is_allowed_unchanged_with_archfits_warning(start: Start) -> None:
    """kubectl prints AdmissionResponse warnings; the pod itself is not touched."""
    hook = await start()
    obj = pod("acme/amd:1")
    obj["spec"]["nodeSelector"] = {"kubernetes.io/arch": "arm64"}
    patched, answer = await hook.admit(obj)
    assert ["archfit: image acme/amd:1 has no linux/arm64, but this pod requires arm64"] == (
        answer["warnings"]
    )
    assert obj["spec"] == patched["spec"]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda p: p["metadata"].update(annotations={"archfit.io/skip": "true"}),
            id="skip-annotation",
        ),
        pytest.param(
            lambda p: p["metadata"].update(namespace="kube-system"), id="excluded-namespace"
        ),
        pytest.param(lambda p: p["spec"].update(nodeName="amd64-a"), id="already-bound"),
        pytest.param(
            lambda p: p["metadata"].update(
                ownerReferences=[
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": "agent",
                        "uid": "x",
                        "controller": True,
                    }
                ]
            ),
            id="daemonset",
        ),
    ],
)
async def test_pods_archfit_must_not_touch_get_no_patch(start: Start, change: Any) -> None:
    """Opt-out, excluded namespaces, bound pods and DaemonSet pods are left as they are."""
    hook = await start()
    obj = pod("acme/amd:1")
    change(obj)
    _, answer = await hook.admit(obj)
    assert {"uid": "u-1", "allowed": True} == answer


async def test_an_update_is_allowed_without_looking_at_it(start: Start) -> None:
    """Only CREATE matters: pod affinity cannot change after creation."""
    hook = await start()
    answer = (await hook.call(review(pod("acme/amd:1"), operation="UPDATE")))["response"]
    assert {"uid": "u-1", "allowed": True} == answer


async def test_a_registry_outage_admits_the_pod_unchanged(start: Start) -> None:
    """Unknown platforms fail open: no constraint, no toleration, no annotation."""
    hook = await start()
    obj = pod("acme/multi:1", "acme/down:1")
    patched, answer = await hook.admit(obj)
    assert obj == patched
    assert "patch" not in answer


async def test_a_hung_registry_is_given_up_at_the_webhook_deadline(start: Start) -> None:
    """A lookup that never ends leaves the pod unchanged after resolveDeadlineSeconds (0.5 s)."""
    never = asyncio.Event()

    async def hangs(image: str, pull: PullSecretsRef) -> frozenset[Platform]:
        await never.wait()
        raise AssertionError("unreachable")

    hook = await start(resolver=FunctionResolver(hangs))
    with capture_logs() as logs:
        _, answer = await hook.admit(pod("acme/amd:1"))
    # An answer at all means the lookup was given up; the reason names the deadline it was
    # given up at: this setting's, not the default (read off the log, not a clock, so a
    # loaded machine cannot turn it red).
    assert 0.5 != WebhookSettings().resolve_deadline_seconds
    [unknown] = [e for e in logs if e["event"] == "image_platforms_unknown"]
    assert "slower than the 0.5 s deadline" in unknown["error"]
    assert "patch" not in answer


async def test_malformed_reviews_get_a_400_that_names_the_problem(start: Start) -> None:
    """With failurePolicy Ignore the API server admits the pod; the error is for the log."""
    hook = await start()
    assert {"error": "request.uid must be a non-empty string"} == await hook.call(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"kind": {}}},
        status=400,
    )
    answer = await hook.call(b"{not json", status=400)
    assert answer["error"].startswith("body is not valid JSON")


async def test_archfits_own_failure_allows_the_pod_unchanged(start: Start) -> None:
    """An internal error never denies a pod: allowed, no patch, logged at error."""
    hook = await start(nodes=StaticNodes(node("amd64-a", "amd64"), broken="node index broke"))
    _, answer = await hook.admit(pod("acme/amd:1"))
    assert {"uid": "u-1", "allowed": True} == answer


async def test_the_node_indexs_platforms_join_the_configured_ones(start: Start) -> None:
    """A cluster that also has s390x nodes: an amd64-only pod is kept off them too."""
    TABLE["acme/amd-s390x:1"] = TABLE["acme/multi:1"]  # amd64 + arm64
    hook = await start(nodes=StaticNodes(node("z-1", "s390x")))
    patched, _ = await hook.admit(pod("acme/amd-s390x:1"))
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert ["amd64", "arm64"] == terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    del TABLE["acme/amd-s390x:1"]


async def test_dry_run_mode_annotates_but_adds_no_constraint(start: Start) -> None:
    """policy.mode dry-run: the annotation explains what the pod runs on; nothing else."""
    hook = await start(policy={"mode": "dry-run"})
    obj = pod("acme/amd:1")
    patched, _ = await hook.admit(obj)
    assert obj["spec"] == patched["spec"]
    assert "linux/amd64" == patched["metadata"]["annotations"]["archfit.io/platforms"]


async def test_a_rotated_certificate_is_served_without_a_restart(
    start: Start, tmp_path: Path
) -> None:
    """New files, one reload: the next handshake presents the new certificate from a new CA."""
    hook = await start()
    await hook.call(review(pod("acme/multi:1")))
    rotated = make_serving_cert(tmp_path / "rotated")
    hook.cert.cert.write_bytes(rotated.cert.read_bytes())
    hook.cert.key.write_bytes(rotated.key.read_bytes())
    assert hook.app[WEBHOOK_CERTIFICATE].reload()
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await hook.call(review(pod("acme/multi:1")))  # the old CA no longer matches
    hook.cert = rotated
    assert True is (await hook.call(review(pod("acme/multi:1"))))["response"]["allowed"]


async def test_a_half_written_certificate_keeps_the_old_one_in_use(
    start: Start, tmp_path: Path
) -> None:
    """A new certificate beside the old key fails to load; the listener keeps serving."""
    hook = await start()
    hook.cert.cert.write_bytes(make_serving_cert(tmp_path / "other").cert.read_bytes())
    assert False is hook.app[WEBHOOK_CERTIFICATE].reload()
    assert True is (await hook.call(review(pod("acme/multi:1"))))["response"]["allowed"]


async def test_readyz_reports_the_webhook_certificate(start: Start) -> None:
    """Without certificate files the app is not ready, and /readyz says why."""
    missing = await start(webhook={"certFile": "/nonexistent/tls.crt"})
    response = await missing.client.get("/readyz")
    assert 503 == response.status
    assert {"started": True, "webhookCertificate": False} == (await response.json())["checks"]
    ready = await (await start()).client.get("/readyz")
    assert (200, True) == (ready.status, (await ready.json())["checks"]["webhookCertificate"])


async def test_admissions_are_counted_by_outcome(start: Start) -> None:
    """archfit_admission_reviews_total and archfit_admission_changes_total."""
    hook = await start()
    await hook.admit(pod("acme/amd:1"))
    await hook.admit(pod("acme/multi:1", "acme/down:1"))
    text = hook.app[METRICS].render().decode()
    assert 'archfit_admission_reviews_total{outcome="mutated"} 1.0' in text
    assert 'archfit_admission_reviews_total{outcome="unknown"} 1.0' in text
    assert 'archfit_admission_changes_total{change="required_affinity"} 1.0' in text


async def test_a_server_side_dry_run_request_gets_the_full_patch(start: Start) -> None:
    """kubectl create --dry-run=server shows what archfit would write (sideEffects: None)."""
    hook = await start()
    body = review(pod("acme/amd:1"))
    body["request"]["dryRun"] = True
    answer = (await hook.call(body))["response"]
    patch = orjson.loads(base64.b64decode(answer["patch"]))
    assert ["/metadata/annotations", "/spec/affinity"] == [op["path"] for op in patch]


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def test_the_webhook_admits_deeply_nested_pods_unchanged_without_an_error(start: Start):
    """A deep skip annotation or nodeAffinity leaves the pod unchanged, and logs no error."""
    hook = await start()
    skip = pod("acme/amd:1", annotations={"archfit.io/skip": _nested(900)})
    affinity = pod("acme/amd:1")
    affinity["spec"]["affinity"] = {"nodeAffinity": {"x": _nested(900)}}
    with capture_logs() as logs:
        answers = [
            (await hook.call(json.dumps(review(obj)).encode()))["response"]
            for obj in (skip, affinity)
        ]
    assert [True, True] == [a["allowed"] for a in answers]
    assert [False, False] == ["patch" in a for a in answers]
    assert [] == [e for e in logs if e["log_level"] in ("error", "critical")]


_BIG = b'"g":123456789012345678901234,'  # takes the standard library's parser


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (orjson.dumps(review(pod("acme/amd:1", name="MARK"))), "body is not UTF-8"),
        (orjson.dumps(review(pod("MARK"))).replace(b"{", b"{" + _BIG, 1), "body is not UTF-8"),
        (
            orjson.dumps(review(pod("acme/amd:1", name="MARK"))).replace(b"{", b"{" + _BIG, 1),
            "not a Unicode character",
        ),
    ],
    ids=["invalid bytes", "invalid bytes beside a big integer", "a lone surrogate escape"],
)
async def test_a_review_that_is_not_utf8_gets_a_400_and_a_warning(
    start: Start, body: bytes, problem: str
) -> None:
    """Bytes that are not UTF-8, or an escape of half a character, are the client's mistake."""
    body = body.replace(b"MARK", b"web-\xff\xfe" if "UTF-8" in problem else b"web-\\ud800", 1)
    hook = await start()
    with capture_logs() as logs:
        answer = await hook.call(body, status=400)
    assert problem in answer["error"]
    assert [] == [e for e in logs if e["log_level"] in ("error", "critical")]


@pytest.mark.parametrize(
    ("policy", "annotation", "required"),
    [
        ({}, "linux/amd64,linux/arm/v7", [["amd64"]]),
        ({"arm32OnArm64": "pull-rule"}, "linux/amd64,linux/arm/v7,linux/arm64", []),
    ],
    ids=["default", "pull-rule"],
)
async def test_a_32_bit_arm_build_never_adds_an_arm64_preference_and_the_annotation_agrees(
    start: Start, policy: dict[str, str], annotation: str, required: list[list[str]]
) -> None:
    """amd64 + arm/v7: arm64 is allowed only under pull-rule, never preferred, and
    `archfit.io/platforms` names what the constraint allows."""
    hook = await start(policy=policy)
    patched, _ = await hook.admit(pod("acme/amd-v7:1"))
    node_affinity = patched["spec"].get("affinity", {}).get("nodeAffinity", {})
    terms = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    assert (annotation, required, None) == (
        patched["metadata"]["annotations"]["archfit.io/platforms"],
        [t["matchExpressions"][0]["values"] for t in terms.get("nodeSelectorTerms", [])],
        node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
    )


@pytest.mark.parametrize(
    ("terms", "outcome"),
    [([None], "conflict"), ([5], "skipped"), ([{"matchExpressions": [None]}], "mutated")],
    ids=["null-term", "number-term", "null-expression"],
)
async def test_wrong_typed_affinity_is_never_counted_as_archfits_own_error(
    start: Start, terms: list[Any], outcome: str
) -> None:
    """A null term is Go's empty term; a number is an unreadable pod; neither is `error`."""
    hook = await start()
    obj = pod("acme/amd:1")
    obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    await hook.admit(obj)
    text = hook.app[METRICS].render().decode()
    counted = f'archfit_admission_reviews_total{{outcome="{outcome}"}} 1.0' in text
    assert (True, False) == (counted, 'outcome="error"' in text)


async def test_the_pull_rule_for_32_bit_arm_holds_when_the_node_index_adds_platforms(
    start: Start,
) -> None:
    """`arm32OnArm64: pull-rule` with s390x nodes in the index: arm64 still runs the arm/v7
    build (the cluster's platforms join the rules without resetting the pull rule)."""
    hook = await start(
        policy={"arm32OnArm64": "pull-rule"}, nodes=StaticNodes(node("z-1", "s390x"))
    )
    patched, _ = await hook.admit(pod("acme/amd-v7:1"))
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert (
        "linux/amd64,linux/arm/v7,linux/arm64",
        [["amd64", "arm64"]],
    ) == (
        patched["metadata"]["annotations"]["archfit.io/platforms"],
        [t["matchExpressions"][0]["values"] for t in terms["nodeSelectorTerms"]],
    )


async def test_a_pod_the_admission_policy_held_is_released_once_the_webhook_knows_its_images(
    start: Start,
) -> None:
    """kube-apiserver runs archfit's policy before its webhook: a hold the policy put on an
    image it did not know goes (gate, label, reason) when the webhook decides the pod."""
    hook = await start()
    held = pod("acme/amd:1")
    held["metadata"]["labels"] = {"app": "shop", "archfit.io/gated": "true"}
    held["metadata"]["annotations"] = {"archfit.io/gated-reason": "platforms unknown to the policy"}
    held["spec"]["schedulingGates"] = [
        {"name": "other/gate"},
        {"name": "archfit.io/platforms-unknown"},
    ]
    patched, _ = await hook.admit(held)
    assert [{"name": "other/gate"}] == patched["spec"]["schedulingGates"]
    assert {"app": "shop"} == patched["metadata"]["labels"]
    assert "archfit.io/gated-reason" not in patched["metadata"]["annotations"]
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]] == [
        t["matchExpressions"] for t in terms
    ]
