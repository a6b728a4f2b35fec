"""Unsupported: pods that need what rl-scheduler does not do (MIG, some HAMi GPU
annotations; ``objects.gpu_request``) are rejected on every node with a reason that
says so, never placed where they might not work. A pod with scheduling gates is not
attempted at all (kube-scheduler's SchedulingGates PreEnqueue); the live queue keeps
it aside, and a cycle run on it anyway says why it waits."""

from __future__ import annotations

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import SKIP, Status, unresolvable
from scheduler.state.cluster_state import IntArray


class Unsupported(FilterBase):
    name = "Unsupported"

    def pre_filter(self, ctx: CycleContext) -> Status:
        if ctx.pod.scheduling_gates:
            return unresolvable(
                self.name, f"waiting for scheduling gates: [{' '.join(ctx.pod.scheduling_gates)}]"
            )
        if ctx.pod.unsupported:
            return unresolvable(self.name, *ctx.pod.unsupported)
        return SKIP

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:  # noqa: ARG002
        return []
