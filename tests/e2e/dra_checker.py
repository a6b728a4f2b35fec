"""An independent check of DRA allocations as the API server holds them: does each
claim's ``status.allocation`` satisfy its requests (the class' and the request's CEL
selectors, the count or ``All``, ``firstAvailable``, ``adminAccess``), its
``matchAttribute`` constraints, the node of the pods that use it, and ``reservedFor``;
and is no device given to two claims?

It reads the API's JSON (slices, classes, claims, pods) and evaluates the selectors
with cel-expr-python directly. It does not call rl-scheduler's allocator, pools or
selector code; only kube's CEL function library (``quantity()``, ``semver()``) comes
from ``scheduler.dra.cel_library``, as cel-expr-python has none of its own. The parity
test runs it on kube-scheduler's allocations too, which checks the checker.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings  # type: ignore[import-untyped]

from scheduler.dra import cel_library
from scheduler.resources.quantity import parse_quantity

Json = Mapping[str, Any]
DeviceKey = tuple[str, str, str]  # driver, pool, device


@functools.cache
def _environment() -> Any:
    return cel.NewEnv(
        variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
        functions=cel_library.functions(),
        extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings(), ext_optional.ExtOptional()],
    )


@functools.cache
def _program(expression: str) -> Any:
    return _environment().compile(expression)


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute(value: Json) -> Any:
    if "version" in value:
        return cel_library.semver_value(str(value["version"]))
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    raise ValueError(f"attribute {value!r}: no value this checker knows")


def device_variable(driver: str, device: Json) -> dict[str, Any]:
    """kube's ``device`` variable for one device of a slice."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, ident = _qualified(name, driver)
        attributes.setdefault(domain, {})[ident] = _attribute(value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, ident = _qualified(name, driver)
        capacity.setdefault(domain, {})[ident] = cel_library.quantity_value(parse_quantity(value["value"]))
    return {
        "driver": driver,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False)),
        "attributes": attributes,
        "capacity": capacity,
    }


def selected(expression: str, variable: Mapping[str, Any], domains: Iterable[str]) -> bool:
    """Whether the CEL ``expression`` selects the device; a domain in ``domains`` that
    the device lacks is an empty map, as in kube."""
    attributes = {**{d: {} for d in domains}, **variable["attributes"]}
    capacity = {**{d: {} for d in domains}, **variable["capacity"]}
    data = {**variable, "attributes": attributes, "capacity": capacity}
    result = _program(expression).eval(data={"device": data})
    return result.type() == cel.Type.BOOL and bool(result.plain_value())


def _selector_expressions(selectors: Sequence[Json] | None) -> list[str]:
    return [s["cel"]["expression"] for s in selectors or ()]


def node_selector_matches(selector: Json, node: str, labels: Mapping[str, str]) -> bool:
    """A core NodeSelector (terms ORed; expressions and fields ANDed within a term)."""

    def requirement(value: str | None, req: Json) -> bool:
        operator, values = req["operator"], req.get("values") or []
        if operator == "In":
            return value is not None and value in values
        if operator == "NotIn":
            return value is None or value not in values
        if operator == "Exists":
            return value is not None
        if operator == "DoesNotExist":
            return value is None
        raise ValueError(f"operator {operator} not known to this checker")

    for term in selector.get("nodeSelectorTerms") or []:
        if all(requirement(labels.get(r["key"]), r) for r in term.get("matchExpressions") or []) and all(
            requirement(node if r["key"] == "metadata.name" else None, r)
            for r in term.get("matchFields") or []
        ):
            return True
    return False


def slice_on_node(slice_: Json, node: str, labels: Mapping[str, str]) -> bool:
    spec = slice_["spec"]
    if spec.get("nodeName"):
        return bool(spec["nodeName"] == node)
    if spec.get("allNodes"):
        return True
    if spec.get("nodeSelector"):
        return node_selector_matches(spec["nodeSelector"], node, labels)
    return False


@dataclass(frozen=True)
class _Device:
    key: DeviceKey
    variable: dict[str, Any]
    raw: Json


def _devices_on(slices: Iterable[Json], node: str, labels: Mapping[str, str]) -> dict[DeviceKey, _Device]:
    found = {}
    for slice_ in slices:
        if not slice_on_node(slice_, node, labels):
            continue
        spec = slice_["spec"]
        for device in spec.get("devices") or []:
            key = (spec["driver"], spec["pool"]["name"], device["name"])
            found[key] = _Device(key, device_variable(spec["driver"], device), device)
    return found


