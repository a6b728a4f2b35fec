"""Reading ``resource.k8s.io/v1`` objects from the API's JSON dicts.

Each reader either returns a frozen model (``objects``) or raises ``DraObjectError``
naming the object (``ResourceSlice gpu-node-1``) and the field path
(``spec.devices[2].attributes.model``). Fields the allocator does not use (the status'
devices, capacity requests) are not read; a field that is read and has the
wrong type or an unknown enum value is refused, costing that object only.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from scheduler.dra.objects import (
    Allocation,
    Attribute,
    ClaimConfig,
    ClaimSpec,
    Constraint,
    Consumer,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceRequestSpec,
    DeviceResult,
    DeviceTaint,
    DeviceToleration,
    DraObjectError,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from scheduler.errors import QuantityError
from scheduler.objects.fields import FieldReader
from scheduler.resources.quantity import parse_quantity


def _reader(kind: str, manifest: Any) -> tuple[FieldReader, Mapping[str, Any], Mapping[str, Any]]:
    probe = FieldReader(kind, DraObjectError)
    item = probe.mapping(manifest, "")
    metadata = probe.mapping(item.get("metadata"), "metadata")
    name = probe.string(metadata.get("name"), "metadata.name")
    namespace = probe.string(metadata.get("namespace"), "metadata.namespace")
    label = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    return FieldReader(label, DraObjectError), item, metadata


def _boolean(reader: FieldReader, value: Any, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise reader.fail(path, f"expected a boolean, got {value!r}")
    return value


def _attribute(reader: FieldReader, raw: Any, path: str) -> Attribute:
    item = reader.mapping(raw, path)
    present = [key for key in ("int", "bool", "string", "version") if item.get(key) is not None]
    if len(present) > 1:
        raise reader.fail(path, f"must have exactly one value, got {', '.join(present)}")
    if not present:
        return Attribute("unsupported", None)
    kind = present[0]
    value = item[kind]
    if kind == "int":
        return Attribute("int", reader.integer(value, f"{path}.int"))
    if kind == "bool":
        return Attribute("bool", _boolean(reader, value, f"{path}.bool"))
    return Attribute(kind, reader.string(value, f"{path}.{kind}"))  # type: ignore[arg-type]


def _device(reader: FieldReader, raw: Any, path: str) -> Device:
    item = reader.mapping(raw, path)
    name = reader.string(item.get("name"), f"{path}.name")
    if not name:
        raise reader.fail(f"{path}.name", "must not be empty")
    attributes = {
        str(key): _attribute(reader, value, f"{path}.attributes.{key}")
        for key, value in reader.mapping(item.get("attributes"), f"{path}.attributes").items()
    }
    capacity: dict[str, Fraction] = {}
    for key, value in reader.mapping(item.get("capacity"), f"{path}.capacity").items():
        where = f"{path}.capacity.{key}.value"
        text = reader.string(reader.mapping(value, f"{path}.capacity.{key}").get("value"), where)
        try:
            capacity[str(key)] = parse_quantity(text, obj=reader.obj, field=where)
        except QuantityError as error:
            raise reader.fail(where, error.problem) from None
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        allow_multiple_allocations=_boolean(
            reader, item.get("allowMultipleAllocations"), f"{path}.allowMultipleAllocations"
        ),
        node_name=reader.string(item.get("nodeName"), f"{path}.nodeName"),
        all_nodes=_boolean(reader, item.get("allNodes"), f"{path}.allNodes"),
        node_selector=reader.node_selector(item.get("nodeSelector"), f"{path}.nodeSelector"),
        consumes_counters=bool(reader.sequence(item.get("consumesCounters"), f"{path}.consumesCounters")),
        taints=_taints(reader, item.get("taints"), f"{path}.taints"),
        binding_conditions=bool(reader.sequence(item.get("bindingConditions"), f"{path}.bindingConditions")),
    )


def resource_slice_from_manifest(manifest: Any) -> ResourceSlice:
    reader, item, metadata = _reader("ResourceSlice", manifest)
    spec = reader.mapping(item.get("spec"), "spec")
    pool = reader.mapping(spec.get("pool"), "spec.pool")
    driver = reader.string(spec.get("driver"), "spec.driver")
    if not driver:
        raise reader.fail("spec.driver", "must not be empty")
    count = reader.integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount")
    if count < 1:
        raise reader.fail("spec.pool.resourceSliceCount", f"must be at least 1, got {count}")
    return ResourceSlice(
        name=reader.string(metadata.get("name"), "metadata.name"),
        driver=driver,
        pool=reader.string(pool.get("name"), "spec.pool.name"),
        generation=reader.integer(pool.get("generation"), "spec.pool.generation"),
        resource_slice_count=count,
        node_name=reader.string(spec.get("nodeName"), "spec.nodeName"),
        node_selector=reader.node_selector(spec.get("nodeSelector"), "spec.nodeSelector"),
        all_nodes=_boolean(reader, spec.get("allNodes"), "spec.allNodes"),
        per_device_node_selection=_boolean(
            reader, spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection"
        ),
        shared_counters=bool(reader.sequence(spec.get("sharedCounters"), "spec.sharedCounters")),
        devices=tuple(
            _device(reader, raw, f"spec.devices[{i}]")
            for i, raw in enumerate(reader.sequence(spec.get("devices"), "spec.devices"))
        ),
    )


def _selectors(reader: FieldReader, raw: Any, path: str) -> tuple[str, ...]:
    expressions = []
    for i, selector in enumerate(reader.sequence(raw, path)):
        cel = reader.mapping(reader.mapping(selector, f"{path}[{i}]").get("cel"), f"{path}[{i}].cel")
        expression = reader.string(cel.get("expression"), f"{path}[{i}].cel.expression")
        if not expression:
            # allocator_stable.go: "CEL expression empty (unsupported selector type?)"
            raise reader.fail(
                f"{path}[{i}].cel.expression", "CEL expression empty (unsupported selector type?)"
            )
        expressions.append(expression)
    return tuple(expressions)


def _configuration(reader: FieldReader, raw: Any, path: str) -> dict[str, Any]:
    """A DeviceConfiguration: only ``opaque`` (driver and parameters) in resource/v1."""
    item = reader.mapping(raw, path)
    opaque = reader.mapping(item.get("opaque"), f"{path}.opaque")
    if not reader.string(opaque.get("driver"), f"{path}.opaque.driver"):
        raise reader.fail(f"{path}.opaque.driver", "must not be empty")
    return {"opaque": dict(opaque)}


def device_class_from_manifest(manifest: Any) -> DeviceClass:
    reader, item, metadata = _reader("DeviceClass", manifest)
    spec = reader.mapping(item.get("spec"), "spec")
    return DeviceClass(
        name=reader.string(metadata.get("name"), "metadata.name"),
        selectors=_selectors(reader, spec.get("selectors"), "spec.selectors"),
        config=tuple(
            _configuration(reader, c, f"spec.config[{i}]")
            for i, c in enumerate(reader.sequence(spec.get("config"), "spec.config"))
        ),
    )


def _request_spec(reader: FieldReader, raw: Any, path: str, name: str) -> DeviceRequestSpec:
    item = reader.mapping(raw, path)
    mode = reader.string(item.get("allocationMode"), f"{path}.allocationMode", "ExactCount")
    if mode not in ("ExactCount", "All"):
        raise reader.fail(f"{path}.allocationMode", f"unsupported count mode {mode}")
    count = reader.integer(item.get("count"), f"{path}.count", 1)
    if mode == "ExactCount" and count < 1:
        raise reader.fail(f"{path}.count", f"must be at least 1, got {count}")
    class_name = reader.string(item.get("deviceClassName"), f"{path}.deviceClassName")
    if not class_name:
        raise reader.fail(f"{path}.deviceClassName", "missing device class name (unsupported request type?)")
    return DeviceRequestSpec(
        name=name,
        device_class_name=class_name,
        selectors=_selectors(reader, item.get("selectors"), f"{path}.selectors"),
        allocation_mode=mode,  # type: ignore[arg-type]
        count=count,
        admin_access=_boolean(reader, item.get("adminAccess"), f"{path}.adminAccess"),
        tolerations=_tolerations(reader, item.get("tolerations"), f"{path}.tolerations"),
    )


def _taints(reader: FieldReader, raw: Any, path: str) -> tuple[DeviceTaint, ...]:
    """The taints that prevent allocation (NoSchedule, NoExecute); kube ignores the others."""
    taints = []
    for i, entry in enumerate(reader.sequence(raw, path)):
        where = f"{path}[{i}]"
        taint = reader.mapping(entry, where)
        effect = reader.string(taint.get("effect"), f"{where}.effect")
        if effect in ("NoSchedule", "NoExecute"):
            key = reader.string(taint.get("key"), f"{where}.key")
            taints.append(DeviceTaint(key, reader.string(taint.get("value"), f"{where}.value"), effect))
    return tuple(taints)


def _tolerations(reader: FieldReader, raw: Any, path: str) -> tuple[DeviceToleration, ...]:
    tolerations = []
    for i, entry in enumerate(reader.sequence(raw, path)):
        where = f"{path}[{i}]"
        toleration = reader.mapping(entry, where)
        operator = reader.string(toleration.get("operator"), f"{where}.operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise reader.fail(f"{where}.operator", f"unsupported operator {operator}")
        tolerations.append(
            DeviceToleration(
                key=reader.string(toleration.get("key"), f"{where}.key"),
                operator=operator,
                value=reader.string(toleration.get("value"), f"{where}.value"),
                effect=reader.string(toleration.get("effect"), f"{where}.effect"),
            )
        )
    return tuple(tolerations)


def _request(reader: FieldReader, raw: Any, path: str) -> DeviceRequest:
    item = reader.mapping(raw, path)
    name = reader.string(item.get("name"), f"{path}.name")
    if not name:
        raise reader.fail(f"{path}.name", "must not be empty")
    first = reader.sequence(item.get("firstAvailable"), f"{path}.firstAvailable")
    if (item.get("exactly") is None) == (not first):
        raise reader.fail(path, "must have exactly one of exactly, firstAvailable")
    if item.get("exactly") is not None:
        return DeviceRequest(name, exactly=_request_spec(reader, item["exactly"], f"{path}.exactly", name))
    subrequests = []
    for i, sub in enumerate(first):
        where = f"{path}.firstAvailable[{i}]"
        sub_name = reader.string(reader.mapping(sub, where).get("name"), f"{where}.name")
        if not sub_name:
            raise reader.fail(f"{where}.name", "must not be empty")
        subrequest = _request_spec(reader, sub, where, sub_name)
        if subrequest.admin_access:
            raise reader.fail(f"{where}.adminAccess", "subrequests take no admin access")
        subrequests.append(subrequest)
    return DeviceRequest(name, first_available=tuple(subrequests))


def _claim_spec(reader: FieldReader, raw: Any, path: str) -> ClaimSpec:
    spec = reader.mapping(raw, path)
    devices = reader.mapping(spec.get("devices"), f"{path}.devices")
    requests = tuple(
        _request(reader, r, f"{path}.devices.requests[{i}]")
        for i, r in enumerate(reader.sequence(devices.get("requests"), f"{path}.devices.requests"))
    )
    names = [r.name for r in requests]
    if len(set(names)) != len(names):
        raise reader.fail(f"{path}.devices.requests", "request names must be unique")
    constraints = []
    for i, raw_constraint in enumerate(
        reader.sequence(devices.get("constraints"), f"{path}.devices.constraints")
    ):
        where = f"{path}.devices.constraints[{i}]"
        item = reader.mapping(raw_constraint, where)
        attribute = reader.string(item.get("matchAttribute"), f"{where}.matchAttribute")
        distinct = reader.string(item.get("distinctAttribute"), f"{where}.distinctAttribute")
        if bool(attribute) == bool(distinct):
            # allocator_stable.go: "empty constraint (unsupported constraint type?)"
            raise reader.fail(where, "empty constraint (unsupported constraint type?)")
        names_of = tuple(
            reader.string(n, f"{where}.requests[{j}]")
            for j, n in enumerate(reader.sequence(item.get("requests"), f"{where}.requests"))
        )
        constraints.append(Constraint(attribute, names_of, distinct))
    config = []
    for i, raw_config in enumerate(reader.sequence(devices.get("config"), f"{path}.devices.config")):
        where = f"{path}.devices.config[{i}]"
        config_requests = tuple(
            reader.string(n, f"{where}.requests[{j}]")
            for j, n in enumerate(
                reader.sequence(reader.mapping(raw_config, where).get("requests"), f"{where}.requests")
            )
        )
        config.append(ClaimConfig(config_requests, _configuration(reader, raw_config, where)))
    return ClaimSpec(requests, tuple(constraints), tuple(config))


def _allocation(reader: FieldReader, raw: Any) -> Allocation | None:
    if raw is None:
        return None
    item = reader.mapping(raw, "status.allocation")
    devices = reader.mapping(item.get("devices"), "status.allocation.devices")
    results = []
    for i, r in enumerate(reader.sequence(devices.get("results"), "status.allocation.devices.results")):
        where = f"status.allocation.devices.results[{i}]"
        result = reader.mapping(r, where)
        results.append(
            DeviceResult(
                request=reader.string(result.get("request"), f"{where}.request"),
                driver=reader.string(result.get("driver"), f"{where}.driver"),
                pool=reader.string(result.get("pool"), f"{where}.pool"),
                device=reader.string(result.get("device"), f"{where}.device"),
                admin_access=_boolean(reader, result.get("adminAccess"), f"{where}.adminAccess"),
            )
        )
    return Allocation(
        tuple(results),
        reader.node_selector(item.get("nodeSelector"), "status.allocation.nodeSelector"),
    )


def resource_claim_from_manifest(manifest: Any) -> ResourceClaim:
    reader, item, metadata = _reader("ResourceClaim", manifest)
    status = reader.mapping(item.get("status"), "status")
    consumers = []
    for i, c in enumerate(reader.sequence(status.get("reservedFor"), "status.reservedFor")):
        where = f"status.reservedFor[{i}]"
        consumer = reader.mapping(c, where)
        consumers.append(
            Consumer(
                resource=reader.string(consumer.get("resource"), f"{where}.resource"),
                name=reader.string(consumer.get("name"), f"{where}.name"),
                uid=reader.string(consumer.get("uid"), f"{where}.uid"),
            )
        )
    return ResourceClaim(
        namespace=reader.string(metadata.get("namespace"), "metadata.namespace"),
        name=reader.string(metadata.get("name"), "metadata.name"),
        uid=reader.string(metadata.get("uid"), "metadata.uid"),
        spec=_claim_spec(reader, item.get("spec"), "spec"),
        allocation=_allocation(reader, status.get("allocation")),
        reserved_for=tuple(consumers),
    )


def resource_claim_template_from_manifest(manifest: Any) -> ResourceClaimTemplate:
    reader, item, metadata = _reader("ResourceClaimTemplate", manifest)
    spec = reader.mapping(item.get("spec"), "spec")
    return ResourceClaimTemplate(
        namespace=reader.string(metadata.get("namespace"), "metadata.namespace"),
        name=reader.string(metadata.get("name"), "metadata.name"),
        spec=_claim_spec(reader, spec.get("spec"), "spec.spec"),
    )
