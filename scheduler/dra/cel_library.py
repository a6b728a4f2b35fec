"""The functions kube's CEL environment adds for DRA selectors, over our values:
quantities (``k8s.io/apiserver/pkg/cel/library/quantity.go``) and semantic versions
(``library/semverlib.go``).

The CEL library passes Python values only as CEL's own types, so a quantity is a CEL
map ``{"__quantity__": "<numerator>/<denominator>"}`` (its exact value, so ``==`` compares
values as kube's does: ``quantity("1Gi") == quantity("1024Mi")``) and a version a map
``{"__semver__": "<text>"}``. The member functions dispatch on that tag.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, Final

from cel_expr_python import cel  # type: ignore[import-untyped]  # ships .pyi, no py.typed

from scheduler.errors import QuantityError
from scheduler.resources.quantity import parse_quantity

QUANTITY: Final = "__quantity__"
SEMVER: Final = "__semver__"
TaggedValue = dict[str, str]

# semver.org's regular expression for a SemVer 2.0.0 version (blang/semver, which kube
# uses, follows the same grammar).
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def quantity_value(value: Fraction) -> TaggedValue:
    return {QUANTITY: f"{value.numerator}/{value.denominator}"}


def semver_value(text: str, normalize: bool = False) -> TaggedValue:
    """``semver(text)``; with ``normalize`` (``semver(text, true)``) a leading ``v`` is
    dropped, missing minor and patch become 0 and leading zeros go, as kube's
    ``normalizeVersion`` does."""
    if normalize:
        text = _normalize(text)
    if len(text) > 256 or not _SEMVER.match(text):
        raise ValueError(f"could not parse {text!r} as semver")
    return {SEMVER: text}


def _normalize(text: str) -> str:
    text = text.removeprefix("v")
    core, sep, rest = next(
        ((text[:i], c, text[i + 1 :]) for i, c in enumerate(text) if c in "-+"), (text, "", "")
    )
    parts = core.split(".")
    if len(parts) > 3 or not all(p.isdigit() for p in parts):
        return text
    parts += ["0"] * (3 - len(parts))
    return ".".join(str(int(p)) for p in parts) + (sep + rest if sep else "")


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        semver_value(text, normalize)
    except ValueError:
        return False
    return True


def _fraction(value: Mapping[str, str]) -> Fraction:
    return Fraction(value[QUANTITY])


def _semver_key(text: str) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
    match = _SEMVER.match(text)
    if match is None:
        raise ValueError(f"could not parse {text!r} as semver")
    major, minor, patch, pre = int(match[1]), int(match[2]), int(match[3]), match[4]
    # A pre-release sorts before its release; numeric identifiers before alphanumeric.
    identifiers = tuple((0, int(p)) if p.isdigit() else (1, p) for p in (pre or "").split(".") if p)
    return major, minor, patch, 0 if pre else 1, identifiers


def _compare(a: Mapping[str, str], b: Mapping[str, str]) -> int:
    if QUANTITY in a and QUANTITY in b:
        x, y = _fraction(a), _fraction(b)
    elif SEMVER in a and SEMVER in b:
        ka, kb = _semver_key(a[SEMVER]), _semver_key(b[SEMVER])
        return (ka > kb) - (ka < kb)
    else:
        raise ValueError("no such overload: operands must both be quantities or both semvers")
    return (x > y) - (x < y)


def _quantity(text: str) -> TaggedValue:
    try:
        return quantity_value(parse_quantity(text))
    except QuantityError as error:
        raise ValueError(error.problem) from None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _arith(a: Mapping[str, str], b: Any, sign: int) -> TaggedValue:
    other = Fraction(b) if isinstance(b, int) else _fraction(b)
    return quantity_value(_fraction(a) + sign * other)


def _as_integer(a: Mapping[str, str]) -> int:
    value = _fraction(a)
    if value.denominator != 1 or not -(2**63) <= value.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def _version_part(index: int) -> Callable[[Mapping[str, str]], int]:
    return lambda a: _semver_key(a[SEMVER])[index]  # type: ignore[return-value]


def functions() -> list[cel.FunctionDecl]:
    tagged = cel.Type.Map(cel.Type.STRING, cel.Type.STRING)
    t = cel.Type

    def member(
        name: str, result: cel.Type, params: list[cel.Type], impl: Callable[..., Any]
    ) -> cel.FunctionDecl:
        return cel.FunctionDecl(
            name, [cel.Overload(f"dra_{name}", result, [tagged, *params], is_member=True, impl=impl)]
        )

    return [
        cel.FunctionDecl("quantity", [cel.Overload("dra_quantity", tagged, [t.STRING], impl=_quantity)]),
        cel.FunctionDecl(
            "isQuantity", [cel.Overload("dra_isQuantity", t.BOOL, [t.STRING], impl=_is_quantity)]
        ),
        cel.FunctionDecl(
            "semver",
            [
                cel.Overload("dra_semver", tagged, [t.STRING], impl=semver_value),
                cel.Overload("dra_semver_normalize", tagged, [t.STRING, t.BOOL], impl=semver_value),
            ],
        ),
        cel.FunctionDecl(
            "isSemver",
            [
                cel.Overload("dra_isSemver", t.BOOL, [t.STRING], impl=_is_semver),
                cel.Overload("dra_isSemver_normalize", t.BOOL, [t.STRING, t.BOOL], impl=_is_semver),
            ],
        ),
        member("compareTo", t.INT, [tagged], _compare),
        member("isGreaterThan", t.BOOL, [tagged], lambda a, b: _compare(a, b) > 0),
        member("isLessThan", t.BOOL, [tagged], lambda a, b: _compare(a, b) < 0),
        member("sign", t.INT, [], lambda a: (_fraction(a) > 0) - (_fraction(a) < 0)),
        member("isInteger", t.BOOL, [], lambda a: _fraction(a).denominator == 1),
        member("asInteger", t.INT, [], _as_integer),
        member("asApproximateFloat", t.DOUBLE, [], lambda a: float(_fraction(a))),
        cel.FunctionDecl(
            "add",
            [
                cel.Overload(
                    "dra_add_quantity",
                    tagged,
                    [tagged, tagged],
                    is_member=True,
                    impl=lambda a, b: _arith(a, b, 1),
                ),
                cel.Overload(
                    "dra_add_int", tagged, [tagged, t.INT], is_member=True, impl=lambda a, b: _arith(a, b, 1)
                ),
            ],
        ),
        cel.FunctionDecl(
            "sub",
            [
                cel.Overload(
                    "dra_sub_quantity",
                    tagged,
                    [tagged, tagged],
                    is_member=True,
                    impl=lambda a, b: _arith(a, b, -1),
                ),
                cel.Overload(
                    "dra_sub_int", tagged, [tagged, t.INT], is_member=True, impl=lambda a, b: _arith(a, b, -1)
                ),
            ],
        ),
        member("major", t.INT, [], _version_part(0)),
        member("minor", t.INT, [], _version_part(1)),
        member("patch", t.INT, [], _version_part(2)),
    ]
