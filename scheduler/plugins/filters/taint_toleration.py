"""TaintToleration: a node with a ``NoSchedule`` or ``NoExecute`` taint that the pod
does not tolerate is rejected. Since Kubernetes 1.35 the reason no longer names the
taint (``node(s) had untolerated taint(s)``)."""

from __future__ import annotations

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import Code
from scheduler.objects.node import Node
from scheduler.objects.taints import Taint, TaintEffect, Toleration, untolerated
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray

FILTER_EFFECTS: frozenset[TaintEffect] = frozenset({"NoSchedule", "NoExecute"})


REASON = "node(s) had untolerated taint(s)"


def tolerates(tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...]) -> bool:
    """Whether these tolerations tolerate every ``NoSchedule`` and ``NoExecute`` taint."""
    return untolerated(taints, tolerations, FILTER_EFFECTS) is None


def untolerated_nodes(state: ClusterState, tolerations: tuple[Toleration, ...]) -> BoolArray:
    """Every node: whether it has a taint these tolerations do not tolerate. Pods share
    few distinct tolerations, so the verdict is kept per set of them until a node's
    taints change (a Python pass over the nodes on every attempt was a sixth of the
    event loop's time on a queue of failing pods); nodes share few distinct taint sets,
    so each is decided once."""
    verdicts: dict[tuple[Taint, ...], bool] = {}

    def rejects(node: Node) -> bool:
        if not node.taints:
            return False
        verdict = verdicts.get(node.taints)
        if verdict is None:
            verdict = not tolerates(tolerations, node.taints)
            verdicts[node.taints] = verdict
        return verdict

    return state.node_mask(("untolerated", tolerations), rejects)


class TaintToleration(FilterBase):
    name = "TaintToleration"

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        rejected = untolerated_nodes(ctx.state, ctx.pod.tolerations)[nodes]
        if not rejected.any():
            return []
        return [Rejection(REASON, rejected, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
