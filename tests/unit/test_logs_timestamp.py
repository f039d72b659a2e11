"""UtcTimestamp writes what structlog's TimeStamper(fmt="iso", utc=True) writes."""

import datetime

import pytest

from extender.logs import UtcTimestamp


def iso(seconds: float) -> str:
    """structlog's own text for an instant: datetime's isoformat, "+00:00" made "Z"."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(
    "seconds",
    [
        1795000000.0,  # a whole second: no fraction at all
        1795000000.25,
        1795000000.000001,
        1795000000.9999996,  # rounds up into the next second
        1795000059.5,
        951782400.123456,  # 2000-02-29
    ],
)
def test_the_timestamp_is_the_text_datetime_writes(seconds):
    """The same text as datetime.isoformat, at a whole second, across a carry, any date."""
    stamp = UtcTimestamp(clock=lambda: seconds)
    assert {"timestamp": iso(seconds)} == stamp(None, "info", {})


def test_the_time_of_day_is_formatted_again_when_the_second_changes():
    """The cached date and time of day belong to one second only."""
    times = iter([1795000000.5, 1795000001.5, 1795086400.5])
    stamp = UtcTimestamp(clock=lambda: next(times))
    assert [iso(1795000000.5), iso(1795000001.5), iso(1795086400.5)] == [
        stamp(None, "info", {})["timestamp"] for _ in range(3)
    ]
