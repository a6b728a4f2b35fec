"""DynamicResources' Score (kube-scheduler v1.36.4 ``dynamicresources.go``
``computeScore``): a node scores by the ``firstAvailable`` subrequests its allocation
would use, ``8 - i`` for the i-th alternative of each request
(``FirstAvailableDeviceRequestMaxSize`` is 8), summed over the pod's claims, so the
node that offers the earlier alternatives ranks first. Claims already allocated count
with their allocation. Requests with ``exactly`` add nothing; a node without an
allocation from Filter scores 0. kube normalises with ``DefaultNormalizeScore``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from scheduler.dra.allocator import ClaimAllocation
from scheduler.dra.objects import DeviceResult, ResourceClaim

# resource/v1 FirstAvailableDeviceRequestMaxSize.
FIRST_AVAILABLE_MAX_SIZE: Final = 8


def first_available_score(claims: Sequence[ResourceClaim], allocations: Sequence[ClaimAllocation]) -> int:
    """The node's raw score: ``allocations`` are Filter's for the claims not allocated
    yet, in the pod's order."""
    score = 0
    fresh = iter(allocations)
    for claim in claims:
        results: tuple[DeviceResult, ...]
        if claim.allocation is not None:
            results = claim.allocation.results
        else:
            found = next(fresh, None)
            if found is None:
                return 0  # kube: an error, which leaves the node at 0
            results = found.results
        used = {r.request for r in results if "/" in r.request}
        for request in claim.spec.requests:
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in used:
                    score += FIRST_AVAILABLE_MAX_SIZE - i
    return score
