"""The structured-parameters allocator: can these claims be allocated on this node, and
with which devices? A port of kube's allocator
(``k8s.io/dynamic-resource-allocation/structured/internal/``, v0.36.4: ``stable`` for
the rules, ``incubating``, which v1.36's default feature gates select, for the order):
the same depth-first search (claims in order, requests in order, devices in pool and
slice order, the next device of a request after the last one taken, backtracking on
failure), so that its allocation is kube's for the same pool order (``pools``).

- ``ExactCount``: ``count`` devices; ``All``: every device the request selects in the
  pools the node sees (none: the request fails; an incomplete or invalid pool: an error).
- ``firstAvailable``: the first subrequest for which the whole rest of the search
  succeeds; the result names the request ``parent/sub``.
- ``matchAttribute`` constraints across the requests they name (all when none): every
  device they allocate has the attribute, with one value and type.
- ``adminAccess``: the device may be in use (it is not consumed), but not twice in
  the same claim.
- A device is in use when ``in_use`` (the caller's: allocated to other claims) holds it
  or this search gave it to an earlier request.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from scheduler.dra import cel_selectors
from scheduler.dra.constraints import Candidate, DeviceId, DistinctAttribute, MatchAttribute
from scheduler.dra.objects import (
    ALLOCATION_RESULTS_MAX_SIZE,
    DeviceClass,
    DeviceRequestSpec,
    DeviceResult,
    ResourceClaim,
    ResourceSlice,
)
from scheduler.dra.pools import (
    NodeSelectorError,
    Pool,
    SelectorResults,
    SliceIndex,
    allocation_node_selector,
    device_on_node,
)

# Selector results kept per slice index (``SliceIndex.selections``) before they are
# dropped and evaluated again: each claim may carry selectors of its own.
MAX_SELECTIONS: Final = 100_000


class AllocationError(Exception):
    """kube's allocator returned an error: the claims cannot be decided on this node
    (a selector that does not compile or fails, a missing class, an ``All`` request on
    a pool being updated). The text is kube's."""


class InvalidPoolsError(AllocationError):
    """No allocation, and a pool the node sees is invalid (kube's
    ``ErrFailedAllocationOnNode``: other nodes may still do)."""


class AllocationTimeoutError(AllocationError):
    """The search ran past its deadline (kube's ``filterTimeout``, 10 s by default)."""


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """What to write into one claim's ``status.allocation``: ``devices.results``,
    ``devices.config`` (``config``, in the API's JSON) and ``nodeSelector``."""

    claim: str
    results: tuple[DeviceResult, ...]
    node_selector: dict[str, Any] | None = None
    config: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class _Request:
    """One request, or one subrequest of a ``firstAvailable`` request."""

    spec: DeviceRequestSpec
    parent: str = ""
    cls: DeviceClass | None = None
    all_devices: list[Candidate] = field(default_factory=list)

    @property
    def result_name(self) -> str:
        return f"{self.parent}/{self.spec.name}" if self.parent else self.spec.name

    @property
    def num_devices(self) -> int:
        return len(self.all_devices) if self.spec.allocation_mode == "All" else self.spec.count


