"""Kubernetes resource quantities, parsed as ``k8s.io/apimachinery/pkg/api/resource`` does.

A quantity is ``<sign><number><suffix>``: a decimal number (``1``, ``1.5``, ``.5``) followed
by a binary SI suffix (``Ki`` .. ``Ei``, powers of 1024), a decimal SI suffix (``n``, ``u``,
``m``, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or a decimal exponent (``1e3``, ``2E-3``).
Values are kept exact (``Fraction``) and rounded up when converted to integers, as
``Quantity.Value()`` and ``Quantity.MilliValue()`` round up.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from scheduler.errors import QuantityError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+\.?[0-9]*|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?))"
)
# apimachinery refuses exponents that would overflow its inf.Dec scale.
_MAX_EXPONENT = 1 << 20


def parse_quantity(text: str | int | float, *, obj: str = "quantity", field: str = "value") -> Fraction:
    """Parse ``text`` into an exact value; ``obj`` and ``field`` name it in errors."""
    if isinstance(text, bool):
        raise QuantityError(obj, field, f"{text!r} is not a quantity")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(obj, field, f"{text!r} is not a finite quantity")
        return Fraction(str(text))
    if not isinstance(text, str):
        raise QuantityError(obj, field, f"{text!r} is not a quantity")
    value = _parse_text(text)
    if isinstance(value, str):
        raise QuantityError(obj, field, value)
    return value


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction | str:
    """The value of a quantity string, or why it does not parse. Pods repeat a few
    strings (``500m``, ``1Gi``) thousands of times: parsing each once matters."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        return f"quantity {text!r} does not parse (expected e.g. 100m, 1.5, 2Gi, 1e3)"
    value = Fraction(match["number"])
    if match["exp"] is not None:
        exponent = int(match["exp"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            return f"quantity {text!r} has an exponent out of range"
        value *= Fraction(10) ** exponent
    elif match["suffix"] in _BINARY:
        value *= _BINARY[match["suffix"]]
    else:
        value *= _DECIMAL[match["suffix"]]
    return -value if match["sign"] == "-" else value


def ceil_int(value: Fraction) -> int:
    """``Quantity.Value()``: the integer value, rounded up."""
    return math.ceil(value)


def ceil_milli(value: Fraction) -> int:
    """``Quantity.MilliValue()``: the value in thousandths, rounded up."""
    return math.ceil(value * 1000)


def format_milli_cpu(milli: int) -> str:
    """Canonical CPU text: ``500m`` or ``2``."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(value: int) -> str:
    """Canonical memory text in the largest exact binary unit: ``512Mi``, ``2Gi``."""
    for suffix, factor in reversed(_BINARY.items()):
        if value and value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)
