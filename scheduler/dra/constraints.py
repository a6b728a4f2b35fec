"""A claim's constraints over the devices it is given, as kube's allocator checks
them while it searches (``structured/internal/stable/allocator_stable.go``:
matchAttributeConstraint; ``incubating/constraint.go``: distinctAttributeConstraint).
``add`` is asked before a device is taken, ``remove`` when the search gives it back."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.dra.objects import Attribute, Device, ResourceSlice

DeviceId = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device the search may take: its ID, the device and the slice it is in."""

    id: DeviceId
    device: Device
    slice: ResourceSlice


@dataclass(slots=True)
class MatchAttribute:
    attribute: str
    requests: frozenset[str]
    value: Attribute | None = None
    num_devices: int = 0

    def applies(self, parent: str, name: str) -> bool:
        if not self.requests:
            return True
        return (parent or name) in self.requests or (bool(parent) and f"{parent}/{name}" in self.requests)

    def add(self, parent: str, name: str, candidate: Candidate) -> bool:
        if not self.applies(parent, name):
            return True
        value = lookup_attribute(candidate, self.attribute)
        if value is None or value.kind == "unsupported":
            return False
        if self.num_devices == 0:
            self.value = value
        elif value != self.value:
            return False
        self.num_devices += 1
        return True

    def remove(self, parent: str, name: str) -> None:
        if self.applies(parent, name):
            self.num_devices -= 1


@dataclass(slots=True)
class DistinctAttribute(MatchAttribute):
    """incubating/constraint.go's distinctAttributeConstraint: each request's device
    has the attribute with a value no other request's has. As in kube, values are kept
    per request (its last device), so two devices of one request are not compared."""

    values: dict[str, Attribute] = field(default_factory=dict)

    def add(self, parent: str, name: str, candidate: Candidate) -> bool:
        if not self.applies(parent, name):
            return True
        value = lookup_attribute(candidate, self.attribute)
        if value is None or value.kind == "unsupported":
            return False
        if any(v == value for v in self.values.values()):
            return False
        self.values[parent or name] = value
        self.num_devices += 1
        return True

    def remove(self, parent: str, name: str) -> None:
        if self.applies(parent, name):
            self.values.pop(parent or name, None)
            self.num_devices -= 1


def lookup_attribute(candidate: Candidate, name: str) -> Attribute | None:
    attributes = candidate.device.attributes
    if name in attributes:
        return attributes[name]
    domain, sep, ident = name.partition("/")
    if sep and domain == candidate.id[0]:
        return attributes.get(ident)
    return None