class _Search:
    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        classes: Mapping[str, DeviceClass],
        pools: list[Pool],
        node: tuple[str, Mapping[str, str]],
        in_use: frozenset[DeviceId] | set[DeviceId],
        usable: Sequence[Candidate],
        selections: SelectorResults,
        deadline: float | None = None,
    ) -> None:
        self.deadline = deadline
        # Selector results per device object, shared by the nodes of one slice index.
        self.selections = selections
        self.claims = claims
        self.classes = classes
        self.pools = pools
        self.node = node
        self.in_use = in_use
        self.allocating: dict[DeviceId, set[int]] = {}
        self.results: list[list[tuple[_Request, Candidate]]] = [[] for _ in claims]
        self.requests: list[list[list[_Request]]] = []  # claim -> request -> alternatives
        self.chosen: dict[tuple[int, int], int] = {}
        self.constraints: list[list[MatchAttribute]] = []
        self.match_cache: dict[tuple[DeviceId, int, int, int], bool] = {}
        self.variables: dict[DeviceId, Mapping[str, Any]] = {}
        # The devices of complete, valid pools, in search order (``NodeView.usable``).
        self.usable = usable

    # -- preparation (Allocate's first loop, validateDeviceRequest) --

    def prepare(self) -> None:
        for ci, claim in enumerate(self.claims):
            minimum = 0
            per_claim = []
            for ri, request in enumerate(claim.spec.requests):
                if request.exactly is not None:
                    alternatives = [self._validate(ci, ri, 0, _Request(request.exactly))]
                else:
                    alternatives = [
                        self._validate(ci, ri, si, _Request(sub, parent=request.name))
                        for si, sub in enumerate(request.first_available)
                    ]
                per_claim.append(alternatives)
                minimum += min(r.num_devices for r in alternatives)
            if minimum > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(
                    f"claim {claim.key}: number of requested devices {minimum} exceeds the claim limit "
                    f"of {ALLOCATION_RESULTS_MAX_SIZE}"
                )
            self.requests.append(per_claim)
            self.constraints.append(
                [
                    DistinctAttribute(c.distinct_attribute, frozenset(c.requests))
                    if c.distinct_attribute
                    else MatchAttribute(c.match_attribute, frozenset(c.requests))
                    for c in claim.spec.constraints
                ]
            )

    def _validate(self, ci: int, ri: int, si: int, request: _Request) -> _Request:
        claim = self.claims[ci]
        name = request.spec.name
        cls = self.classes.get(request.spec.device_class_name)
        if cls is None:
            raise AllocationError(
                f"claim {claim.key}, request {name}: could not retrieve device class "
                f"{request.spec.device_class_name}: deviceclass.resource.k8s.io "
                f'"{request.spec.device_class_name}" not found'
            )
        request.cls = cls
        if request.spec.allocation_mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"claim {claim.key}, request {name}: asks for all devices, but resource pool "
                        f"{pool.pool_id} is currently being updated"
                    )
                if pool.invalid_reason:
                    raise AllocationError(
                        f"claim {claim.key}, request {name}: asks for all devices, but resource pool "
                        f"{pool.pool_id} is currently invalid"
                    )
                for candidate in self._candidates(pool):
                    if self._selectable(ci, ri, si, request, candidate):
                        request.all_devices.append(candidate)
        return request

    # -- matching (isSelectable, selectorsMatch) --

    def _candidates(self, pool: Pool) -> Iterable[Candidate]:
        for s in pool.slices:
            for device in s.devices:
                yield Candidate((pool.driver, pool.name, device.name), device, s)

    def _selectable(self, ci: int, ri: int, si: int, request: _Request, candidate: Candidate) -> bool:
        key = (candidate.id, ci, ri, si)
        cached = self.match_cache.get(key)
        if cached is not None:
            return cached
        device = candidate.device
        result = (
            not device.binding_conditions
            and (
                request.cls is None
                or self._selectors_match(ci, candidate, request.cls.selectors, request.cls)
            )
            and self._selectors_match(ci, candidate, request.spec.selectors, None)
            and (not candidate.slice.per_device_node_selection or device_on_node(*self.node, device))
        )
        self.match_cache[key] = result
        return result

    def _selectors_match(
        self, ci: int, candidate: Candidate, selectors: tuple[str, ...], cls: DeviceClass | None
    ) -> bool:
        for i, expression in enumerate(selectors):
            owner = f"class {cls.name}" if cls is not None else f"claim {self.claims[ci].key}"
            compiled = cel_selectors.compile_selector(expression)
            if compiled.error:
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {compiled.error}")
            key = (expression, candidate.id[0], id(candidate.device))
            known = self.selections.get(key)
            if known is not None and known[0] is candidate.device:
                if not known[1]:
                    return False
                continue
            try:
                variable = self.variables.get(candidate.id)
                if variable is None:
                    variable = cel_selectors.device_variable(candidate.id[0], candidate.device)
                    self.variables[candidate.id] = variable
                selected = cel_selectors.matches(compiled, variable)
                if len(self.selections) >= MAX_SELECTIONS:
                    self.selections.clear()  # claims' selectors are the tenants': bounded
                self.selections[key] = (candidate.device, selected)
                if not selected:
                    return False
            except cel_selectors.SelectorError as error:
                raise AllocationError(f"{owner}: selector #{i}: CEL runtime error: {error}") from None
        return True

    # -- the result's config (Allocate, after the search) --

    def _selected(self, ci: int, ri: int) -> _Request:
        return self.requests[ci][ri][self.chosen.get((ci, ri), 0)]

    def allocation_config(self, ci: int) -> tuple[dict[str, Any], ...]:
        """kube's ``devices.config``: each class' config once, naming every request
        that used the class, then the claim's config for the requests it names (once
        per named request that was allocated, as kube does; all when it names none)."""
        out: list[dict[str, Any]] = []
        by_class: dict[str, list[dict[str, Any]]] = {}
        for ri in range(len(self.requests[ci])):
            request = self._selected(ci, ri)
            assert request.cls is not None  # set by prepare
            if request.cls.name in by_class:
                for entry in by_class[request.cls.name]:
                    entry["requests"].append(request.result_name)
                continue
            entries = [
                {"source": "FromClass", "requests": [request.result_name], **config}
                for config in request.cls.config
            ]
            by_class[request.cls.name] = entries
            out.extend(entries)
        claim = self.claims[ci]
        for config in claim.spec.config:
            entry = {
                "source": "FromClaim",
                **({"requests": list(config.requests)} if config.requests else {}),
            }
            if not config.requests:
                out.append({**entry, **config.configuration})
                continue
            for ri, claim_request in enumerate(claim.spec.requests):
                selected = self._selected(ci, ri)
                if claim_request.name in config.requests or (
                    selected.parent and selected.result_name in config.requests
                ):
                    out.append({**entry, **config.configuration})
        return tuple(out)

    # -- the search (allocateOne, allocateDevice) --

    def _in_use(self, device_id: DeviceId) -> bool:
        return device_id in self.in_use or bool(self.allocating.get(device_id))

    def allocate_one(self, ci: int, ri: int, si: int, di: int, sub: bool, start: int = 0) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise AllocationTimeoutError("timed out trying to allocate devices")
        if ci >= len(self.claims):
            return True
        if ri >= len(self.requests[ci]):
            return self.allocate_one(ci + 1, 0, 0, 0, False)
        alternatives = self.requests[ci][ri]
        if not sub and alternatives[0].parent:
            for index in range(len(alternatives)):
                # kube skips a subrequest that would take the claim over its size limit.
                if self.allocate_one(ci, ri, index, 0, True):
                    self.chosen[(ci, ri)] = index
                    return True
            return False
        request = alternatives[si]
        if request.spec.allocation_mode == "All" and not request.all_devices:
            return False
        if di >= request.num_devices:
            return self.allocate_one(ci, ri + 1, 0, 0, False)
        if len(self.results[ci]) + request.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE:
            return False
        if request.spec.allocation_mode == "All":
            return self._allocate_all(ci, ri, si, di, sub, request)
        return self._allocate_exact(ci, ri, si, di, sub, request, start)

    def _allocate_all(self, ci: int, ri: int, si: int, di: int, sub: bool, request: _Request) -> bool:
        candidate = request.all_devices[di]
        if not self._allocate_device(ci, request, candidate, must=True):
            return False
        if self.allocate_one(ci, ri, si, di + 1, sub):
            return True
        self._rollback(ci, request, candidate, len(self.constraints[ci]))
        return False

    def _allocate_exact(
        self, ci: int, ri: int, si: int, di: int, sub: bool, request: _Request, start: int
    ) -> bool:
        # The incubating allocator's order (v1.36's default gates pick it): the next
        # device of the same request is looked for after the one just taken, so the
        # search tries combinations, not permutations; what it finds is the same.
        for index in range(start, len(self.usable)):
            candidate = self.usable[index]
            if request.spec.admin_access:
                if ci in self.allocating.get(candidate.id, ()):
                    continue
            elif self._in_use(candidate.id):
                continue
            if not self._selectable(ci, ri, si, request, candidate):
                continue
            if not self._allocate_device(ci, request, candidate, must=False):
                continue
            if self.allocate_one(ci, ri, si, di + 1, sub, index + 1):
                return True
            self._rollback(ci, request, candidate, len(self.constraints[ci]))
        return False

    def _allocate_device(self, ci: int, request: _Request, candidate: Candidate, *, must: bool) -> bool:
        if request.spec.admin_access:
            if ci in self.allocating.get(candidate.id, ()):
                return False
        elif self._in_use(candidate.id):
            return False
        device = candidate.device
        if device.consumes_counters or device.allow_multiple_allocations:
            # Partitionable devices and consumable capacity: not implemented
            # (docs/dra.md); kube's result for a shared device carries a share ID and
            # consumed capacity that this allocator does not write.
            return False
        if request.spec.taint_prevents_allocation(device):
            return False
        parent, name = request.parent, request.spec.name
        for added, constraint in enumerate(self.constraints[ci]):
            if not constraint.add(parent, name, candidate):
                for done in self.constraints[ci][:added]:
                    done.remove(parent, name)
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].key}, request {name}: cannot add device "
                        f"{'/'.join(candidate.id)} because a claim constraint would not be satisfied"
                    )
                return False
        self.allocating.setdefault(candidate.id, set()).add(ci)
        self.results[ci].append((request, candidate))
        return True

    def _rollback(self, ci: int, request: _Request, candidate: Candidate, constraints: int) -> None:
        self.results[ci].pop()
        self.allocating[candidate.id].discard(ci)
        for constraint in self.constraints[ci][:constraints]:
            constraint.remove(request.parent, request.spec.name)


