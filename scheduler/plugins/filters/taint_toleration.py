"""TaintToleration: a node with a ``NoSchedule`` or ``NoExecute`` taint that the pod
does not tolerate is rejected. Since Kubernetes 1.35 the reason no longer names the
taint (``node(s) had untolerated taint(s)``)."""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import Code
from scheduler.objects.taints import TaintEffect, untolerated
from scheduler.state.cluster_state import IntArray

FILTER_EFFECTS: frozenset[TaintEffect] = frozenset({"NoSchedule", "NoExecute"})


REASON = "node(s) had untolerated taint(s)"


class TaintToleration(FilterBase):
    name = "TaintToleration"

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        state, tolerations = ctx.state, ctx.pod.tolerations
        tainted = state.node_mask("tainted", lambda node: bool(node.taints))[nodes]
        if not tainted.any():
            return []
        # Nodes share few distinct taint sets; decide each set once.
        verdicts: dict[object, bool] = {}
        rejected = np.zeros(nodes.size, np.bool_)
        for position in np.flatnonzero(tainted):
            taints = state.nodes[nodes[position]].taints
            if taints not in verdicts:
                verdicts[taints] = untolerated(taints, tolerations, FILTER_EFFECTS) is not None
            rejected[position] = verdicts[taints]
        return [Rejection(REASON, rejected, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
