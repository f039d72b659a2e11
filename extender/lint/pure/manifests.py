"""Rendered manifests read for `archfit lint`: every workload of a YAML stream (many documents,
`List` kinds), its pod template and containers, each with the line it is written on.

Pure: text in, workloads out. The YAML is read once by libyaml where it is installed (PyYAML's
C parser), keeping the node tree beside the objects, so a finding can name the file, the
document and the line of the image it is about (SARIF and the table need them).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from extender.audit.pure.workloads import AUDITED_KINDS
from extender.core.pods import PodError, pod_template, read_mapping, template_spec
from extender.errors import InputError

LINT_KINDS = (*AUDITED_KINDS, "ReplicaSet", "PodTemplate")
"""What lint reads a pod template from: every kind the audit knows, a ReplicaSet, a
PodTemplate (`template` at the top)."""
_LIST_KINDS = frozenset({"List"})
"""A kind whose `items` are objects of their own (`kubectl get -o yaml`'s, or `*List`)."""

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Path = tuple[str | int, ...]


class ManifestError(InputError):
    """The text is not YAML, or a document is not an object; the message names the place."""


@dataclass(frozen=True, slots=True)
class Container:
    """One container (or init container) of a pod template, where its image is written."""

    name: str
    image: str
    line: int
    """1-based line of its `image:` (of the container, when it has none)."""
    column: int
    init: bool = False


@dataclass(frozen=True, slots=True)
class WrittenWorkload:
    """One workload of the stream, as written."""

    kind: str
    namespace: str
    name: str
    document: int
    """1-based index of its document in the stream."""
    line: int
    """1-based line where the object starts."""
    spec: Mapping[str, Any]
    """Its pod template's spec."""
    annotations: Mapping[str, str]
    """The workload's own annotations and its pod template's (the template's win)."""
    containers: tuple[Container, ...]

    @property
    def title(self) -> str:
        """`shop/Deployment/api`: how findings name it."""
        return f"{self.namespace or '-'}/{self.kind}/{self.name}"

    def images(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.image for c in self.containers if c.image))


@dataclass(frozen=True, slots=True)
class Skipped:
    """An object of a workload kind that could not be read, and why."""

    document: int
    line: int
    reason: str


def read_stream(text: str) -> tuple[list[WrittenWorkload], list[Skipped]]:
    """Every workload of a multi-document YAML stream, in order, and the objects of a
    workload kind that could not be read. Raises ManifestError for text that is not YAML."""
    workloads: list[WrittenWorkload] = []
    skipped: list[Skipped] = []
    loader = _Loader(text)
    try:
        document = 0
        while loader.check_node():
            node = loader.get_node()
            document += 1
            obj = loader.construct_document(node)
            for found, at in _objects(obj, node, ()):
                _read_object(found, at, document, workloads, skipped)
    except yaml.YAMLError as error:
        raise ManifestError(f"not YAML: {_problem(error)}") from error
    finally:
        loader.dispose()
    return workloads, skipped


def _objects(obj: Any, node: yaml.Node, path: Path) -> Iterator[tuple[Mapping[str, Any], Located]]:
    """The objects of one document: itself, or a List's items (nested Lists too)."""
    if not isinstance(obj, Mapping):
        return
    kind = obj.get("kind")
    items = obj.get("items")
    if isinstance(kind, str) and (kind in _LIST_KINDS or kind.endswith("List")):
        if isinstance(items, list):
            for index, item in enumerate(items):
                yield from _objects(item, node, (*path, "items", index))
        return
    yield obj, Located(node, path)


@dataclass(frozen=True, slots=True)
class Located:
    """An object's node in its document's tree, and its path there (for lines)."""

    root: yaml.Node
    path: Path

    def mark(self, *more: str | int) -> tuple[int, int]:
        """(line, column), 1-based, of the deepest node of `path + more` that exists."""
        node = _walk(self.root, (*self.path, *more))
        return node.start_mark.line + 1, node.start_mark.column + 1


def _walk(node: yaml.Node, path: Sequence[str | int]) -> yaml.Node:
    for step in path:
        found = None
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            found = next((v for k, v in reversed(node.value) if k.value == step), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
            found = node.value[step] if step < len(node.value) else None
        if found is None:
            return node
        node = found
    return node


def _read_object(
    obj: Mapping[str, Any],
    at: Located,
    document: int,
    workloads: list[WrittenWorkload],
    skipped: list[Skipped],
) -> None:
    kind = obj.get("kind")
    if kind not in LINT_KINDS:
        return
    line, _ = at.mark()
    try:
        workloads.append(_workload(str(kind), obj, at, document, line))
    except InputError as error:
        skipped.append(Skipped(document, line, f"{kind}: {error}"))


def _template_path(kind: str) -> Path:
    if kind == "Pod":
        return ()
    if kind == "PodTemplate":
        return ("template",)
    if kind == "CronJob":
        return ("spec", "jobTemplate", "spec", "template")
    return ("spec", "template")


def _workload(
    kind: str, obj: Mapping[str, Any], at: Located, document: int, line: int
) -> WrittenWorkload:
    metadata = read_mapping(obj.get("metadata"), "metadata", ManifestError)
    template = read_mapping(obj.get("template"), "template") if kind == "PodTemplate" else None
    try:
        made = template if template is not None else pod_template(kind, obj)
        spec = (
            read_mapping(made.get("spec"), "template.spec")
            if template is not None
            else template_spec(kind, obj)
        )
    except PodError as error:
        raise ManifestError(str(error)) from error
    annotations = {
        **_annotations(metadata),
        **_annotations(read_mapping(made.get("metadata"), "template.metadata", ManifestError)),
    }
    base = (*_template_path(kind), "spec")
    containers = []
    for key in ("initContainers", "containers"):
        listed = spec.get(key) or []
        if not isinstance(listed, list):
            raise ManifestError(f"{key} must be a list")
        for index, container in enumerate(listed):
            container = read_mapping(container, f"{key}[{index}]", ManifestError)
            image = container.get("image")
            row, column = at.mark(*base, key, index, "image")
            containers.append(
                Container(
                    str(container.get("name") or f"{key}[{index}]"),
                    image.strip() if isinstance(image, str) else "",
                    row,
                    column,
                    init=key == "initContainers",
                )
            )
    return WrittenWorkload(
        kind=kind,
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or metadata.get("generateName") or ""),
        document=document,
        line=line,
        spec=spec,
        annotations=annotations,
        containers=tuple(containers),
    )


def _annotations(metadata: Mapping[str, Any]) -> dict[str, str]:
    found = metadata.get("annotations")
    if not isinstance(found, Mapping):
        return {}
    return {str(k): str(v) for k, v in found.items()}


def _problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    return f"{problem} at line {mark.line + 1}" if mark is not None else str(problem)
