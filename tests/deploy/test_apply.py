"""The shipped manifests apply as shipped to a real kube-apiserver, and the second
scheduler they describe runs with exactly the RBAC they grant.

Every rendered object goes through server-side apply with `dryRun=All` and strict
field validation; the archfit-system Namespace (restricted Pod Security labels) is
created for real first, so PodSecurity admission judges every pod template.
"""

from __future__ import annotations

import copy
import json
import os
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import render
from tests.deploy.apiserver import ApiError, ApiServer, token_kubeconfig
from tests.deploy.render import Object, config_file, key, one
from tests.e2e import cluster
from tests.e2e.archfit import Archfit
from tests.e2e.controlplane import Binaries, ControlPlane
from tests.e2e.processes import Process, http_ok
from tests.support.process import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

ALL = [
    "base",
    "overlay",
    "webhook_overlay",
    "policy_overlay",
    "chart",
    "chart_with_scheduler",
    "chart_with_webhook",
    "chart_with_policy",
]
RBAC_KINDS = {
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
}


@pytest.fixture(scope="module")
def archfit_namespace(apiserver: ApiServer, base: list[Object]) -> str:
    """The base's Namespace, created for real: dry-run objects need their namespace."""
    namespace = one(base, "Namespace", render.NAMESPACE)
    apiserver.apply(namespace, dry_run=True)
    apiserver.apply(namespace, dry_run=False)
    return render.NAMESPACE


def _dropped(ours: Any, theirs: Any, where: str = "") -> list[str]:
    """Paths of what we set that the apiserver's answer lacks or changed."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [where or "/"]
        return [p for k, v in ours.items() for p in _dropped(v, theirs.get(k), f"{where}.{k}")]
    if isinstance(ours, list):
        if not isinstance(theirs, list) or len(ours) != len(theirs):
            return [where]
        return [
            p
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for p in _dropped(a, b, f"{where}[{i}]")
        ]
    return [] if ours == theirs else [f"{where}: {ours!r} became {theirs!r}"]


def dry_run_problems(
    apiserver: ApiServer, objects: list[Object]
) -> tuple[list[str], list[str], list[str]]:
    """(errors, warnings, dropped fields) of a strict server-side dry-run apply of each object."""
    errors: list[str] = []
    warnings: list[str] = []
    dropped: list[str] = []
    for obj in objects:
        try:
            answer = apiserver.apply(obj)
        except ApiError as error:
            errors.append(str(error))
            continue
        warnings += [f"{key(obj)}: {w}" for w in answer.warnings]
        dropped += [f"{key(obj)}{p}" for p in _dropped(obj, answer.body)]
    return errors, warnings, dropped


@pytest.mark.parametrize("name", ALL)
def test_every_rendered_object_applies_with_a_server_side_dry_run_without_warnings(
    request: pytest.FixtureRequest, apiserver: ApiServer, archfit_namespace: str, name: str
) -> None:
    """Strict server-side dry-run apply takes every object, keeps every field, warns nothing."""
    objects: list[Object] = request.getfixturevalue(name)
    assert ([], [], []) == dry_run_problems(apiserver, objects)
    assert len(objects) >= 7  # the render produced the objects, not an empty stream


def test_a_pod_template_that_breaks_the_restricted_standard_draws_a_warning(
    apiserver: ApiServer, archfit_namespace: str, base: list[Object]
) -> None:
    """The no-warnings check has teeth: a root-capable container is reported by PodSecurity."""
    deployment = copy.deepcopy(one(base, "Deployment", "archfit"))
    spec = deployment["spec"]["template"]["spec"]
    del spec["securityContext"]
    for container in spec["containers"]:
        del container["securityContext"]
    warnings = apiserver.apply(deployment).warnings
    assert any('violate PodSecurity "restricted' in w for w in warnings), warnings


def test_a_misspelt_field_is_refused_by_the_dry_run(
    apiserver: ApiServer, archfit_namespace: str, base: list[Object]
) -> None:
    """The dry run validates strictly: an unknown field is an error, not a dropped key."""
    deployment = copy.deepcopy(one(base, "Deployment", "archfit"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(ApiError, match="readinesProbe"):
        apiserver.apply(deployment)


@pytest.fixture(scope="module")
def rbac_applied(
    apiserver: ApiServer,
    archfit_namespace: str,
    overlay: list[Object],
    webhook_overlay: list[Object],
) -> None:
    """The overlays' Namespace, ServiceAccounts and RBAC, applied for real."""
    for obj in [*overlay, *webhook_overlay]:
        if obj["kind"] in RBAC_KINDS:
            apiserver.apply(obj, dry_run=False)


