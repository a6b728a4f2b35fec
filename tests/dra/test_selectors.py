"""CEL device selectors in kube's environment (dynamic-resource-allocation/cel/compile.go
and compile_test.go): each variable, typed attributes, quantities, semvers, errors, and
a hostile expression that is stopped."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.dra import cel_selectors as cel_selectors_module
from scheduler.dra.cel_selectors import (
    MAX_EXPRESSION_LENGTH,
    SelectorError,
    compile_selector,
    device_variable,
    matches,
)
from scheduler.dra.manifests import resource_slice_from_manifest
from tests.dra.builders import DRIVER_A, device, slice_manifest

GPU = device("gpu-0", memory="80Gi", model="a100", cores=108, healthy=True, driverVersion="v1.2.3")
GPU["attributes"]["other.example.com/zone"] = {"string": "z1"}
GPU["allowMultipleAllocations"] = True
VARIABLE = device_variable(DRIVER_A, resource_slice_from_manifest(slice_manifest("s", [GPU])).devices[0])
A = f'device.attributes["{DRIVER_A}"]'
C = f'device.capacity["{DRIVER_A}"]'

# (case, expression, selected)
SELECTED = [
    ("driver", f'device.driver == "{DRIVER_A}"', True),
    ("other driver", 'device.driver == "other"', False),
    ("string attribute", f'{A}.model == "a100"', True),
    ("int attribute", f"{A}.cores > 100", True),
    ("bool attribute", f"{A}.healthy", True),
    ("attribute of another domain", 'device.attributes["other.example.com"].zone == "z1"', True),
    # compile.go: an unknown domain is an empty map, so has() on it is false.
    ("missing domain is an empty map", 'has(device.attributes["missing.example.com"].x)', False),
    ("domain membership", '"missing.example.com" in device.attributes', False),
    ("version attribute vs semver", f'{A}.driverVersion.isGreaterThan(semver("1.2.3-rc.1"))', True),
    ("version compareTo", f'{A}.driverVersion.compareTo(semver("1.10.0")) < 0', True),
    ("version major", f"{A}.driverVersion.major() == 1", True),
    ("quantity compareTo", f'{C}.memory.compareTo(quantity("40Gi")) > 0', True),
    ("quantity equality is by value", f'{C}.memory == quantity("81920Mi")', True),
    ("quantity isLessThan", f'{C}.memory.isLessThan(quantity("1Ti"))', True),
    ("quantity arithmetic", f'{C}.memory.sub(quantity("80Gi")).sign() == 0', True),
    ("quantity asInteger", f"{C}.memory.asInteger() == 85899345920", True),
    ("isQuantity", 'isQuantity("1Gi") && !isQuantity("1 Gi")', True),
    ("allowMultipleAllocations", "device.allowMultipleAllocations", True),
    ("optional field", 'device.?nope.orValue("x") == "x"', True),
    ("string extension", f'{A}.model.upperAscii() == "A100"', True),
    ("cel.bind", f'cel.bind(dra, {A}, dra.model == "a100" && dra.cores == 108)', True),
]


@pytest.mark.parametrize(("expression", "selected"), [c[1:] for c in SELECTED], ids=[c[0] for c in SELECTED])
def test_selector_selects(expression: str, selected: bool) -> None:
    assert matches(compile_selector(expression), VARIABLE) is selected


# (case, expression, words of the error)
ERRORS = [
    ("syntax", "device.driver ==", "compilation failed"),
    ("not a bool", "1 + 1", "must evaluate to bool or the unknown type, not int"),
    ("dyn that is no bool", f"{A}.cores", "could not be converted to bool"),
    ("missing attribute", f"{A}.nope", "nope"),
    ("bad quantity", 'quantity("lots").sign() == 1', "lots"),
    ("division by zero", "1 / 0 == 1", "divide by zero"),
    ("quantity vs semver", f'{C}.memory.compareTo(semver("1.0.0")) == 0', "no such overload"),
    ("too long", "true || " * (MAX_EXPRESSION_LENGTH // 8) + "true", "longer than the limit"),
]


@pytest.mark.parametrize(("expression", "words"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_selector_error(expression: str, words: str) -> None:
    with pytest.raises(SelectorError, match=words):
        matches(compile_selector(expression), VARIABLE)


def test_compiled_once() -> None:
    assert compile_selector("device.driver == 'x'") is compile_selector("device.driver == 'x'")


def test_hostile_comprehension_is_stopped() -> None:
    """kube's cost limit stops nested comprehensions; cel-cpp's iteration budget does here."""
    items = "[" + ",".join(["1"] * 1000) + "]"
    expression = f"{items}.all(a, {items}.all(b, {items}.all(c, a + b + c > 0)))"
    started = time.perf_counter()
    with pytest.raises(SelectorError, match="budget"):
        matches(compile_selector(expression), VARIABLE)
    assert time.perf_counter() - started < 1.0


def test_unsupported_attribute_fails_the_selector() -> None:
    raw = {"name": "d", "attributes": {"list": {"strings": ["a"]}}}
    dev = resource_slice_from_manifest(slice_manifest("s", [raw])).devices[0]
    with pytest.raises(SelectorError, match="attribute list: unsupported attribute value"):
        device_variable(DRIVER_A, dev)


DRA = "dra.example.com"


def _variable(attributes: dict[str, Any], capacity: dict[str, str], driver: str = DRA) -> dict[str, Any]:
    raw = {"name": "d", "attributes": attributes, "capacity": {k: {"value": v} for k, v in capacity.items()}}
    dev = resource_slice_from_manifest(slice_manifest("s", [raw], driver=driver)).devices[0]
    return device_variable(driver, dev)


# kube's own cases: dynamic-resource-allocation@v0.36.4/cel/compile_test.go, by name.
# (case, expression, attributes, capacity, selected, or the words of the error)
KUBE = [
    ("true", "true", {}, {}, True),
    ("false", "false", {}, {}, False),
    ("syntax-error", "?!", {}, {}, "Syntax error"),
    ("type-error", "1", {}, {}, "must evaluate to bool or the unknown type, not int"),
    (
        "runtime-error-lookup-identifier",
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        {},
        {},
        "noSuchAttr",
    ),
    (
        "runtime-error-lookup-map",
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        {},
        {},
        "noSuchAttr",
    ),
    ("domain-check-negative", '"no-such-domain" in device.attributes', {}, {}, False),
    (
        "domain-check-positive",
        '"dra.example.com" in device.attributes',
        {"dra.example.com/something": {"bool": True}},
        {},
        True,
    ),
    ("real-driver-name", 'device.driver == "dra.example.com"', {}, {}, True),
    (
        "driver-name-qualifier",
        'device.attributes["dra.example.com"].name',
        {"name": {"bool": True}},
        {},
        True,
    ),
    (
        "driver-name-qualifier-map-lookup",
        'device.attributes["dra.example.com"]["name"]',
        {"name": {"bool": True}},
        {},
        True,
    ),
    (
        "bind",
        'cel.bind(dra, device.attributes["dra.example.com"], dra.name)',
        {"name": {"bool": True}},
        {},
        True,
    ),
    (
        "qualified-attribute-name",
        'device.attributes["other.example.com"].name',
        {"other.example.com/name": {"bool": True}},
        {},
        True,
    ),
    ("int", 'device.attributes["dra.example.com"].name > 0', {"name": {"int": 1}}, {}, True),
    ("string", 'device.attributes["dra.example.com"].name == "fish"', {"name": {"string": "fish"}}, {}, True),
    (
        "version",
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
        {"name": {"version": "1.0.0"}},
        {},
        True,
    ),
    (
        "version_v",
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) '
        '&& isSemver("v1.0.0", true)',
        {"name": {"version": "1.0.0"}},
        {},
        True,
    ),
    (
        "quantity",
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        {},
        {"name": "1Mi"},
        True,
    ),
    (
        "check-positive",
        '"name" in device.capacity["dra.example.com"] && '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        {},
        {"name": "1Mi"},
        True,
    ),
    (
        "check-negative",
        '!("name" in device.capacity["dra.example.com"]) || '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        {},
        {},
        True,
    ),
    (
        "many",
        'device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b',
        {"a": {"bool": True}, "b": {"bool": True}},
        {},
        True,
    ),
    (
        "check_attribute_domains",
        'device.attributes.exists_one(x, x == "dra.example.com")',
        {"services": {"string": "some_example_value"}},
        {},
        True,
    ),
    (
        "check_attribute_ids",
        'device.attributes["dra.example.com"].exists_one(x, x == "services")',
        {"services": {"string": "some_example_value"}},
        {},
        True,
    ),
    (
        "split_attribute",
        'device.attributes["dra.example.com"].services.split("example").size() >= 2',
        {"services": {"string": "some_example_value"}},
        {},
        True,
    ),
    (
        "regexp_attribute",
        'device.attributes["dra.example.com"].services.matches("[^a]?sym")',
        {"services": {"string": "asymetric"}},
        {},
        True,
    ),
]


@pytest.mark.parametrize(
    ("expression", "attributes", "capacity", "expected"), [c[1:] for c in KUBE], ids=[c[0] for c in KUBE]
)
def test_kube_compile_cases(
    expression: str, attributes: dict[str, Any], capacity: dict[str, str], expected: Any
) -> None:
    variable = _variable(attributes, capacity)
    if isinstance(expected, str):
        with pytest.raises(SelectorError, match=expected):
            matches(compile_selector(expression), variable)
    else:
        assert matches(compile_selector(expression), variable) is expected


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        st.text(max_size=200),
        st.lists(
            st.sampled_from(
                [
                    "device",
                    ".driver",
                    ".attributes",
                    ".capacity",
                    '["dra.example.com"]',
                    ".name",
                    "(",
                    ")",
                    "==",
                    "&&",
                    "||",
                    "!",
                    "1",
                    '"x"',
                    "quantity(",
                    "semver(",
                    ".compareTo(",
                    ".isGreaterThan(",
                    "cel.bind(a,",
                    ",",
                    "a",
                    ".all(x,",
                    ".exists(x,",
                    "x",
                    "[1,2]",
                    "true",
                    "/",
                    "0",
                    "?",
                    ":",
                    ".?",
                    ".orValue(",
                    "size(",
                    ".split(",
                    "in",
                    "{",
                    "}",
                    ".sign()",
                    ".asInteger()",
                ]
            ),
            max_size=25,
        ).map("".join),
    )
)
def test_any_expression_compiles_or_is_refused(expression: str) -> None:
    """Whatever text a selector holds, compiling and evaluating it on a device gives a
    bool or SelectorError, never another exception."""
    compiled = compile_selector(expression)
    with contextlib.suppress(SelectorError):
        assert matches(compiled, VARIABLE) in (True, False)


def test_a_slow_expression_is_refused_after_one_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any evaluation over the CPU-time bound marks the expression; later devices are
    refused without evaluating it again (the bound set below zero here to trip it)."""
    monkeypatch.setattr(cel_selectors_module, "SLOW_EVALUATION_S", -1.0)
    compiled = compile_selector('device.driver == "slow.example.com"')
    assert matches(compiled, VARIABLE) is False
    with pytest.raises(SelectorError, match="not retried"):
        matches(compiled, VARIABLE)
