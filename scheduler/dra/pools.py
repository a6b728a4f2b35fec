"""The resource pools a node sees, as kube's ``GatherPools``
(``structured/internal/stable/pools_stable.go``) gathers them.

A slice applies to a node by ``nodeName``, ``allNodes`` or ``nodeSelector``, or, with
``perDeviceNodeSelection``, when one of its devices does. Per pool (driver, pool name)
only the slices of the newest generation count. A pool is complete when the node sees
``resourceSliceCount`` slices of that generation, or all slices of the pool in the
cluster number that many (some target other nodes); it is incomplete otherwise (being
updated: its devices are not allocated, and a request for ``All`` devices fails), and
ignored when the node's newest slices are older than the pool's newest generation.
A pool with a device name twice is invalid.

kube iterates its pools in Go map order (random) and slices in lister order; here pools
are in (driver, pool) order and slices by name, so the search order is fixed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.dra.constraints import Candidate
from scheduler.dra.objects import Device, ResourceSlice
from scheduler.objects.selectors import NodeSelector

# (CEL expression, driver, id of the device object) -> (that device, whether the
# expression selects it). A selector reads only the device (its driver, attributes,
# capacity), so its result holds on every node that sees the device; the device is kept
# with it so that its id names it while the entry lives.
SelectorResults = dict[tuple[str, str, int], tuple[Device, bool]]


class NodeSelectorError(Exception):
    """A slice's node selector that kube cannot fold into an allocation's."""


@dataclass(frozen=True, slots=True)
class Pool:
    driver: str
    name: str
    slices: tuple[ResourceSlice, ...] = ()
    incomplete: bool = False
    invalid_reason: str = ""

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.name}"


def node_matches(
    node_name: str, labels: Mapping[str, str], name: str, all_nodes: bool, selector: NodeSelector | None
) -> bool:
    """``NodeMatches``: a node name, all nodes, or a node selector; none of them, no node."""
    if name:
        return node_name == name
    if all_nodes:
        return True
    if selector is not None:
        return selector.matches(node_name, labels)
    return False


def allocatable(device: Device) -> bool:
    """Whether this allocator ever allocates the device: not for the features it does
    not implement (partitionable devices, taints, binding conditions, consumable
    capacity; docs/dra.md)."""
    return not (
        device.consumes_counters
        or device.tainted
        or device.binding_conditions
        or device.allow_multiple_allocations
    )


def device_on_node(node_name: str, labels: Mapping[str, str], device: Device) -> bool:
    return node_matches(node_name, labels, device.node_name, device.all_nodes, device.node_selector)


def _slice_applies(node_name: str, labels: Mapping[str, str], s: ResourceSlice) -> bool:
    if s.shared_counters:
        return False  # partitionable devices: not implemented (docs/dra.md)
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return node_matches(node_name, labels, s.node_name, s.all_nodes, s.node_selector)
    if s.per_device_node_selection:
        return any(device_on_node(node_name, labels, d) for d in s.devices)
    return False


@dataclass(frozen=True, slots=True)
class NodeView:
    """What one node sees of the slices: its pools, and the devices of the complete,
    valid ones in the allocator's search order."""

    pools: tuple[Pool, ...]
    usable: tuple[Candidate, ...]


