from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.errors import QuantityError
from scheduler.resources.quantity import ceil_int, ceil_milli, format_bytes, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("2Gi", 2 * 2**30),
        ("500Mi", 500 * 2**20),
        ("1e3", 1000),
        ("1E3", 1000),
        ("2e-3", Fraction(2, 1000)),
        ("1k", 1000),
        ("1M", 10**6),
        ("1E", 10**18),  # E alone is exa, not an exponent
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("+3", 3),
        ("-1", -1),
        ("0", 0),
        ("250u", Fraction(250, 10**6)),
        ("7n", Fraction(7, 10**9)),
        ("1Ki", 1024),
        ("1Ei", 2**60),
    ],
    ids=str,
)
def test_parses_like_the_api(text: str, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "Gi", "1.5.5", "1 Gi", "1gi", "1KiB", "abc", "1e", "--1", "0x10", "1m2"],
)
def test_refuses_what_the_api_refuses(text: str) -> None:
    with pytest.raises(QuantityError, match=r"pod default/x: spec.cpu: quantity .* does not parse"):
        parse_quantity(text, obj="pod default/x", field="spec.cpu")


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("100m", 100, 1),  # Value() rounds 0.1 up to 1
        ("0.5m", 1, 1),  # MilliValue() rounds up too
        ("1", 1000, 1),
        ("1.0001", 1001, 2),
        ("2Gi", 2 * 2**30 * 1000, 2 * 2**30),
    ],
)
def test_rounds_up_like_value_and_milli_value(text: str, milli: int, units: int) -> None:
    value = parse_quantity(text)
    assert (ceil_milli(value), ceil_int(value)) == (milli, units)


def test_formats_bytes_in_the_largest_exact_unit() -> None:
    assert [format_bytes(v) for v in (0, 1023, 2**20 * 500, 2**31)] == ["0", "1023", "500Mi", "2Gi"]


@given(st.integers(min_value=0, max_value=2**62), st.sampled_from(["", "k", "Ki", "m", "Mi", "G"]))
def test_integers_with_suffixes_scale_exactly(number: int, suffix: str) -> None:
    factors = {"": 1, "k": 1000, "Ki": 1024, "m": Fraction(1, 1000), "Mi": 2**20, "G": 10**9}
    assert parse_quantity(f"{number}{suffix}") == number * factors[suffix]
