"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes only pods that
tolerate the ``node.kubernetes.io/unschedulable:NoSchedule`` taint."""

from __future__ import annotations

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import Code
from scheduler.objects.pod import Pod
from scheduler.objects.taints import Taint
from scheduler.state.cluster_state import IntArray

REASON = "node(s) were unschedulable"
_UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "NoSchedule")


def tolerates_cordon(pod: Pod) -> bool:
    """Whether the pod tolerates the taint of a cordoned node."""
    return any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations)


class NodeUnschedulable(FilterBase):
    name = "NodeUnschedulable"

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        if tolerates_cordon(ctx.pod):
            return []
        cordoned = ctx.state.node_mask(self.name, lambda node: node.unschedulable)[nodes]
        return [Rejection(REASON, cordoned, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
