"""NodeResourcesFit scoring strategies (LeastAllocated, MostAllocated) and
NodeResourcesBalancedAllocation, with kube-scheduler's integer arithmetic.

Per resource r (cpu and memory, weight 1 each), with ``req = node requests + pod
request`` (the scoring requests: a container without a request counts 100m / 200Mi):

    LeastAllocated:  (alloc - req) * 100 // alloc   (0 if req > alloc)
    MostAllocated:   min(req, alloc) * 100 // alloc
    node score:      sum(score_r * w_r) // sum(w_r)   over resources with alloc > 0

BalancedAllocation uses real requests: ``f_r = min(1, req_r / alloc_r)`` and a node's
balance ``trunc((1 - std(f)) * 100)``, where for two resources ``std = |f_cpu - f_mem| / 2``.
As in kube-scheduler 1.36 it scores how the pod changes the balance:
``50 + (50 + balance(with the pod) - balance(without)) // 2``, about 75 when the pod
changes little, towards 100 when it evens the node out, towards 50 when it tilts it.
A pod requesting neither CPU nor memory gets no balance score (kube's PreScore skip).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import MAX_NODE_SCORE, CycleContext
from scheduler.state.cluster_state import CPU_COLUMN, MEMORY_COLUMN, IntArray


def _scoring_requested(ctx: CycleContext, nodes: IntArray) -> tuple[IntArray, IntArray]:
    """``[B, 2]`` requested-with-the-pod (scoring requests) and allocatable, cpu then memory."""
    state = ctx.state
    pod = np.array([ctx.pod.nonzero_cpu_milli, ctx.pod.nonzero_memory], np.int64)
    requested = state.nonzero_requested[nodes] + pod[None, :]
    return requested, state.allocatable[nodes, CPU_COLUMN : MEMORY_COLUMN + 1]


def _weighted_average(per_resource: IntArray, allocatable: IntArray) -> IntArray:
    counted = allocatable > 0
    weights = counted.sum(axis=1)
    total = np.where(counted, per_resource, 0).sum(axis=1)
    return np.where(weights > 0, total // np.maximum(weights, 1), 0)


def least_allocated(requested: IntArray, allocatable: IntArray) -> IntArray:
    """``[B, R]`` -> ``[B]``: share of each resource left free, averaged."""
    safe = np.maximum(allocatable, 1)
    per_resource = np.where(requested > allocatable, 0, (allocatable - requested) * MAX_NODE_SCORE // safe)
    return _weighted_average(per_resource, allocatable)


def most_allocated(requested: IntArray, allocatable: IntArray) -> IntArray:
    """``[B, R]`` -> ``[B]``: share of each resource in use, averaged."""
    safe = np.maximum(allocatable, 1)
    per_resource = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
    return _weighted_average(per_resource, allocatable)


def balance(requested: IntArray, allocatable: IntArray) -> IntArray:
    """``[B, 2]`` -> ``[B]``: 100 when CPU and memory are equally used."""
    fractions: npt.NDArray[np.float64] = np.minimum(requested / np.maximum(allocatable, 1), 1.0)
    counted = allocatable > 0
    both = counted.all(axis=1)
    std = np.where(both, np.abs(fractions[:, 0] - fractions[:, 1]) / 2.0, 0.0)
    return ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)


def balanced_allocation(requested: IntArray, allocated: IntArray, allocatable: IntArray) -> IntArray:
    """``[B, 2]`` requests with and without the pod -> ``[B]``: the change in balance,
    ``50 + (50 + with - without) // 2`` (both balances lie in 50..100, so never below 0)."""
    half = MAX_NODE_SCORE // 2
    return half + (half + balance(requested, allocatable) - balance(allocated, allocatable)) // 2


class LeastAllocated:
    """NodeResourcesFit with the LeastAllocated strategy (kube-scheduler's default)."""

    name = "LeastAllocated"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        return least_allocated(*_scoring_requested(ctx, nodes))


class MostAllocated:
    """NodeResourcesFit with the MostAllocated strategy (bin packing)."""

    name = "MostAllocated"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        return most_allocated(*_scoring_requested(ctx, nodes))


class BalancedAllocation:
    name = "NodeResourcesBalancedAllocation"

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        if ctx.pod.cpu_milli == 0 and ctx.pod.memory == 0:
            return np.zeros(nodes.size, np.int64)
        state = ctx.state
        both = slice(CPU_COLUMN, MEMORY_COLUMN + 1)
        pod = np.array([ctx.pod.cpu_milli, ctx.pod.memory], np.int64)
        allocated = state.requested[nodes, both]
        return balanced_allocation(allocated + pod[None, :], allocated, state.allocatable[nodes, both])
