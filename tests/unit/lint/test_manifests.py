"""Rendered manifests as `archfit lint` reads them (extender.lint.pure.manifests): many documents,
List kinds, every workload kind the audit knows, pod templates, and the line of each image."""

from __future__ import annotations

import pytest
import yaml

from extender.lint.pure.manifests import LINT_KINDS, ManifestError, read_stream

STREAM = """\
# a comment before the first document
apiVersion: v1
kind: Service
metadata: {name: api}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: shop
  annotations: {archfit.io/lint-ignore: no-arm64}
spec:
  template:
    metadata:
      annotations: {team: a}
    spec:
      initContainers:
      - name: migrate
        image: acme/migrate:1
      containers:
      - name: api
        image: acme/api:1.2
      - name: proxy
        image: "acme/proxy:3"
---
apiVersion: v1
kind: List
items:
- apiVersion: batch/v1
  kind: CronJob
  metadata: {name: nightly, namespace: jobs}
  spec:
    schedule: "@daily"
    jobTemplate:
      spec:
        template:
          spec:
            containers:
            - name: job
              image: acme/job:7
- apiVersion: v1
  kind: PodTemplate
  metadata: {name: shape}
  template:
    spec:
      containers:
      - {name: c, image: acme/shape:1}
---
"""


def test_every_workload_of_a_stream_is_read_with_its_document_and_lines():
    """A Service is not a workload; a Deployment, a List's CronJob and PodTemplate are, each
    with its document, the line it starts on and the line of each image."""
    workloads, skipped = read_stream(STREAM)
    assert [] == skipped
    assert [
        ("shop/Deployment/api", 2, 6, [("migrate", 19, True), ("api", 22, False),
                                       ("proxy", 24, False)]),
        ("jobs/CronJob/nightly", 3, 29, [("job", 40, False)]),
        ("-/PodTemplate/shape", 3, 41, [("c", 47, False)]),
    ] == [
        (w.title, w.document, w.line, [(c.name, c.line, c.init) for c in w.containers])
        for w in workloads
    ]  # fmt: skip


def test_a_workload_and_its_template_annotations_are_both_read():
    """The workload's own and its pod template's (which win on the same key)."""
    workloads, _ = read_stream(STREAM)
    assert {"archfit.io/lint-ignore": "no-arm64", "team": "a"} == dict(workloads[0].annotations)


@pytest.mark.parametrize("kind", LINT_KINDS)
def test_every_kind_the_audit_knows_is_read(kind: str):
    """Deployment, StatefulSet, DaemonSet, Job, CronJob, Pod, ReplicaSet, PodTemplate."""
    spec = {"containers": [{"name": "c", "image": "acme/x:1"}]}
    template = {"spec": spec}
    body = {
        "Pod": {"spec": spec},
        "PodTemplate": {"template": template},
        "CronJob": {"spec": {"jobTemplate": {"spec": {"template": template}}}},
    }.get(kind, {"spec": {"template": template}})
    obj = {"kind": kind, "metadata": {"name": "w"}, **body}
    workloads, skipped = read_stream(yaml.safe_dump(obj))
    assert ([], [("acme/x:1",)]) == (skipped, [w.images() for w in workloads])


def test_a_workload_whose_template_is_not_an_object_is_skipped_with_why():
    """The rest of the stream is still read."""
    text = "kind: Deployment\nmetadata: {name: bad}\nspec: {template: 3}\n---\n" + STREAM
    workloads, skipped = read_stream(text)
    assert 3 == len(workloads)
    assert [(1, 1)] == [(s.document, s.line) for s in skipped]
    assert "spec.template must be an object" in skipped[0].reason


def test_text_that_is_not_yaml_is_an_error_naming_the_line():
    """A ManifestError (an InputError: exit status 2), never a silent pass."""
    with pytest.raises(ManifestError, match=r"^not YAML: .* at line \d+$"):
        read_stream("kind: Deployment\nmetadata:\n  name: [unclosed\n")
