"""Kubernetes resource quantities, parsed as ``k8s.io/apimachinery/pkg/api/resource`` does.

A quantity is ``<sign><number><suffix>``: a decimal number (``1``, ``1.5``, ``.5``) followed
by a binary SI suffix (``Ki`` .. ``Ei``, powers of 1024), a decimal SI suffix (``n``, ``u``,
``m``, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or a decimal exponent (``1e3``, ``2E-3``).
Values are kept exact (``Fraction``) and rounded up when converted to integers, as
``Quantity.Value()`` and ``Quantity.MilliValue()`` round up.

The API server stores quantities of any length and exponents up to about 2**20
(``1e1048577`` is kept as ``100e1048575``). Such a number is bounded before it is
converted, so that reading it costs microseconds, never seconds or megabytes: the text
is at most ``MAX_TEXT`` characters, a value of ``1e40`` or more (far above any node's
capacity in any unit) is refused, and a non-zero value below ``1e-40`` counts as
``1e-40``, which rounds up to one unit and to one thousandth as the exact value does.
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
# Longer texts are refused before the pattern runs (the longest of a real manifest is
# a few dozen characters); the pattern's backtracking is quadratic in the length.
MAX_TEXT = 256
# Values of 10**MAX_MAGNITUDE or more are refused and non-zero ones below its inverse
# rounded to it: 1e40 cores or bytes is more than any cluster holds (callers cap
# amounts at 2**60 anyway).
MAX_MAGNITUDE = 40
_TINY = Fraction(1, 10**MAX_MAGNITUDE)


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
    if len(text) > MAX_TEXT:
        return f"quantity {text[:20]!r}... is {len(text)} characters long; at most {MAX_TEXT} are read"
    match = _QUANTITY.fullmatch(text)
    if match is None:
        return f"quantity {text!r} does not parse (expected e.g. 100m, 1.5, 2Gi, 1e3)"
    whole, _, decimals = match["number"].partition(".")
    digits = (whole + decimals).lstrip("0")
    if not digits:
        return Fraction(0)
    # The value is digits * 10**shift * factor, and 10**(magnitude - 1) <= value <
    # 10**magnitude (a decimal factor): bounded before anything is multiplied out.
    shift = -len(decimals)
    factor: Fraction | int = 1
    if match["exp"] is not None:
        exponent = match["exp"][1:].lstrip("+-").lstrip("0") or "0"
        # Three digits reach past the bounds whatever the mantissa (at most MAX_TEXT digits).
        exponent_value = int(exponent) if len(exponent) <= 3 else 1000
        shift += -exponent_value if match["exp"][1] == "-" else exponent_value
    elif match["suffix"] in _BINARY:
        factor = _BINARY[match["suffix"]]
    else:
        factor = _DECIMAL[match["suffix"]]
    magnitude = len(digits) + shift + math.log10(factor)
    if magnitude > MAX_MAGNITUDE:
        return f"quantity {text!r} is out of range (1e{MAX_MAGNITUDE} or more)"
    value = _TINY if magnitude <= -MAX_MAGNITUDE else int(digits) * Fraction(10) ** shift * factor
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
