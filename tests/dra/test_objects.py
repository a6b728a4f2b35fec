"""The resource.k8s.io/v1 readers: what they read, what they refuse (naming the object
and the field), and a fuzz of each reader in the house pattern
(tests/unit/test_readers_fuzz.py): any value of a field's JSON type is read or refused
with our input error, never another exception, within a time bound."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.dra.cel_selectors import SelectorError, compile_selector, device_variable, matches
from scheduler.dra.manifests import (
    device_class_from_manifest,
    resource_claim_from_manifest,
    resource_claim_template_from_manifest,
    resource_slice_from_manifest,
)
from scheduler.dra.objects import Attribute, DraObjectError
from tests.dra.builders import (
    claim_manifest,
    class_manifest,
    device,
    exactly,
    first_available,
    slice_manifest,
)
from tests.unit.test_readers_fuzz import same_type

SLICE = slice_manifest("slice-1", [device("gpu-0", memory="80Gi", model="a100", n=2, ok=True, ver="v1.0.0")])
CLAIM = claim_manifest(
    "c0",
    exactly("req-0", "class-a", 2, "device.driver == 'x'"),
    first_available("req-1", exactly("sub-0", "class-a"), exactly("sub-1", "class-a", mode="All")),
    constraints=[{"matchAttribute": "x.example.com/model", "requests": ["req-0"]}],
    status={
        "allocation": {
            "devices": {"results": [{"request": "req-0", "driver": "d", "pool": "p", "device": "gpu-0"}]},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
    },
)
CLASS = class_manifest("gpu", "device.driver == 'x'")
CLASS["spec"]["config"] = [{"opaque": {"driver": "x", "parameters": {"a": 1}}}]
CLAIM["spec"]["devices"]["config"] = [
    {"requests": ["req-0"], "opaque": {"driver": "x", "parameters": {"b": "c"}}}
]
TEMPLATE = {"metadata": {"name": "t", "namespace": "default"}, "spec": {"spec": CLAIM["spec"]}}


def test_reads_a_slice() -> None:
    s = resource_slice_from_manifest(SLICE)
    d = s.devices[0]
    assert (s.driver, s.pool, s.generation, s.resource_slice_count, s.node_name) == (
        "driver-a.example.com",
        "pool-1",
        1,
        1,
        "node-1",
    )
    assert d.capacity == {"memory": Fraction(80 * 2**30)}
    assert d.attributes == {
        "model": Attribute("string", "a100"),
        "n": Attribute("int", 2),
        "ok": Attribute("bool", True),
        "ver": Attribute("version", "1.0.0"),
    }


def test_reads_a_claim_and_its_template() -> None:
    claim = resource_claim_from_manifest(CLAIM)
    assert [r.name for r in claim.spec.requests] == ["req-0", "req-1"]
    assert claim.spec.requests[0].exactly is not None
    assert claim.spec.requests[0].exactly.count == 2
    assert [s.allocation_mode for s in claim.spec.requests[1].first_available] == ["ExactCount", "All"]
    assert claim.allocation is not None
    assert claim.allocation.results[0].device == "gpu-0"
    assert claim.reserved_for[0].name == "p"
    assert resource_claim_template_from_manifest(TEMPLATE).spec == claim.spec
    assert device_class_from_manifest(CLASS).selectors == ("device.driver == 'x'",)


def _with(manifest: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(manifest)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


# (case, reader, manifest, field named in the error)
REFUSED: list[tuple[str, Callable[[Any], Any], dict[str, Any], str]] = [
    (
        "bad quantity",
        resource_slice_from_manifest,
        _with(SLICE, ["spec", "devices", 0, "capacity", "memory", "value"], "lots"),
        "spec.devices[0].capacity.memory.value",
    ),
    (
        "two attribute values",
        resource_slice_from_manifest,
        _with(SLICE, ["spec", "devices", 0, "attributes", "n"], {"int": 1, "string": "1"}),
        "spec.devices[0].attributes.n",
    ),
    ("no driver", resource_slice_from_manifest, _with(SLICE, ["spec", "driver"], ""), "spec.driver"),
    (
        "slice count 0",
        resource_slice_from_manifest,
        _with(SLICE, ["spec", "pool", "resourceSliceCount"], 0),
        "spec.pool.resourceSliceCount",
    ),
    (
        "unknown allocation mode",
        resource_claim_from_manifest,
        _with(CLAIM, ["spec", "devices", "requests", 0, "exactly", "allocationMode"], "Some"),
        "spec.devices.requests[0].exactly.allocationMode",
    ),
    (
        "no class",
        resource_claim_from_manifest,
        _with(CLAIM, ["spec", "devices", "requests", 0, "exactly", "deviceClassName"], ""),
        "spec.devices.requests[0].exactly.deviceClassName",
    ),
    (
        "neither exactly nor firstAvailable",
        resource_claim_from_manifest,
        _with(CLAIM, ["spec", "devices", "requests", 0], {"name": "req-0"}),
        "spec.devices.requests[0]",
    ),
    (
        "empty constraint",
        resource_claim_from_manifest,
        _with(CLAIM, ["spec", "devices", "constraints", 0], {"requests": ["req-0"]}),
        "spec.devices.constraints[0]",
    ),
    (
        "empty selector",
        device_class_from_manifest,
        _with(CLASS, ["spec", "selectors", 0], {"cel": {"expression": ""}}),
        "spec.selectors[0].cel.expression",
    ),
    (
        "count of a string",
        resource_claim_from_manifest,
        _with(CLAIM, ["spec", "devices", "requests", 0, "exactly", "count"], "2"),
        "spec.devices.requests[0].exactly.count",
    ),
]


@pytest.mark.parametrize(
    ("reader", "manifest", "field"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused_naming_object_and_field(
    reader: Callable[[Any], Any], manifest: dict[str, Any], field: str
) -> None:
    with pytest.raises(DraObjectError) as raised:
        reader(manifest)
    assert raised.value.field == field
    assert raised.value.obj.split()[0] in ("ResourceSlice", "ResourceClaim", "DeviceClass")


def _mutations(value: Any) -> st.SearchStrategy[Any]:
    """The manifest with its leaves replaced by any value of their JSON type or omitted."""
    if isinstance(value, dict):
        return st.fixed_dictionaries(
            {},
            optional={k: st.one_of(_mutations(v), same_type(v)) for k, v in value.items()},
        )
    if isinstance(value, list):
        return st.lists(st.one_of(*[_mutations(v) for v in value]), max_size=3) if value else st.just(value)
    return same_type(value)


READERS = [
    ("slice", resource_slice_from_manifest, SLICE),
    ("claim", resource_claim_from_manifest, CLAIM),
    ("class", device_class_from_manifest, CLASS),
    ("template", resource_claim_template_from_manifest, TEMPLATE),
]


@pytest.mark.parametrize(("reader", "manifest"), [r[1:] for r in READERS], ids=[r[0] for r in READERS])
def test_readers_fuzzed(reader: Callable[[Any], Any], manifest: dict[str, Any]) -> None:
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_mutations(manifest))
    def read(mutated: Any) -> None:
        started = time.perf_counter()
        with contextlib.suppress(DraObjectError):
            reader(mutated)
        assert time.perf_counter() - started < 1.0

    read()


SELECTORS = [
    'device.attributes["driver-a.example.com"].ver.isGreaterThan(semver("0.1.0"))',
    'device.capacity["driver-a.example.com"].memory.compareTo(quantity("1Gi")) >= 0',
    'device.attributes["driver-a.example.com"].model == "a100"',
]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_mutations(SLICE))
def test_selectors_on_fuzzed_devices(mutated: Any) -> None:
    """Whatever a slice the reader accepts holds, a selector selects, does not, or fails
    with SelectorError (which costs the claim that asked)."""
    try:
        s = resource_slice_from_manifest(mutated)
    except DraObjectError:
        return
    for d in s.devices:
        for expression in SELECTORS:
            with contextlib.suppress(SelectorError):
                assert matches(compile_selector(expression), device_variable(s.driver, d)) in (True, False)
