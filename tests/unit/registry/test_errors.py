"""Which registry failures may pass on their own (transient) and which are definite answers."""

import pytest

from extender.registry import errors


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (errors.Timeout("no answer"), True),
        (errors.Unreachable("connection reset"), True),
        (errors.UnexpectedStatus("answered 503", 503), True),
        (errors.UnexpectedStatus("answered 500", 500), True),
        (errors.UnexpectedStatus("rate limited (429)", 429), True),
        (errors.UnexpectedStatus("answered 400", 400), False),
        (errors.UnexpectedStatus("more than 5 redirects", 310), False),
        (errors.Unauthorized("refused"), False),
        (errors.NoCredentials("no credentials"), False),
        (errors.NotFound("manifest unknown"), False),
        (errors.AddressForbidden("loopback"), False),
        (errors.TooLarge("too big"), False),
        (errors.DigestMismatch("hashes to something else"), False),
        (errors.InvalidReference("Bad/Name"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_only_no_answer_a_server_error_or_a_rate_limit_is_transient(error, expected):
    """Timeouts, resets, 5xx and 429 may pass; 401, 404 and every other answer are definite."""
    assert expected == error.transient
