"""TaintToleration: a node with a ``NoSchedule`` or ``NoExecute`` taint that the pod
does not tolerate is rejected. Since Kubernetes 1.35 the reason no longer names the
taint (``node(s) had untolerated taint(s)``)."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import Code
from scheduler.objects.node import Node
from scheduler.objects.taints import Taint, TaintEffect, Toleration, untolerated
from scheduler.state.cluster_state import IntArray

FILTER_EFFECTS: frozenset[TaintEffect] = frozenset({"NoSchedule", "NoExecute"})


REASON = "node(s) had untolerated taint(s)"


class TaintToleration(FilterBase):
    name = "TaintToleration"

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        tolerations = ctx.pod.tolerations
        # Pods share few distinct tolerations: the verdict over every node is kept per
        # set of them until a node's taints change (a Python pass over the nodes on
        # every attempt was a sixth of the event loop's time on a queue of failing pods).
        rejected = ctx.state.node_mask(("untolerated", tolerations), untolerated_by(tolerations))[nodes]
        if not rejected.any():
            return []
        return [Rejection(REASON, rejected, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]


def untolerated_by(tolerations: tuple[Toleration, ...]) -> Callable[[Node], bool]:
    """Whether a node has a taint these tolerations do not tolerate; nodes share few
    distinct taint sets, so each is decided once."""
    verdicts: dict[tuple[Taint, ...], bool] = {}

    def rejects(node: Node) -> bool:
        if not node.taints:
            return False
        verdict = verdicts.get(node.taints)
        if verdict is None:
            verdict = untolerated(node.taints, tolerations, FILTER_EFFECTS) is not None
            verdicts[node.taints] = verdict
        return verdict

    return rejects
