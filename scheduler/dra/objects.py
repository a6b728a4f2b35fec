"""``resource.k8s.io/v1`` objects as the allocator reads them: DeviceClass,
ResourceSlice, ResourceClaim (spec and status) and ResourceClaimTemplate. Their readers
are in ``manifests``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, Literal

from scheduler.errors import SchedulerInputError
from scheduler.objects.selectors import NodeSelector

GROUP: Final = "resource.k8s.io"
VERSION: Final = "v1"
# resource/v1/types.go: AllocationResultsMaxSize, ResourceClaimReservedForMaxSize.
ALLOCATION_RESULTS_MAX_SIZE: Final = 32
RESERVED_FOR_MAX_SIZE: Final = 256

AllocationMode = Literal["ExactCount", "All"]
AttributeKind = Literal["int", "bool", "string", "version", "unsupported"]


class DraObjectError(SchedulerInputError):
    """A DeviceClass, ResourceSlice or ResourceClaim that cannot be read as written."""


@dataclass(frozen=True, slots=True)
class Attribute:
    """One device attribute: exactly one of kube's typed values. ``unsupported`` is an
    attribute with none of the four scalar values (a list value of a newer API): kube's
    CEL environment refuses it when a selector looks at the device."""

    kind: AttributeKind
    value: int | bool | str | None


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    """``devices[i].taints[j]``: only NoSchedule and NoExecute prevent allocation."""

    key: str
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    """A request's ``tolerations[i]`` (operator Equal when empty; an empty key or
    effect matches any)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        """kube's ``resourceclaim.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    attributes: Mapping[str, Attribute] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    allow_multiple_allocations: bool = False
    # Per-device node selection (slice.spec.perDeviceNodeSelection).
    node_name: str = ""
    all_nodes: bool = False
    node_selector: NodeSelector | None = None
    # The taints that prevent allocation unless a request tolerates them (NoSchedule,
    # NoExecute; kube ignores other effects).
    taints: tuple[DeviceTaint, ...] = ()
    # Features this allocator does not implement (docs/dra.md): such devices are never
    # allocated.
    consumes_counters: bool = False
    binding_conditions: bool = False

    @property
    def tainted(self) -> bool:
        return bool(self.taints)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    shared_counters: bool = False
    devices: tuple[Device, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    # spec.config[i]'s device configuration ({"opaque": {...}}), copied into allocations.
    config: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    """spec.devices.config[i]: a device configuration for ``requests`` (all if empty)."""

    requests: tuple[str, ...]
    configuration: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class DeviceRequestSpec:
    """What ``exactly`` or one ``firstAvailable`` entry asks for."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()

    def taint_prevents_allocation(self, device: Device) -> bool:
        """kube's ``taintPreventsAllocation``: a taint of the device that no toleration
        of this request tolerates."""
        return any(not any(t.tolerates(taint) for t in self.tolerations) for taint in device.taints)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """``spec.devices.requests[i]``: ``exactly`` set, or ``first_available`` non-empty."""

    name: str
    exactly: DeviceRequestSpec | None = None
    first_available: tuple[DeviceRequestSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    """``matchAttribute`` (one value for all) or ``distinctAttribute`` (a different
    value per request), over ``requests`` (all when empty)."""

    match_attribute: str
    requests: tuple[str, ...] = ()
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """``status.allocation.devices.results[i]``."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class Allocation:
    results: tuple[DeviceResult, ...] = ()
    node_selector: NodeSelector | None = None


@dataclass(frozen=True, slots=True)
class Consumer:
    resource: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    config: tuple[ClaimConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    spec: ClaimSpec = ClaimSpec()
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec = ClaimSpec()
