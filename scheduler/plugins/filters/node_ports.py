"""NodePorts: a host port (with its protocol) can be used once per node; a wildcard
host IP (0.0.0.0) conflicts with every IP of the same port and protocol."""

from __future__ import annotations

import numpy as np

from scheduler.framework.plugin import CycleContext, Rejection, SkipUnlessBase
from scheduler.state.cluster_state import IntArray

REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts(SkipUnlessBase):
    name = "NodePorts"

    def applies(self, ctx: CycleContext) -> bool:
        return bool(ctx.pod.host_ports)

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        wanted = ctx.pod.host_ports
        pods_on_node = ctx.state.pods_on_node
        conflict = np.fromiter(
            (
                any(
                    mine.conflicts(theirs)
                    for pod in pods_on_node[i].values()
                    for theirs in pod.host_ports
                    for mine in wanted
                )
                for i in nodes
            ),
            np.bool_,
            nodes.size,
        )
        return [Rejection(REASON, conflict)]
