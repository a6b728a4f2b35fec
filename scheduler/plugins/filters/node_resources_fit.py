"""NodeResourcesFit: the pod's request must fit in ``allocatable - requested`` for
every resource it asks for (``request > 0``), and the node must have room for one
more pod (``pods + 1 <= allocatable pods``).

Reasons as kube-scheduler words them: ``Too many pods``, ``Insufficient cpu``,
``Insufficient <resource>``; unresolvable when the request exceeds the node's whole
allocatable. Checked: cpu, memory, ephemeral-storage and scalar resources (extended
``vendor/name``, ``hugepages-*``, ``*kubernetes.io/*``, ``attachable-volumes-*``);
other unprefixed names are ignored, as kube-scheduler ignores them. Resources in
``ignored_resources`` are not checked here. ``nvidia.com/gpu`` is counted like any
extended resource, as the kubelet counts it at admission (on a HAMi node it is GPUs x
split count, one per GPU a container gets); GpuShare checks each GPU besides. HAMi's
per-GPU amounts (``nvidia.com/gpucores``, ``gpumem``, ``gpumem-percentage``) never
reach here: no node advertises them, and the pod's requests leave them out.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import Code
from scheduler.objects.pod import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from scheduler.state.cluster_state import IntArray

TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def is_checked_resource(name: str) -> bool:
    """Native resources the scheduler accounts, and scalar resources."""
    return (
        name in (CPU, MEMORY, EPHEMERAL_STORAGE)
        or "/" in name
        or name.startswith(("hugepages-", "attachable-volumes-"))
    )


class NodeResourcesFit(FilterBase):
    name = "NodeResourcesFit"

    def __init__(self, ignored_resources: Iterable[str] = ()) -> None:
        self.ignored_resources = frozenset(ignored_resources)

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        state, pod = ctx.state, ctx.pod
        out: list[Rejection] = []
        pods = state.resource_index[PODS]
        full = state.requested[nodes, pods] + 1 > state.allocatable[nodes, pods]
        if full.any():
            out.append(Rejection(TOO_MANY_PODS, full))
        for name, amount in pod.requests.items():
            if amount <= 0 or name in self.ignored_resources or not is_checked_resource(name):
                continue
            column = state.resource_index.get(name)
            if column is None:  # no node has any of it
                out.append(Rejection(insufficient(name), nodes >= 0, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                continue
            allocatable = state.allocatable[nodes, column]
            short = amount > allocatable - state.requested[nodes, column]
            if short.any():
                # Per node, as kube's fitsRequest: unresolvable where even an empty node
                # would be too small (preemption cannot help there), else unschedulable.
                too_small = short & (amount > allocatable)
                for nodes_of_code, code in (
                    (short & ~too_small, Code.UNSCHEDULABLE),
                    (too_small, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
                ):
                    if nodes_of_code.any():
                        out.append(Rejection(insufficient(name), nodes_of_code, code))
        return out