def _request_spec(claim: Json, result_request: str) -> tuple[Json, str, str]:
    """(the request's ``exactly`` or chosen subrequest, the parent's name, the sub's)."""
    parent, _, sub = result_request.partition("/")
    for request in claim["spec"]["devices"]["requests"]:
        if request["name"] != parent:
            continue
        if not sub:
            return request["exactly"], parent, ""
        for alternative in request["firstAvailable"]:
            if alternative["name"] == sub:
                return alternative, parent, sub
    raise KeyError(result_request)


def _selects(spec: Json, classes: Mapping[str, Json], device: _Device) -> bool:
    expressions = _selector_expressions(classes[spec["deviceClassName"]]["spec"].get("selectors"))
    expressions += _selector_expressions(spec.get("selectors"))
    domains = {device.key[0]}
    return all(selected(e, device.variable, domains) for e in expressions)


def check_claim(
    claim: Json,
    classes: Mapping[str, Json],
    slices: Sequence[Json],
    node: str,
    labels: Mapping[str, str],
    pod_uids: Iterable[str],
) -> list[str]:
    """What is wrong with one claim's allocation for pods on ``node`` (empty: nothing)."""
    name = claim["metadata"]["name"]
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    if not allocation:
        return [f"claim {name}: not allocated"]
    problems = []
    reserved = {c.get("uid") for c in status.get("reservedFor") or []}
    problems += [f"claim {name}: pod {uid} not in reservedFor" for uid in pod_uids if uid not in reserved]
    if allocation.get("nodeSelector") and not node_selector_matches(allocation["nodeSelector"], node, labels):
        problems.append(f"claim {name}: allocation's node selector excludes {node}")
    devices = _devices_on(slices, node, labels)
    results = allocation["devices"]["results"]
    keys = [(r["driver"], r["pool"], r["device"]) for r in results]
    if len(set(keys)) != len(keys):
        problems.append(f"claim {name}: a device twice: {keys}")
    by_parent: dict[str, list[tuple[Json, str, _Device]]] = {}
    for result, key in zip(results, keys, strict=True):
        if key not in devices:
            problems.append(f"claim {name}: device {'/'.join(key)} is not on node {node}")
            continue
        try:
            spec, parent, sub = _request_spec(claim, result["request"])
        except KeyError:
            problems.append(f"claim {name}: result for unknown request {result['request']}")
            continue
        if not _selects(spec, classes, devices[key]):
            problems.append(f"claim {name}: device {'/'.join(key)} fails a selector of {result['request']}")
        if bool(result.get("adminAccess", False)) != bool(spec.get("adminAccess", False)):
            problems.append(f"claim {name}: result {'/'.join(key)} adminAccess differs from its request")
        by_parent.setdefault(parent, []).append((spec, sub, devices[key]))
    for request in claim["spec"]["devices"]["requests"]:
        chosen = by_parent.get(request["name"], [])
        if not chosen:
            problems.append(f"claim {name}: request {request['name']} got no device")
            continue
        if len({sub for _, sub, _ in chosen}) != 1:
            problems.append(f"claim {name}: request {request['name']} mixes subrequests")
            continue
        spec = chosen[0][0]
        if spec.get("allocationMode", "ExactCount") == "All":
            wanted = {k for k, d in devices.items() if _selects(spec, classes, d)}
            if wanted != {d.key for _, _, d in chosen}:
                problems.append(
                    f"claim {name}: request {request['name']} (All) got {len(chosen)} of {len(wanted)}"
                )
        elif len(chosen) != int(spec.get("count", 1)):
            problems.append(
                f"claim {name}: request {request['name']} got {len(chosen)}, not {spec.get('count', 1)}"
            )
    for constraint in claim["spec"]["devices"].get("constraints") or []:
        attribute = constraint["matchAttribute"]
        named = set(constraint.get("requests") or by_parent)
        values = set()
        for parent, chosen in by_parent.items():
            for _, sub, device in chosen:
                if parent not in named and f"{parent}/{sub}" not in named:
                    continue
                domain, ident = _qualified(attribute, device.key[0])
                value = device.variable["attributes"].get(domain, {}).get(ident)
                values.add(repr(value))
        if len(values) != 1 or "None" in values:
            problems.append(f"claim {name}: matchAttribute {attribute} has values {sorted(values)}")
    return problems


def devices_given_twice(claims: Iterable[Json]) -> list[DeviceKey]:
    """Devices (without admin access) in the allocations of two claims."""
    seen: dict[DeviceKey, str] = {}
    twice = []
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation")
        for result in allocation["devices"]["results"] if allocation else ():
            if result.get("adminAccess"):
                continue
            key = (result["driver"], result["pool"], result["device"])
            if key in seen and seen[key] != claim["metadata"]["name"]:
                twice.append(key)
            seen[key] = claim["metadata"]["name"]
    return twice
