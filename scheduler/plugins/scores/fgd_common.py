"""Quantities the FGD simulator's score plugins share."""

from __future__ import annotations

from scheduler.framework.plugin import CycleContext
from scheduler.state.cluster_state import CPU_COLUMN, ClusterState, IntArray

# The largest node of the openb cluster (pkg/type/open-gpu-share/utils/const.go).
MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8_000


def cpu_left(state: ClusterState, nodes: IntArray) -> IntArray:
    left: IntArray = state.allocatable[nodes, CPU_COLUMN] - state.requested[nodes, CPU_COLUMN]
    return left


def gpu_left_total(ctx: CycleContext, nodes: IntArray) -> IntArray:
    total: IntArray = ctx.state.gpu_free_milli[nodes].sum(axis=1)
    return total


def pod_gpu_milli_total(ctx: CycleContext) -> int:
    return ctx.pod.gpu.total_milli