def allocate(
    claims: Sequence[ResourceClaim],
    classes: Mapping[str, DeviceClass],
    slices: Iterable[ResourceSlice] | SliceIndex,
    node_name: str,
    node_labels: Mapping[str, str],
    in_use: frozenset[DeviceId] | set[DeviceId] = frozenset(),
    timeout_s: float | None = None,
) -> list[ClaimAllocation] | None:
    """Allocate all ``claims`` (none allocated yet) on one node, or ``None`` when they
    cannot all be; ``AllocationError`` when kube's allocator errs, ``AllocationTimeoutError``
    past ``timeout_s``."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    index = slices if isinstance(slices, SliceIndex) else SliceIndex.of(slices)
    view = index.node_view(node_name, node_labels)
    pools = list(view.pools)
    search = _Search(
        claims, classes, pools, (node_name, node_labels), in_use, view.usable, index.selections, deadline
    )
    search.prepare()
    # The search recurses (two frames) per device, and per request and claim, as kube's does;
    # a pod may ask for more than Python's default depth allows.
    depth = sum(3 * len(c.spec.requests) + 2 * ALLOCATION_RESULTS_MAX_SIZE + 3 for c in claims)
    if sys.getrecursionlimit() < depth + 1000:
        sys.setrecursionlimit(depth + 1000)
    found = search.allocate_one(0, 0, 0, 0, False)
    if not found:
        if any(p.invalid_reason for p in pools):
            raise InvalidPoolsError("invalid resource pools were encountered")
        return None
    allocations = []
    for ci, claim in enumerate(claims):
        taken = search.results[ci]
        try:
            node_selector = allocation_node_selector([(c.slice, c.device) for _, c in taken])
        except NodeSelectorError as exc:
            raise AllocationError(f"create NodeSelector for claim {claim.name}: {exc}") from None
        results = tuple(
            DeviceResult(r.result_name, c.id[0], c.id[1], c.id[2], r.spec.admin_access) for r, c in taken
        )
        allocations.append(ClaimAllocation(claim.key, results, node_selector, search.allocation_config(ci)))
    return allocations
