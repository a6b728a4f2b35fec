"""DynamicResources' Score: a node ranks by the ``firstAvailable`` subrequests its
allocation would use (``scheduler.dra.scoring.first_available_score``: ``8 - i`` for the
i-th alternative), normalised so the best scores 100 (kube's ``DefaultNormalizeScore``).
A pod without claims, or whose claims have no ``firstAvailable`` request, scores 0
everywhere. In the policy profiles it is one of the pod's preferences: the policy
decides among the nodes that give the earliest alternatives."""

from __future__ import annotations

import numpy as np

from scheduler.dra.objects import ResourceClaim
from scheduler.dra.scoring import first_available_score
from scheduler.framework.plugin import CycleContext, default_normalize
from scheduler.plugins.filters.dynamic_resources import ALLOCATIONS, PLUGIN
from scheduler.state.cluster_state import IntArray


class DynamicResourcesScore:
    name = PLUGIN

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        claims: list[ResourceClaim] | None = ctx.data.get(PLUGIN)
        if not claims or not any(r.first_available for c in claims for r in c.spec.requests):
            return np.zeros(nodes.size, np.int64)
        allocations = ctx.data.get(ALLOCATIONS, {})
        raw = np.array(
            [
                first_available_score(claims, allocations[row]) if row in allocations else 0
                for row in nodes.tolist()
            ],
            np.int64,
        )
        return default_normalize(raw)
