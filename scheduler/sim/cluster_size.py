"""The cluster a replay on the trace's own clock runs on: a nested, stratified sample of
the node list, sized so that the trace's offered GPU load is ``--load`` x its GPUs.

On one clock (arrivals and lifetimes alike) a pod list offers a fixed GPU load
(``TimedWorkload.offered_on_trace_clock_milli``: on ``default``, 36.4 GPUs over the busy
window, 0.59% of the node list's 6,212). A cluster of ``C`` GPUs is offered
``offered / C`` x its GPUs, so a load is met by sizing the cluster: ``C = offered /
load``.

*Nested sample.* Per node shape (GPU model, GPUs, CPU, memory), the shape's ``n`` nodes
in a seeded random order, the ``j``-th (0-based) at position ``(j + u) / n``, with ``u``
uniform in [0, 1) drawn per shape and seed (systematic sampling). The sample of fraction
``f`` is every node at a position below ``f``: ``floor(f n)`` or ``ceil(f n)`` nodes of each
shape, ``f n`` on average, and a larger ``f`` keeps every node a smaller one keeps. Unlike
``sample_nodes`` (the training episodes', and the compressed replay's), a shape may be
absent: one node of each of the openb list's 15 shapes already holds 63 GPUs, more than
``default`` offers on its own clock.

*Sized for a load.* Of the nested samples (the nodes taken in order of position), the
first whose GPUs are closest to ``offered / load``. The GPUs grow one node at a time, so
the load met is within half a node's GPUs of the target; each replay's log records it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.errors import SchedulerInputError
from scheduler.objects.node import Node
from scheduler.resources.gpu import MILLI_PER_GPU

FloatArray = npt.NDArray[np.float64]


def node_positions(nodes: Sequence[Node], seed: int) -> FloatArray:
    """Each node's position in [0, 1) (in the node list's order), as the docstring says."""
    groups: dict[tuple[str, int, tuple[tuple[str, int], ...]], list[int]] = defaultdict(list)
    for i, node in enumerate(nodes):
        groups[(node.gpu_model, node.gpu_count, tuple(sorted(node.allocatable.items())))].append(i)
    rng = np.random.default_rng(seed)
    positions = np.empty(len(nodes), np.float64)
    for key in sorted(groups, key=repr):
        members = groups[key]
        order = rng.permutation(len(members))
        offset = rng.random()
        for j, member in enumerate(order):
            positions[members[member]] = (j + offset) / len(members)
    return positions


def nested_sample(nodes: Sequence[Node], fraction: float, seed: int) -> list[Node]:
    """The nodes at a position below ``fraction``, in the node list's order; all for 1."""
    if fraction >= 1.0:
        return list(nodes)
    positions = node_positions(nodes, seed)
    return [node for node, position in zip(nodes, positions, strict=True) if position < fraction]


@dataclass(frozen=True)
class SizedCluster:
    nodes: list[Node]
    fraction: float  # the nested sample's fraction: nested_sample(..., fraction, seed) is nodes

    @property
    def capacity_milli(self) -> int:
        return sum(n.gpu_count for n in self.nodes) * MILLI_PER_GPU


def cluster_for_load(nodes: Sequence[Node], offered_milli: float, load: float, seed: int) -> SizedCluster:
    """The nested sample whose GPUs are closest to ``offered_milli / load``; a load lower
    than the whole node list gives is an error that says how low it can go."""
    if load <= 0:
        raise SchedulerInputError("offered load", "load", f"must be greater than 0, got {load:g}")
    positions = node_positions(nodes, seed)
    order = np.argsort(positions, kind="stable")
    held = np.cumsum(np.array([nodes[i].gpu_count for i in order], np.float64) * MILLI_PER_GPU)
    target = offered_milli / load
    if held.size == 0 or target > held[-1] * (1 + 1e-9):
        whole = held[-1] if held.size else 0.0
        lowest = offered_milli / whole if whole else float("inf")
        raise SchedulerInputError(
            "offered load",
            "load",
            f"{load:g} is out of reach on the trace's clock: the whole node list ({whole / 1000:g} GPUs) "
            f"is offered {lowest:.4f} x its GPUs, the lowest load it can be given",
        )
    taken = int(np.argmin(np.abs(held - target))) + 1  # the first of equally close prefixes
    fraction = 1.0 if taken == len(nodes) else float(positions[order[taken]])
    return SizedCluster(nested_sample(nodes, fraction, seed), fraction)
