"""RecentPods: filter and prioritize of one pod decode it once, and few pods are kept."""

import msgspec
import orjson
import pytest

from extender.scheduler.verbs import RecentPods
from extender.wire.scheduler_api import WireError
from tests.objects import pod


def raw(name: str) -> msgspec.Raw:
    return msgspec.Raw(orjson.dumps(pod("acme/app:1", name=name)))


def test_the_same_pod_bytes_hand_out_the_pod_decoded_the_first_time():
    """prioritize after filter: the very same pod and facts, nothing decoded again."""
    pods = RecentPods()
    first = pods.decode(raw("api-1"))
    facts = pods.facts(first)
    again = pods.decode(raw("api-1"))
    assert (True, True, "api-1") == (again is first, pods.facts(again) is facts, facts.name)


def test_only_the_last_pods_are_kept():
    """A pod per scheduling cycle must not grow memory: the oldest goes first."""
    pods = RecentPods(entries=2)
    first = pods.decode(raw("api-1"))
    pods.decode(raw("api-2"))
    pods.decode(raw("api-3"))
    assert False is (pods.decode(raw("api-1")) is first)


def test_a_pod_larger_than_the_budget_is_decoded_but_not_kept():
    """One huge pod cannot take the memory of many."""
    pods = RecentPods(max_bytes=10)
    first = pods.decode(raw("api-1"))
    assert (False, "api-1") == (pods.decode(raw("api-1")) is first, first["metadata"]["name"])


def test_a_null_pod_is_refused_as_decode_args_pod_refuses_it():
    """The same WireError as without the memory, and nothing kept."""
    with pytest.raises(WireError, match="Pod is missing"):
        RecentPods().decode(msgspec.Raw(b"null"))
