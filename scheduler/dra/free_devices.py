"""Per node, how many devices of a class are free and how many there are: what a score
plugin (or the graph builder) can read to prefer or avoid a node for a DRA pod.

A device counts for a node when its pool is complete and valid, its slice (or, with
per-device node selection, the device) applies to the node, the allocator allocates
such devices at all (``pools.allocatable``) and the class' selectors select it; it
is free when no allocated claim consumes it. A selector that fails on a device leaves
that device out (the allocator reports the error when a claim asks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.dra import cel_selectors
from scheduler.dra.constraints import DeviceId
from scheduler.dra.objects import Device, DeviceClass, ResourceSlice
from scheduler.dra.pools import SliceIndex, allocatable, device_on_node


@dataclass(frozen=True, slots=True)
class FreeDevices:
    free: int
    total: int


def _selected(cls: DeviceClass, driver: str, device: Device) -> bool:
    try:
        variable = cel_selectors.device_variable(driver, device)
        return all(cel_selectors.matches(cel_selectors.compile_selector(e), variable) for e in cls.selectors)
    except cel_selectors.SelectorError:
        return False


@dataclass(frozen=True, slots=True)
class NodeDevice:
    """One device of a class on a node, as the allocator would see it."""

    id: DeviceId
    device: Device


def node_devices(
    cls: DeviceClass,
    slices: Iterable[ResourceSlice],
    nodes: Mapping[str, Mapping[str, str]],
) -> dict[str, list[NodeDevice]]:
    """Per node name (``nodes``: name -> labels), the class' devices there, in the
    order of their pools and slices."""
    index = SliceIndex.of(slices)
    out: dict[str, list[NodeDevice]] = {}
    for node_name, labels in nodes.items():
        found: list[NodeDevice] = []
        for pool in index.gather(node_name, labels):
            if pool.incomplete or pool.invalid_reason:
                continue
            for s in pool.slices:
                for device in s.devices:
                    if s.per_device_node_selection and not device_on_node(node_name, labels, device):
                        continue
                    if not allocatable(device):
                        continue
                    if not _selected(cls, pool.driver, device):
                        continue
                    found.append(NodeDevice((pool.driver, pool.name, device.name), device))
        out[node_name] = found
    return out


def free_devices(
    cls: DeviceClass,
    slices: Iterable[ResourceSlice],
    nodes: Mapping[str, Mapping[str, str]],
    in_use: set[DeviceId],
) -> dict[str, FreeDevices]:
    """Per node name (``nodes``: name -> labels), the class' devices free and in all."""
    return {
        name: FreeDevices(sum(d.id not in in_use for d in found), len(found))
        for name, found in node_devices(cls, slices, nodes).items()
    }
