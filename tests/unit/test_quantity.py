import time
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


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1" * 4301, "4301 characters long"),  # int() of it raised a plain ValueError
        ("0." + "0" * 300 + "1", "characters long"),
        ("1e1048577", "out of range"),  # cost 0.18 s of CPU each
        ("100e1048575", "out of range"),  # the form the API server stores it in
        ("1e" + "9" * 200, "out of range"),
        ("1e40", "out of range"),
        ("10e39", "out of range"),
        ("-1e40", "out of range"),
        ("1" * 41, "out of range"),
        ("100000000000000000000000000000000000000Ki", "out of range"),  # 1.024e41
    ],
    ids=lambda value: value[:24],
)
def test_refuses_numbers_out_of_range_before_converting_them(text: str, problem: str) -> None:
    with pytest.raises(QuantityError, match=rf"pod default/x: spec.cpu: quantity .*{problem}"):
        parse_quantity(text, obj="pod default/x", field="spec.cpu")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("9.99e39", Fraction(999 * 10**37)),  # just below the bound: exact
        ("0" * 200 + "5", 5),  # leading zeros are no magnitude
        ("1e-40", Fraction(1, 10**40)),
        ("1.5e-40", Fraction(15, 10**41)),  # 10**-40 <= value: exact
        ("9e-41", Fraction(1, 10**40)),  # below 10**-40: counted as 10**-40
        ("1e-1048577", Fraction(1, 10**40)),
        ("-1e-" + "9" * 200, Fraction(-1, 10**40)),
        ("0e1048577", 0),  # zero whatever its exponent
        ("0.000e-5", 0),
    ],
    ids=lambda value: str(value)[:24],
)
def test_reads_extreme_magnitudes_in_bounded_time(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(("text", "milli", "units"), [("1e-1048577", 1, 1), ("-1e-1048577", 0, 0)])
def test_values_counted_as_the_lower_bound_round_as_the_exact_ones(text: str, milli: int, units: int) -> None:
    value = parse_quantity(text)
    assert (ceil_milli(value), ceil_int(value)) == (milli, units)


_DIGITS = st.text("0123456789", max_size=300)


@given(
    sign=st.sampled_from(["", "+", "-"]),
    whole=_DIGITS,
    decimals=st.none() | _DIGITS,
    tail=st.sampled_from(["", "m", "Ki", "Ei", "E", "e", "e-", "e+", "x"]) | st.text(max_size=6),
    exponent=st.just("") | _DIGITS | st.integers(min_value=0, max_value=2**21).map(str),
)
def test_any_text_parses_or_raises_the_quantity_error_quickly(
    sign: str, whole: str, decimals: str | None, tail: str, exponent: str
) -> None:
    """Quantity-shaped text of any length and exponent: a value or a QuantityError, in
    well under a millisecond of arithmetic (never Python's int limit, never 10**(2**20))."""
    text = sign + whole + ("" if decimals is None else "." + decimals) + tail + exponent
    start = time.process_time()
    try:
        value = parse_quantity(text)
    except QuantityError:
        pass
    else:
        assert abs(value) < 10**40
    assert time.process_time() - start < 0.05