@dataclass(frozen=True, slots=True)
class SliceIndex:
    """The cluster's slices sorted and counted once, so that gathering one node's pools
    reads the slices named for that node and those named for none (``allNodes``, a node
    selector, per-device selection), not every slice: at 1,000 nodes with a slice each
    (kube's DRA scheduler_perf cases) the Filter gathered 1,000 slices per node, about
    two thirds of the scheduler's CPU.

    ``every``: sorted by (driver, pool, name); ``newest``: per pool, its newest
    generation anywhere; ``counts``: per (driver, pool, generation), how many slices the
    cluster has; ``named``: per node name, its slices in ``every``'s order; ``unnamed``:
    the others, in that order."""

    every: tuple[ResourceSlice, ...]
    newest: Mapping[tuple[str, str], int]
    counts: Mapping[tuple[str, str, int], int]
    named: Mapping[str, tuple[ResourceSlice, ...]]
    unnamed: tuple[ResourceSlice, ...]
    # The allocator's selector results on these slices' devices (``SelectorResults``).
    selections: SelectorResults = field(default_factory=dict, compare=False, repr=False)
    # ``node_view``'s answers per node name, with the labels they were gathered under.
    _views: dict[str, tuple[dict[str, str], NodeView]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @staticmethod
    def of(slices: Iterable[ResourceSlice]) -> SliceIndex:
        every = tuple(sorted(slices, key=lambda s: (s.driver, s.pool, s.name)))
        newest: dict[tuple[str, str], int] = {}
        counts: dict[tuple[str, str, int], int] = {}
        named: dict[str, list[ResourceSlice]] = {}
        unnamed: list[ResourceSlice] = []
        for s in every:
            key = (s.driver, s.pool)
            newest[key] = max(newest.get(key, s.generation), s.generation)
            counts[(s.driver, s.pool, s.generation)] = counts.get((s.driver, s.pool, s.generation), 0) + 1
            if s.node_name:
                named.setdefault(s.node_name, []).append(s)
            else:
                unnamed.append(s)
        return SliceIndex(
            every, newest, counts, {name: tuple(found) for name, found in named.items()}, tuple(unnamed)
        )

    def candidates(self, node_name: str) -> list[ResourceSlice]:
        """The slices that may apply to ``node_name``, in ``every``'s order."""
        mine = self.named.get(node_name, ())
        if not mine:
            return list(self.unnamed)
        if not self.unnamed:
            return list(mine)
        return sorted((*mine, *self.unnamed), key=lambda s: (s.driver, s.pool, s.name))

    def node_view(self, node_name: str, labels: Mapping[str, str]) -> NodeView:
        """The node's pools and the devices of its complete, valid pools in search
        order, gathered once per node (and again if its labels changed): the Filter
        asks for every node in every cycle, and the slices do not change under the index."""
        cached = self._views.get(node_name)
        if cached is not None and cached[0] == labels:
            return cached[1]
        pools = tuple(self.gather(node_name, labels))
        usable = tuple(
            Candidate((pool.driver, pool.name, device.name), device, s)
            for pool in pools
            if not pool.incomplete and not pool.invalid_reason
            for s in pool.slices
            for device in s.devices
        )
        view = NodeView(pools, usable)
        self._views[node_name] = (dict(labels), view)
        return view

    def gather(self, node_name: str, labels: Mapping[str, str]) -> list[Pool]:
        """``GatherPools`` for one node."""
        by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
        for s in self.candidates(node_name):
            if not _slice_applies(node_name, labels, s):
                continue
            key = (s.driver, s.pool)
            have = by_pool.get(key)
            if have is None or s.generation > have[0].generation:
                by_pool[key] = [s]
            elif s.generation == have[0].generation:
                have.append(s)
        pools = []
        for (driver, name), found in sorted(by_pool.items()):
            generation, expected = found[0].generation, found[0].resource_slice_count
            if len(found) != expected:
                if generation < self.newest[(driver, name)]:
                    continue  # obsolete: a newer generation exists elsewhere
                if self.counts[(driver, name, generation)] != expected:
                    pools.append(Pool(driver, name, incomplete=True))
                    continue
            pools.append(_build(driver, name, tuple(found)))
        return pools


def gather_pools(
    slices: Iterable[ResourceSlice] | SliceIndex, node_name: str, labels: Mapping[str, str]
) -> list[Pool]:
    """The pools ``node_name`` sees; ``slices``: every slice in the cluster, or their
    ``SliceIndex`` (made once for many nodes)."""
    index = slices if isinstance(slices, SliceIndex) else SliceIndex.of(slices)
    return index.gather(node_name, labels)


def _build(driver: str, name: str, found: tuple[ResourceSlice, ...]) -> Pool:
    seen: set[str] = set()
    for s in found:
        for device in s.devices:
            if device.name in seen:
                return Pool(driver, name, invalid_reason=f"duplicate device name {device.name}")
            seen.add(device.name)
    return Pool(driver, name, found)


def _requirement(r: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.values:
        out["values"] = list(r.values)
    return out


def allocation_node_selector(taken: Sequence[tuple[ResourceSlice, Device]]) -> dict[str, Any] | None:
    """``createNodeSelector``: the first device on a named node pins the claim to that
    node; otherwise the single-term node selectors of the slices (or devices) are
    ANDed; none, and the claim is usable on any node (``None``)."""
    fields: list[dict[str, Any]] = []
    expressions: list[dict[str, Any]] = []
    for s, device in taken:
        source: Any = device if s.per_device_node_selection else s
        if source.node_name:
            return {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [source.node_name]}
                        ]
                    }
                ]
            }
        selector = source.node_selector
        if selector is None:
            continue
        if len(selector.terms) > 1:
            raise NodeSelectorError(
                f"unsupported ResourceSlice.NodeSelector with {len(selector.terms)} terms"
            )
        for term in selector.terms:
            for r in term.match_fields:
                if _requirement(r) not in fields:
                    fields.append(_requirement(r))
            for r in term.match_expressions:
                if _requirement(r) not in expressions:
                    expressions.append(_requirement(r))
    if not fields and not expressions:
        return None
    merged: dict[str, Any] = {}
    if expressions:
        merged["matchExpressions"] = expressions
    if fields:
        merged["matchFields"] = fields
    return {"nodeSelectorTerms": [merged]}