def _allowed(
    apiserver: ApiServer,
    user: str,
    namespace: str,
    verb: str,
    resource: str,
    name: str = "some-name",
    group: str = "",
) -> bool:
    service_account_namespace = user.split(":")[2]
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{service_account_namespace}",
                "system:authenticated",
            ],
            "resourceAttributes": {
                "namespace": namespace,
                "verb": verb,
                "group": group,
                "resource": resource,
                "name": name if verb in ("get", "update", "patch", "list", "watch") else "",
            },
        },
    }
    answer = apiserver.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer.body["status"].get("allowed", False))


def test_archfits_service_account_may_watch_nodes_and_get_pull_secrets_but_not_list_them(
    apiserver: ApiServer, rbac_applied: None
) -> None:
    """The ClusterRole as applied grants the node index and named pull secrets, no more."""
    user = f"system:serviceaccount:{render.NAMESPACE}:archfit"
    expected = {
        ("", "get", "nodes"): True,
        ("", "list", "nodes"): True,
        ("", "watch", "nodes"): True,
        ("team-a", "get", "secrets"): True,
        ("team-a", "get", "serviceaccounts"): True,
        ("", "update", "nodes"): False,
        ("team-a", "list", "secrets"): False,
        ("team-a", "watch", "secrets"): False,
        ("team-a", "delete", "pods"): False,
    }
    assert expected == {ask: _allowed(apiserver, user, *ask) for ask in expected}


def _kubeconfig(
    path: Path, control_plane: ControlPlane, token: str, namespace: str = render.NAMESPACE
) -> Path:
    assert control_plane.certs is not None
    return token_kubeconfig(
        path, control_plane.server, control_plane.certs.ca_cert, token, namespace
    )


