"""The DynamicResources plugin's Filter for one pod and one node, as kube-scheduler
v1.36.4 decides it (``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``):

- PreFilter: an allocated claim reserved for 256 consumers, none of them this pod, is
  ``resourceclaim in use``;
- a claim already allocated (shared with other pods) is not allocated again: the node
  must be one its ``status.allocation.nodeSelector`` admits, else
  ``resourceclaim not available on the node``;
- the pod's other claims are allocated together on the node, with the devices of
  every allocated claim in use; when they cannot be, ``cannot allocate all claims``;
- an allocator error (a selector that fails, a missing class) is an error status with
  kube's text, and so is a search past ``filterTimeout`` (10 s):
  ``node N: timed out trying to allocate devices``; no allocation with an invalid pool
  is ``invalid resource pools were encountered`` (UnschedulableAndUnresolvable).

The order is kube's: the allocation's outcome first, then unavailable shared claims.

kube's ``statusUnschedulable`` is UnschedulableAndUnresolvable for both reasons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.dra.allocator import (
    AllocationError,
    AllocationTimeoutError,
    ClaimAllocation,
    InvalidPoolsError,
    allocate,
)
from scheduler.dra.constraints import DeviceId
from scheduler.dra.objects import (
    RESERVED_FOR_MAX_SIZE,
    DeviceClass,
    DeviceRequest,
    DeviceRequestSpec,
    ResourceClaim,
    ResourceSlice,
)
from scheduler.dra.pools import SliceIndex
from scheduler.dra.verdicts import ShapeVerdicts
from scheduler.framework.status import SUCCESS, Status, error, unresolvable

PLUGIN = "DynamicResources"
NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
IN_USE = "resourceclaim in use"
# PostFilter's words when it changed nothing: for a pod without claims, and for one
# with claims none of which it could deallocate (``dynamicresources.go`` PostFilter).
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
STILL_NOT_SCHEDULABLE = "still not schedulable"
# DynamicResourcesArgs.filterTimeout's default.
FILTER_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class NodeDecision:
    status: Status
    # For the claims that were not allocated yet, in the pod's order.
    allocations: tuple[ClaimAllocation, ...] = ()


def pre_filter(
    pod_claims: Sequence[ResourceClaim], pod_uid: str, classes: Mapping[str, DeviceClass] | None = None
) -> Status:
    """PreFilter's checks, claim by claim in the pod's order as kube's: an allocated
    claim that already has the most consumers it may have
    (``ResourceClaimReservedForMaxSize``, 256) and not this pod among them is
    ``resourceclaim in use``; a claim still to allocate whose request (or subrequest)
    names a class ``classes`` lacks is ``request NAME: device class CLASS does not exist``
    (``validateDeviceClass``; ``classes`` None skips that check). The pod waits."""
    for claim in pod_claims:
        reserved = claim.reserved_for
        if (
            claim.allocation is not None
            and len(reserved) >= RESERVED_FOR_MAX_SIZE
            and not any(c.resource == "pods" and c.uid == pod_uid for c in reserved)
        ):
            return unresolvable(PLUGIN, IN_USE)
        if claim.allocation is None and classes is not None:
            for request in claim.spec.requests:
                for name, spec in _named_requests(request):
                    if spec.device_class_name not in classes:
                        return unresolvable(
                            PLUGIN, f"request {name}: device class {spec.device_class_name} does not exist"
                        )
    return SUCCESS


def _named_requests(request: DeviceRequest) -> list[tuple[str, DeviceRequestSpec]]:
    """A request's ``exactly``, or its subrequests named ``parent/sub``."""
    if request.exactly is not None:
        return [(request.name, request.exactly)]
    return [(f"{request.name}/{sub.name}", sub) for sub in request.first_available]


def post_filter_message(has_claims: bool) -> str:
    """What kube's PostFilter says for a pod that fits nowhere, which its FailedScheduling
    message carries before DefaultPreemption's (kube joins them with ", ").
    ``has_claims``: the pod has claims and PreFilter passed (kube keeps the claims for
    PostFilter only at the end of a PreFilter that passed). kube first
    deallocates a claim that is allocated where the pod cannot go and reserved for no
    other pod (``deallocation of ResourceClaim completed``); that is not done here
    (docs/dra.md)."""
    return STILL_NOT_SCHEDULABLE if has_claims else NO_CLAIMS_TO_DEALLOCATE


def devices_in_use(claims: Iterable[ResourceClaim]) -> set[DeviceId]:
    """The devices allocated to ``claims`` that consume them (admin access does not)."""
    return {
        (r.driver, r.pool, r.device)
        for claim in claims
        if claim.allocation is not None
        for r in claim.allocation.results
        if not r.admin_access
    }


def filter_node(
    pod_claims: Sequence[ResourceClaim],
    classes: Mapping[str, DeviceClass],
    slices: Iterable[ResourceSlice] | SliceIndex,
    node_name: str,
    node_labels: Mapping[str, str],
    in_use: set[DeviceId],
    timeout_s: float | None = FILTER_TIMEOUT_S,
    verdicts: ShapeVerdicts | None = None,
) -> NodeDecision:
    """Can the pod's claims be used on this node? ``in_use``: the devices of every
    allocated claim in the cluster (``devices_in_use``). ``verdicts``: the catalog's
    kept verdicts for the pod's claims still to allocate (``DraCatalog.verdicts``), used
    only with the catalog's ``in_use`` and a ``SliceIndex``."""
    pending = []
    unavailable = False
    for claim in pod_claims:
        if claim.allocation is None:
            pending.append(claim)
            continue
        selector = claim.allocation.node_selector
        if selector is not None and not selector.matches(node_name, node_labels):
            unavailable = True
    allocations: Sequence[ClaimAllocation] = ()
    if pending:
        # kube allocates first and reports unavailable shared claims after.
        def search() -> list[ClaimAllocation] | None:
            return allocate(pending, classes, slices, node_name, node_labels, in_use, timeout_s)

        try:
            if verdicts is not None and isinstance(slices, SliceIndex):
                found: Sequence[ClaimAllocation] | None = verdicts.allocate(
                    node_name, slices.node_view(node_name, node_labels), search
                )
            else:
                found = search()
        except AllocationTimeoutError:
            return NodeDecision(error(PLUGIN, f"node {node_name}: timed out trying to allocate devices"))
        except InvalidPoolsError as exc:
            return NodeDecision(unresolvable(PLUGIN, str(exc)))
        except AllocationError as exc:
            return NodeDecision(error(PLUGIN, str(exc)))
        if found is None:
            return NodeDecision(unresolvable(PLUGIN, CANNOT_ALLOCATE))
        allocations = found
    if unavailable:
        return NodeDecision(unresolvable(PLUGIN, NOT_AVAILABLE))
    return NodeDecision(SUCCESS, tuple(allocations))
