"""DynamicResources: a pod's ResourceClaims (DRA, ``resource.k8s.io/v1``) must be
allocatable on the node, as kube-scheduler v1.36's DynamicResources plugin decides
(``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``), over the
state's ``DraCatalog`` with the devices of every allocated or in-flight claim in use.

PreFilter skips a pod without claims; a claim not created yet (a template's; the
queue holds such a pod back, as kube's PreEnqueue, so this is seen only when the pod is
tried another way) is ``pod "ns/name": ResourceClaim not created yet`` and one not known
``resourceclaim.resource.k8s.io "name" not found``, both on every node and
unresolvable, as kube's; a claim whose allocation by another pod is still being
written (in flight) is ``resource claim ns/name is in the process of being
allocated`` (kube: wait for that write; the claim's update retries the pod); then
``resourceclaim in use`` (256 consumers). Filter asks
``scheduler.dra.node_filter.filter_node`` per node and rejects with its text. kube's
Filter Error (an allocator error, the 10 s timeout) aborts the cycle; here it rejects
the node with that text.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from scheduler.dra.allocator import ClaimAllocation
from scheduler.dra.catalog import ClaimLookupError
from scheduler.dra.node_filter import filter_node, pre_filter
from scheduler.dra.objects import ResourceClaim
from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import SKIP, Code, Status, unresolvable
from scheduler.state.cluster_state import IntArray

PLUGIN = "DynamicResources"
# ``CycleContext.data`` key: node row -> Filter's allocations there.
ALLOCATIONS = "DynamicResources/allocations"


class DynamicResources(FilterBase):
    name = PLUGIN

    def pre_filter(self, ctx: CycleContext) -> Status:
        pod = ctx.pod
        if not pod.resource_claims:
            return SKIP
        try:
            claims = ctx.state.dra.pod_claims(pod.namespace, pod.name, pod.resource_claims)
        except ClaimLookupError as problem:
            return unresolvable(self.name, str(problem))
        flying = ctx.state.dra.in_flight
        for claim in claims:
            if claim.key in flying:  # another pod's allocation of it is being written
                return unresolvable(
                    self.name, f"resource claim {claim.key} is in the process of being allocated"
                )
        status = pre_filter(claims, pod.uid, ctx.state.dra.classes)
        if status.ok:
            ctx.data[self.name] = claims
        return status

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        claims: list[ResourceClaim] = ctx.data[self.name]
        catalog = ctx.state.dra
        in_use = catalog.in_use()
        slices = catalog.slice_index()
        verdicts = catalog.verdicts().for_claims([c for c in claims if c.allocation is None])
        rejected: dict[tuple[str, Code], list[int]] = defaultdict(list)
        # Each feasible node's allocation, for the Score (``scores/dynamic_resources.py``).
        allocations: dict[int, tuple[ClaimAllocation, ...]] = ctx.data.setdefault(ALLOCATIONS, {})
        for position, row in enumerate(nodes.tolist()):
            node = ctx.state.nodes[row]
            decision = filter_node(
                claims, catalog.classes, slices, node.name, node.labels, in_use, verdicts=verdicts
            )
            if not decision.status.ok:
                rejected[(decision.status.message, decision.status.code)].append(position)
            else:
                allocations[row] = decision.allocations
        out = []
        for (reason, code), positions in rejected.items():
            mask = np.zeros(nodes.size, np.bool_)
            mask[positions] = True
            out.append(Rejection(reason, mask, code))
        return out