@pytest.fixture
def second_scheduler(
    e2e_binaries: Binaries,
    control_plane: ControlPlane,
    apiserver: ApiServer,
    rbac_applied: None,
    overlay: list[Object],
    tmp_path: Path,
) -> Iterator[Process]:
    """kube-scheduler with the overlay's config, as the overlay's ServiceAccount."""
    spec = one(overlay, "Deployment", "archfit-scheduler")["spec"]["template"]["spec"]
    token = apiserver.service_account_token(render.NAMESPACE, spec["serviceAccountName"])
    kubeconfig = _kubeconfig(tmp_path / "archfit-scheduler.kubeconfig", control_plane, token)
    # In a pod the scheduler uses its in-cluster identity; here that is the token.
    document = config_file(
        one(overlay, "ConfigMap", "archfit-scheduler-config"), "scheduler-config.yaml"
    )
    document["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    config_path = tmp_path / "scheduler-config.yaml"
    config_path.write_text(yaml.safe_dump(document))
    (container,) = spec["containers"]
    flags = [f for f in container["command"][1:] if not f.startswith("--config=")]
    port = free_port()
    process = Process(
        "archfit-scheduler",
        [
            e2e_binaries.kube_scheduler,
            f"--config={config_path}",
            *flags,
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
        ],
        tmp_path,
    )
    process.start()
    try:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its serving cert is self-signed, on loopback
        process.wait_ready(lambda: http_ok(f"https://127.0.0.1:{port}/readyz", context))
        yield process
    finally:
        process.stop()


def test_the_second_scheduler_leads_and_binds_a_pod_with_only_the_rbac_it_ships(
    second_scheduler: Process,
    apiserver: ApiServer,
    control_plane: ControlPlane,
    overlay: list[Object],
) -> None:
    """It takes its lease, asks the extender and binds a pod naming it, with nothing forbidden."""
    core = cluster.core_api(control_plane.admin_kubeconfig)
    (extender,) = config_file(
        one(overlay, "ConfigMap", "archfit-scheduler-config"), "scheduler-config.yaml"
    )["extenders"]
    url_prefix = extender["urlPrefix"]
    namespace = f"deploy-second-scheduler-{os.getpid()}"
    cluster.create_namespace(core, namespace)
    try:
        lease = wait_for(
            lambda: (
                apiserver.request(
                    "GET",
                    f"/apis/coordination.k8s.io/v1/namespaces/{render.NAMESPACE}/leases/"
                    "archfit-scheduler",
                )
                .body["spec"]
                .get("holderIdentity")
            ),
            "archfit-scheduler to take its lease",
        )
        manifest = cluster.pod_manifest("bound-by-archfit-scheduler", ["registry.invalid/app:1"])
        manifest["spec"]["schedulerName"] = "archfit-scheduler"
        pod = cluster.create_pod(core, namespace, manifest)
        node = cluster.wait_scheduled(core, namespace, pod)
    finally:
        cluster.delete_namespace_pods(core, namespace)
    log = second_scheduler.log_tail(100_000).splitlines()
    # No archfit runs here: the call to the Service's name fails, and ignorable lets it pass.
    called = [line for line in log if f"{url_prefix}/filter" in line and pod in line]
    assert lease
    assert node in {n.metadata.name for n in core.list_node().items}
    assert called, f"no filter call to {url_prefix} for {pod}; log {second_scheduler.log_path}"
    assert [] == [line for line in log if "forbidden" in line.lower()], second_scheduler.log_path


@pytest.mark.parametrize("name", ["overlay", "chart_with_scheduler"])
def test_kube_scheduler_accepts_the_scheduler_config_as_rendered(
    request: pytest.FixtureRequest, e2e_binaries: Binaries, tmp_path: Path, name: str
) -> None:
    """kube-scheduler v1.36.3 decodes it strictly, validates it and keeps the extender as is."""
    objects: list[Object] = request.getfixturevalue(name)
    document = config_file(
        one(objects, "ConfigMap", "archfit-scheduler-config"), "scheduler-config.yaml"
    )
    # Outside a pod the in-cluster client config is missing; the server is never contacted.
    kubeconfig = tmp_path / "unused.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "x", "user": {"token": "unused"}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
                "current-context": "x",
            }
        )
    )
    given = {**document, "clientConnection": {"kubeconfig": str(kubeconfig)}}
    (tmp_path / "in.yaml").write_text(yaml.safe_dump(given))
    done = subprocess.run(
        [
            e2e_binaries.kube_scheduler,
            f"--config={tmp_path / 'in.yaml'}",
            f"--write-config-to={tmp_path / 'out.yaml'}",
            "--secure-port=0",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-3000:]
    effective = yaml.safe_load((tmp_path / "out.yaml").read_text())
    assert document["extenders"] == effective["extenders"]
    assert ["archfit-scheduler"] == [p["schedulerName"] for p in effective["profiles"]]
    assert 100 == effective["percentageOfNodesToScore"]


def test_kube_scheduler_refuses_a_config_with_a_misspelt_extender_field(
    e2e_binaries: Binaries, overlay: list[Object], tmp_path: Path
) -> None:
    """The acceptance check has teeth: strict decoding rejects `ignorabel`."""
    document = config_file(
        one(overlay, "ConfigMap", "archfit-scheduler-config"), "scheduler-config.yaml"
    )
    document["extenders"][0]["ignorabel"] = document["extenders"][0].pop("ignorable")
    (tmp_path / "in.yaml").write_text(yaml.safe_dump(document))
    done = subprocess.run(
        [
            e2e_binaries.kube_scheduler,
            f"--config={tmp_path / 'in.yaml'}",
            f"--write-config-to={tmp_path / 'out.yaml'}",
            "--secure-port=0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (1, True) == (done.returncode, "ignorabel" in done.stderr), done.stderr[-3000:]


# A release of its own: helm refuses to adopt the objects other tests applied for real.
NOTES_RELEASE = "archfit-notes"


def _install_notes(helm: Path, control_plane: ControlPlane, namespace: str, *flags: str) -> str:
    """The NOTES of `helm install --dry-run=client` of the chart, with extra flags."""
    done = subprocess.run(
        [
            helm, "install", NOTES_RELEASE, render.HELM_CHART, "--namespace", namespace,
            "--dry-run=client", "--kubeconfig", control_plane.admin_kubeconfig, *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr[-3000:]
    return done.stdout.split("NOTES:", 1)[1]


@pytest.mark.parametrize("namespace", [render.NAMESPACE, "team-x"], ids=["own", "other"])
def test_helm_install_notes_give_the_url_prefix_and_the_namespaces_left_alone(
    helm: Path, control_plane: ControlPlane, namespace: str
) -> None:
    """`helm install --dry-run` renders NOTES with the urlPrefix and the namespaces archfit
    leaves alone, its own among them whatever it is called."""
    release = NOTES_RELEASE
    notes = _install_notes(helm, control_plane, namespace)
    assert f"http://{release}.{namespace}.svc:8888/scheduler" in notes
    # A host-network (kubeadm) scheduler cannot resolve that name: the ClusterIP way is shown.
    assert (
        f"kubectl -n {namespace} get service {release} -o jsonpath='{{.spec.clusterIP}}'" in notes
    )
    assert 'archfit scheduler-config --url "http://$ip:8888/scheduler"' in notes
    left_alone = notes.split("Pods in ", 1)[1].split("\nand in namespaces labelled", 1)[0]
    assert {namespace, "kube-system", "karpenter"} <= set(left_alone.rstrip(",").split(", "))


@pytest.mark.parametrize("webhook", [False, True], ids=["extender", "webhook"])
def test_helm_install_notes_say_how_to_uninstall_without_stranding_held_pods(
    helm: Path, control_plane: ControlPlane, webhook: bool
) -> None:
    """Unregister the extender first; with the webhook, the hook runs `archfit uninstall`."""
    flags = ["--set", f"webhook.enabled={str(webhook).lower()}"]
    notes = " ".join(_install_notes(helm, control_plane, render.NAMESPACE, *flags).split())
    told = {
        "unregister first": "first remove archfit from each kube-scheduler's extenders" in notes,
        "helm uninstall": f"helm uninstall {NOTES_RELEASE} -n {render.NAMESPACE}" in notes,
        "the hook releases": "pre-delete hook runs `archfit uninstall`" in notes,
    }
    assert {"unregister first": True, "helm uninstall": True, "the hook releases": webhook} == told


def _shipped_settings_as_service_account(
    apiserver: ApiServer, control_plane: ControlPlane, objects: list[Object], tmp_path: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(archfit.yaml from the ConfigMap, the pod spec), with API access as the pod's account.

    Outside a pod the in-cluster identity is a token for its ServiceAccount; everything
    else is as shipped.
    """
    spec = one(objects, "Deployment", "archfit")["spec"]["template"]["spec"]
    token = apiserver.service_account_token(render.NAMESPACE, spec["serviceAccountName"])
    kubeconfig = _kubeconfig(tmp_path / "archfit.kubeconfig", control_plane, token)
    settings = config_file(one(objects, "ConfigMap", "archfit-config"), "archfit.yaml")
    settings["kubernetes"] |= {"mode": "kubeconfig", "kubeconfig": str(kubeconfig)}
    return settings, spec


def test_archfit_with_the_shipped_config_and_rbac_indexes_the_nodes_and_turns_ready(
    apiserver: ApiServer,
    control_plane: ControlPlane,
    rbac_applied: None,
    base: list[Object],
    tmp_path: Path,
) -> None:
    """`archfit serve` with the ConfigMap's settings, as its ServiceAccount, indexes Nodes."""
    settings, _ = _shipped_settings_as_service_account(apiserver, control_plane, base, tmp_path)
    archfit = Archfit(tmp_path, settings).start()  # waits for /readyz 200
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{archfit.port}/readyz") as response:
            ready = json.loads(response.read())
    finally:
        archfit.stop()
    log = archfit.process.log_tail(100_000)
    assert {"ready": True, "checks": {"started": True, "nodeIndexSynced": True}} == ready
    assert "forbidden" not in log.lower(), archfit.process.log_path


def test_the_webhooks_rbac_reaches_its_own_secret_and_configuration_and_nothing_more(
    apiserver: ApiServer, rbac_applied: None
) -> None:
    """The self-managed certificate needs one Secret and one caBundle; others stay closed."""
    user = f"system:serviceaccount:{render.NAMESPACE}:archfit"
    admission = "admissionregistration.k8s.io"
    hooks = "mutatingwebhookconfigurations"
    expected = {
        (render.NAMESPACE, "update", "secrets", "archfit-webhook-tls", ""): True,
        (render.NAMESPACE, "create", "secrets", "", ""): True,
        ("", "get", hooks, "archfit", admission): True,
        ("", "patch", hooks, "archfit", admission): True,
        ("", "watch", hooks, "archfit", admission): True,
        ("", "watch", hooks, "", admission): False,
        (render.NAMESPACE, "update", "secrets", "other", ""): False,
        ("team-a", "create", "secrets", "", ""): False,
        ("", "patch", hooks, "someone-elses", admission): False,
        ("", "update", "validatingwebhookconfigurations", "archfit", admission): False,
    }
    assert expected == {ask: _allowed(apiserver, user, *ask) for ask in expected}


def test_the_releasers_rbac_reaches_held_pods_events_and_its_own_lease_and_nothing_more(
    apiserver: ApiServer, rbac_applied: None
) -> None:
    """Pods anywhere (read, watch, patch), Events, and one Lease in archfit's namespace."""
    user = f"system:serviceaccount:{render.NAMESPACE}:archfit"
    leases, events = "coordination.k8s.io", "events.k8s.io"
    expected = {
        ("", "list", "pods", "", ""): True,
        ("", "watch", "pods", "", ""): True,
        ("team-a", "get", "pods", "held", ""): True,
        ("team-a", "patch", "pods", "held", ""): True,
        ("team-a", "create", "events", "", ""): True,
        ("team-a", "patch", "events", "held.1", ""): True,
        ("team-a", "create", "events", "", events): True,
        ("team-a", "patch", "events", "held.1", events): True,
        (render.NAMESPACE, "get", "leases", "archfit-releaser", leases): True,
        (render.NAMESPACE, "patch", "leases", "archfit-releaser", leases): True,
        (render.NAMESPACE, "create", "leases", "", leases): True,
        ("team-a", "update", "pods", "held", ""): False,
        ("team-a", "delete", "pods", "held", ""): False,
        ("team-a", "create", "pods", "", ""): False,
        ("team-a", "delete", "events", "held.1", ""): False,
        (render.NAMESPACE, "patch", "leases", "archfit-scheduler", leases): False,
        ("team-a", "create", "leases", "", leases): False,
    }
    assert expected == {ask: _allowed(apiserver, user, *ask) for ask in expected}


def test_the_webhooks_steering_rbac_lists_and_watches_namespaces_and_pods_and_nothing_more(
    apiserver: ApiServer, rbac_applied: None
) -> None:
    """Namespace preferences and the arm64 share read two watches; no write, no secret."""
    user = f"system:serviceaccount:{render.NAMESPACE}:archfit"
    expected = {
        ("", "list", "namespaces"): True,
        ("", "watch", "namespaces"): True,
        ("", "list", "pods"): True,
        ("", "watch", "pods"): True,
        ("", "update", "namespaces", "team-a"): False,
        ("", "patch", "namespaces", "team-a"): False,
        ("", "delete", "namespaces", "team-a"): False,
        ("team-a", "list", "secrets"): False,
        ("team-a", "create", "pods"): False,
    }
    assert expected == {ask: _allowed(apiserver, user, *ask) for ask in expected}


def test_archfit_with_the_webhook_overlay_makes_its_certificate_and_sets_the_ca_bundle(
    apiserver: ApiServer,
    control_plane: ControlPlane,
    rbac_applied: None,
    webhook_overlay: list[Object],
    tmp_path: Path,
) -> None:
    """As its ServiceAccount, with the overlay's env: Secret made, caBundle set, ready."""
    settings, spec = _shipped_settings_as_service_account(
        apiserver, control_plane, webhook_overlay, tmp_path
    )
    (container,) = spec["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    # Outside a pod: no service-account namespace file, no /var/run mount, no fixed port.
    env |= {
        "POD_NAMESPACE": render.NAMESPACE,
        "POD_NAME": "archfit-0",  # the downward API's, in a pod
        "ARCHFIT_WEBHOOK__HOST": "127.0.0.1",
        "ARCHFIT_WEBHOOK__PORT": str(free_port()),
        "ARCHFIT_WEBHOOK__CERT_FILE": str(tmp_path / "tls" / "tls.crt"),
        "ARCHFIT_WEBHOOK__KEY_FILE": str(tmp_path / "tls" / "tls.key"),
    }
    configuration = one(webhook_overlay, "MutatingWebhookConfiguration", "archfit")
    apiserver.apply(configuration, dry_run=False)
    try:
        archfit = Archfit(tmp_path, settings, env={**os.environ, **env}).start()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{archfit.port}/readyz") as response:
                checks = json.loads(response.read())["checks"]
        finally:
            archfit.stop()
        stored = apiserver.request(
            "GET", f"/api/v1/namespaces/{render.NAMESPACE}/secrets/archfit-webhook-tls"
        ).body
        applied = apiserver.request(
            "GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/archfit"
        ).body
    finally:
        apiserver.request(
            "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/archfit"
        )
    assert True is checks["webhookCertificate"]
    assert {"ca.crt", "ca.key", "tls.crt", "tls.key"} == set(stored["data"])
    assert [stored["data"]["ca.crt"]] == [
        w["clientConfig"]["caBundle"] for w in applied["webhooks"]
    ]
    log = archfit.process.log_tail(100_000)
    assert "forbidden" not in log.lower(), archfit.process.log_path


def test_without_the_webhooks_rbac_archfit_keeps_running_unready_and_says_why(
    apiserver: ApiServer,
    control_plane: ControlPlane,
    rbac_applied: None,
    webhook_overlay: list[Object],
    tmp_path: Path,
) -> None:
    """A forbidden Secret is no crash loop: /healthz answers, /readyz names the certificate."""
    namespace = "no-webhook-rbac"
    cluster.create_namespace(cluster.core_api(control_plane.admin_kubeconfig), namespace)
    token = apiserver.service_account_token(
        namespace, "default"
    )  # an account with no rights at all
    kubeconfig = _kubeconfig(tmp_path / "default.kubeconfig", control_plane, token)
    settings = config_file(one(webhook_overlay, "ConfigMap", "archfit-config"), "archfit.yaml")
    settings["kubernetes"] = {"mode": "kubeconfig", "kubeconfig": str(kubeconfig)}
    settings["kubernetes"] |= {"nodeIndex": False, "pullSecrets": False}
    settings["webhook"] = {
        "enabled": True,
        "host": "127.0.0.1",
        "port": free_port(),
        "certFile": str(tmp_path / "tls" / "tls.crt"),
        "keyFile": str(tmp_path / "tls" / "tls.key"),
        "certificate": {"selfManaged": True, "secretNamespace": namespace},
    }
    archfit = Archfit(tmp_path, settings)
    archfit.process.start()
    try:
        base = f"http://127.0.0.1:{archfit.port}"
        archfit.process.wait_ready(lambda: http_ok(f"{base}/healthz"))
        wait_for(
            lambda: "webhook_certificate_failed" in archfit.process.log_tail(100_000),
            "archfit to log why it has no certificate",
        )
        with pytest.raises(urllib.error.HTTPError) as unready:
            urllib.request.urlopen(f"{base}/readyz")  # noqa: S310
        checks = json.loads(unready.value.read())["checks"]
        assert archfit.process.running()
    finally:
        archfit.stop()
    assert (503, False) == (unready.value.code, checks["webhookCertificate"])
