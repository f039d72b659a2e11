"""Render the shipped manifests with real kustomize and helm, into plain objects.

The tools come from tests/deploy/build-tools.sh (Go modules, cached outside the
clone). YAML is read strictly: a duplicate key is an error here, as it is for
kubectl and the apiserver's strict field validation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.support.prerequisites import BuildFailed, last_line, run_build

REPO = Path(__file__).resolve().parents[2]
BUILD_TOOLS = Path(__file__).resolve().parent / "build-tools.sh"
KUSTOMIZE_BASE = REPO / "deploy" / "kustomize" / "base"
KUSTOMIZE_SECOND_SCHEDULER = REPO / "deploy" / "kustomize" / "second-scheduler"
KUSTOMIZE_WEBHOOK = REPO / "deploy" / "kustomize" / "webhook"
KUSTOMIZE_POLICY = REPO / "deploy" / "kustomize" / "admission-policy"
HELM_CHART = REPO / "deploy" / "helm" / "archfit"
SHIPPED_SCHEDULER_CONFIG = REPO / "config" / "scheduler-config.yaml"

#: The kube-apiserver version tests/e2e/build.sh builds; helm renders for it.
KUBE_VERSION = "v1.36.3"
NAMESPACE = "archfit-system"
RELEASE = "archfit"
#: A cold build of helm takes a couple of minutes on 2 cores; a hung one must not stall CI.
BUILD_TIMEOUT_SECONDS = 30 * 60

Object = dict[str, Any]


#: build-tools.sh's exit status when the cache is cold and there is no Go to fill it.
NO_GO_STATUS = 2


def build_tool(name: str) -> Path:
    """Run build-tools.sh for one tool (a no-op when cached) and return its binary."""

    def missing(done: subprocess.CompletedProcess[str]) -> str | None:
        if done.returncode != NO_GO_STATUS or shutil.which("go") is not None:
            return None
        return (
            f"tests/deploy needs Go >= 1.26 on PATH to build {name} "
            f"({BUILD_TOOLS.relative_to(REPO)}); install Go from https://go.dev/dl/ and re-run"
        )

    done = run_build(["bash", BUILD_TOOLS, name], BUILD_TIMEOUT_SECONDS, missing)
    binary = Path(last_line(done.stdout))
    if not os.access(binary, os.X_OK):
        raise BuildFailed(f"{BUILD_TOOLS} printed {binary} but it is not an executable")
    return binary


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate mapping keys."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Object:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return dict(loader.construct_mapping(node, deep=deep))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_strict(text: str) -> Any:
    """One YAML document, duplicate keys refused."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass


def load_all_strict(text: str) -> list[Object]:
    """Every non-empty document of a multi-document stream, duplicate keys refused."""
    return [doc for doc in yaml.load_all(text, Loader=_StrictLoader) if doc]


def _run(argv: Sequence[str | os.PathLike[str]]) -> str:
    done = subprocess.run(
        [os.fspath(a) for a in argv], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def kustomize_build(kustomize: Path, directory: Path) -> list[Object]:
    """`kustomize build directory`, as objects."""
    return load_all_strict(kustomize_output(kustomize, directory))


def kustomize_output(kustomize: Path, directory: Path) -> str:
    """`kustomize build directory`, as it prints it."""
    return _run([kustomize, "build", directory])


def helm_template(
    helm: Path,
    values: Mapping[str, Any] | None = None,
    tmp_dir: Path | None = None,
    *,
    api_versions: Sequence[str] = (),
    namespace: str = NAMESPACE,
) -> list[Object]:
    """`helm template` of the chart as release `archfit` in `namespace`, for KUBE_VERSION.

    `api_versions` are what a cluster's discovery would add to helm's built-in list (which
    names group/versions only, no kinds), e.g. `admissionregistration.k8s.io/v1/
    MutatingAdmissionPolicy`.
    """
    return load_all_strict(
        helm_output(helm, values, tmp_dir, api_versions=api_versions, namespace=namespace)
    )


def helm_output(
    helm: Path,
    values: Mapping[str, Any] | None = None,
    tmp_dir: Path | None = None,
    *,
    api_versions: Sequence[str] = (),
    namespace: str = NAMESPACE,
) -> str:
    """`helm template` of the chart, as it prints it (helm_template's arguments)."""
    argv: list[str | os.PathLike[str]] = [
        helm,
        "template",
        RELEASE,
        HELM_CHART,
        "--namespace",
        namespace,
        "--kube-version",
        KUBE_VERSION,
    ]
    for version in api_versions:
        argv += ["--api-versions", version]
    if values:
        assert tmp_dir is not None, "values need a directory for their file"
        values_file = tmp_dir / "values.yaml"
        values_file.write_text(yaml.safe_dump(dict(values)))
        argv += ["--values", values_file]
    return _run(argv)


def helm_notes(helm: Path, values: Mapping[str, Any] | None, tmp_dir: Path) -> str:
    """NOTES.txt as `helm install` would print it for `values`.

    `helm template` never renders NOTES.txt, and `helm install --dry-run` needs a cluster for
    the chart's kubeVersion; so a copy of the chart renders it through `tpl` as a template of
    its own, with the same values, release and Kubernetes version.
    """
    chart = tmp_dir / "chart"
    shutil.copytree(HELM_CHART, chart)
    (chart / "notes-source.txt").write_text((HELM_CHART / "templates" / "NOTES.txt").read_text())
    (chart / "templates" / "notes-rendered.yaml").write_text(
        'notes: {{ tpl (.Files.Get "notes-source.txt") . | toJson }}\n'
    )
    argv: list[str | os.PathLike[str]] = [
        helm, "template", RELEASE, chart, "--namespace", NAMESPACE, "--kube-version",
        KUBE_VERSION, "--show-only", "templates/notes-rendered.yaml",
    ]  # fmt: skip
    if values:
        values_file = tmp_dir / "notes-values.yaml"
        values_file.write_text(yaml.safe_dump(dict(values)))
        argv += ["--values", values_file]
    notes: str = load_strict(_run(argv))["notes"]
    return notes


def key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name) of an object."""
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def one(objects: Iterable[Object], kind: str, name: str | None = None) -> Object:
    """The single object of this kind (and name, or name prefix for generated ConfigMaps)."""
    found = [
        o
        for o in objects
        if o["kind"] == kind
        and (
            name is None
            or o["metadata"]["name"] == name
            or generated_base_name(o["metadata"]["name"]) == name
        )
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[key(o) for o in found]}"
    return found[0]


def generated_base_name(name: str) -> str:
    """A kustomize configMapGenerator name without its content-hash suffix."""
    head, _, tail = name.rpartition("-")
    return head if head and len(tail) == 10 and tail.isalnum() else name


def config_file(config_map: Mapping[str, Any], filename: str) -> Any:
    """A YAML file held in a ConfigMap, parsed strictly."""
    data = config_map.get("data") or {}
    assert filename in data, f"ConfigMap {config_map['metadata']['name']} has no {filename}"
    return load_strict(data[filename])


def pod_specs(objects: Iterable[Object]) -> list[tuple[str, Object]]:
    """(Deployment name, pod template spec) of every Deployment."""
    return [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in objects
        if o["kind"] == "Deployment"
    ]
