"""Kubernetes resource quantities (`500m`, `1.5`, `128Mi`, `1e3`) as exact numbers.

Follows apimachinery's resource.Quantity suffixes (pkg/api/resource/suffix.go): binary
`Ki`..`Ei`, decimal `n`..`E`, and a decimal exponent `e`/`E`.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from extender.errors import AuditInputError

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SHAPE = re.compile(
    r"([+-]?(?:\d+\.?\d*|\.\d+))"  # the number
    r"(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"  # an exponent or a suffix
)


class QuantityError(AuditInputError):
    """Text that is not a Kubernetes quantity."""


def parse(text: str | int | float) -> Fraction:
    """The exact value of a quantity. Raises QuantityError for anything else."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int | float):  # YAML numbers arrive as numbers
        return Fraction(text)
    match = _SHAPE.fullmatch(text.strip())
    if match is None:
        raise QuantityError(f"{text[:40]!r} is not a quantity")
    number: str = match.group(1)
    exponent: str | None = match.group(2)
    suffix: str = match.group(3) or ""
    value = Fraction(number)
    if exponent:
        return value * _power_of_ten(int(exponent[1:]))
    if suffix in _BINARY:
        return value * (1 << (10 * _BINARY[suffix]))
    return value * _power_of_ten(_DECIMAL[suffix])


def _power_of_ten(exponent: int) -> Fraction:
    return Fraction(10**exponent) if exponent >= 0 else Fraction(1, 10**-exponent)


def millicores(text: str | int | float) -> int:
    """CPU in thousandths of a core, rounded up as Quantity.MilliValue does."""
    return math.ceil(parse(text) * 1000)


def whole(text: str | int | float) -> int:
    """A quantity rounded up to an integer (bytes of memory)."""
    return math.ceil(parse(text))
