"""Kubernetes quantities, as apimachinery's resource.Quantity reads them."""

import pytest

from extender.audit.pure.quantities import QuantityError, millicores, whole


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", 500),
        ("1", 1000),
        ("1.5", 1500),
        ("0.1", 100),
        (".25", 250),
        (2, 2000),
        (0.5, 500),
        ("1e-3", 1),
        ("1E3", 1_000_000),
        ("100u", 1),  # rounded up, as MilliValue does
        ("2k", 2_000_000),
    ],
)
def test_cpu_quantities_become_millicores_rounded_up(text, expected):
    """Every CPU spelling the API accepts gives the scheduler's millicores."""
    assert expected == millicores(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("128Mi", 128 << 20),
        ("1Gi", 1 << 30),
        ("1G", 10**9),
        ("1.5Ki", 1536),
        ("1e3", 1000),
        ("64", 64),
    ],
)
def test_memory_quantities_become_bytes(text, expected):
    """Binary and decimal suffixes and exponents give bytes."""
    assert expected == whole(text)


@pytest.mark.parametrize("text", ["", "m", "1mi", "one", "1 Gi", "1Gi2", True])
def test_text_that_is_not_a_quantity_raises_an_error(text):
    """Nothing but a quantity parses."""
    with pytest.raises(QuantityError):
        millicores(text)
