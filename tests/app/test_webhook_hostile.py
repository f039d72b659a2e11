"""AdmissionReviews a parser accepts but an answer could not carry: never a 500."""

from __future__ import annotations

import json
from pathlib import Path

from tests.objects import pod
from tests.support.archfit_process import post, read_responses, running


def _review(uid: str, image: str) -> bytes:
    obj = pod("acme/app:1")
    obj["spec"]["containers"][0]["image"] = image
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "shop",
            "object": obj,
            # Above 64 bits: the standard library's parser reads this body, and it lets
            # lone surrogates (written as \\ud800 escapes) through where orjson refuses them.
            "big": 2**70,
        },
    }
    return json.dumps(review).encode()


def test_a_lone_surrogate_uid_or_image_gets_no_500(tmp_path: Path):
    """A uid of `\\ud800` is a 400, and so is an image name holding one (text JSON cannot carry
    is refused as it is read); neither logs an error."""
    with running(tmp_path, webhook=True) as archfit, archfit.connect_webhook() as conn:
        conn.sendall(post("/mutate", _review("\ud800", "acme/app:1")))
        conn.sendall(post("/mutate", _review("u1", "acme/\ud800app:1")))
        answers = read_responses(conn, 2, seconds=20)
        errors = [line for line in archfit.log_lines() if '"level":"error"' in line]
    assert ([400, 400], []) == ([status for status, _ in answers], errors)
