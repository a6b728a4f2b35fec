"""NodeName: a pod with ``spec.nodeName`` fits only the node of that name."""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext, Rejection, SkipUnlessBase
from scheduler.framework.status import Code
from scheduler.state.cluster_state import IntArray

REASON = "node(s) didn't match the requested node name"


class NodeName(SkipUnlessBase):
    name = "NodeName"

    def applies(self, ctx: CycleContext) -> bool:
        return bool(ctx.pod.node_name)

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        wanted = ctx.state.node_index.get(ctx.pod.node_name, -1)
        return (
            [Rejection(REASON, nodes != wanted, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
            if wanted >= 0
            else [Rejection(REASON, np.ones(nodes.size, np.bool_), Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
        )
