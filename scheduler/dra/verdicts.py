"""The allocator's verdicts per node, kept between scheduling cycles.

The DynamicResources Filter runs the allocator (``scheduler.dra.allocator.allocate``) on
every node for every pod. What it decides on a node depends only on the claims' specs,
the device classes, what the node sees of the slices (its ``NodeView``, which the slice
index remakes when a slice or the node's labels change) and which devices of the node's
pools are in use. Pods made from one ResourceClaimTemplate ask for the same specs, so
their verdicts on a node are the same until one of those changes. kube-scheduler's
allocator is Go and runs each time; in Python it cost about 33 µs a node, 33 ms a cycle
at 1,000 nodes, two thirds of the event loop in kube's SchedulingWithResourceClaimTemplate
(``benchmarks/dra_cycle.py``).

``AllocationVerdicts`` keeps, per tuple of claim specs and per node, the allocations
found (or that none was) with the node's view and the versions of its pools
(``DraCatalog.pool_versions``, moved whenever a device of the pool is taken or freed).
A verdict is used only while both are unchanged; the catalog drops all of them when the
classes or slices change. Errors and timeouts are never kept. Claim specs that cannot be
hashed (opaque configuration) are not kept either. The allocations of a kept verdict
are handed out under the asking claims' keys; nothing else in them names a claim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from scheduler.dra.allocator import ClaimAllocation
from scheduler.dra.objects import ClaimSpec, ResourceClaim
from scheduler.dra.pools import NodeView

# Spec tuples kept before all are dropped: specs are the tenants' (bounded), and a
# scheduler meets few of them at a time.
MAX_SHAPES: Final = 64

Found = tuple[ClaimAllocation, ...] | None


@dataclass(frozen=True, slots=True)
class _Verdict:
    view: NodeView
    versions: tuple[int, ...]
    found: Found


class ShapeVerdicts:
    """The verdicts of one tuple of claim specs, for one cycle's claims (``keys``)."""

    __slots__ = ("_keys", "_pool_versions", "_table")

    def __init__(
        self,
        keys: tuple[str, ...],
        table: dict[str, _Verdict],
        pool_versions: Mapping[tuple[str, str], int],
    ) -> None:
        self._keys = keys
        self._table = table
        self._pool_versions = pool_versions

    def allocate(
        self, node_name: str, view: NodeView, search: Callable[[], Sequence[ClaimAllocation] | None]
    ) -> Found:
        """The verdict on ``node_name`` kept for this view and these pool versions, or
        ``search()``'s, which is kept (an exception from it is not)."""
        versions = tuple(self._pool_versions.get((p.driver, p.name), 0) for p in view.pools)
        kept = self._table.get(node_name)
        if kept is not None and kept.view is view and kept.versions == versions:
            return self._as_ours(kept.found)
        searched = search()
        found = None if searched is None else tuple(searched)
        self._table[node_name] = _Verdict(view, versions, found)
        return found

    def _as_ours(self, found: Found) -> Found:
        if found is None:
            return None
        if all(a.claim == key for a, key in zip(found, self._keys, strict=True)):
            return found
        return tuple(replace(a, claim=key) for a, key in zip(found, self._keys, strict=True))


class AllocationVerdicts:
    """Verdicts per tuple of claim specs; valid for one slice index and one set of
    classes (the catalog makes a new one when either changes)."""

    def __init__(self, pool_versions: Mapping[tuple[str, str], int]) -> None:
        self._pool_versions = pool_versions
        self._shapes: dict[tuple[ClaimSpec, ...], dict[str, _Verdict]] = {}

    def for_claims(self, pending: Sequence[ResourceClaim]) -> ShapeVerdicts | None:
        """The verdicts for claims of these specs, or None when the specs cannot be
        kept (unhashable configuration)."""
        shape = tuple(c.spec for c in pending)
        try:
            table = self._shapes.get(shape)
        except TypeError:
            return None
        if table is None:
            if len(self._shapes) >= MAX_SHAPES:
                self._shapes.clear()
            table = self._shapes[shape] = {}
        return ShapeVerdicts(tuple(c.key for c in pending), table, self._pool_versions)
