"""The feature rows of one decision, computed from a ``ClusterState`` and a ``Pod``
(``scheduler.policy.features`` names them; each row is built from name -> values).
Pure arithmetic on arrays for many nodes at once; ``graph.GraphBuilder`` caches them."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from scheduler.objects.pod import Pod
from scheduler.plugins.scores.fgd_common import MAX_SPEC_CPU, MAX_SPEC_GPU
from scheduler.policy.features import (
    CORES_PER_GPU_SCALE,
    MEMORY_SCALE,
    NODE_FEATURES,
    PAIR_FEATURES,
    POD_CPU_SCALE,
    POD_FEATURES,
    POD_MEMORY_SCALE,
    RESERVES_CORES_PER_GPU,
    FloatArray,
    columns,
)
from scheduler.policy.frag_delta import FragDelta
from scheduler.policy.workload import ClusterSupply, WorkloadDemand, cpu_pressure
from scheduler.resources.gpu import MAX_GPUS_PER_NODE, MILLI_PER_GPU
from scheduler.state.cluster_state import CPU_COLUMN, MEMORY_COLUMN, ClusterState, IntArray
from scheduler.state.fragmentation import PodShape, pod_shape

Float64Array = npt.NDArray[np.float64]


# Up to this many rows are computed one by one in Python floats rather than as arrays:
# after a placement one node's row is new, and forty numpy calls on one row cost ten
# times the arithmetic. The same IEEE operations in the same order: the same values.
FEW_ROWS = 4


def node_rows(state: ClusterState, rows: IntArray, frag: FragDelta, supply: ClusterSupply) -> FloatArray:
    """``[len(rows), len(NODE_FEATURES)]`` for the nodes ``rows``."""
    if len(rows) <= FEW_ROWS:
        fragments = frag.frag(state, rows).tolist()
        return np.array(
            [_node_row(state, int(i), f, supply) for i, f in zip(rows, fragments, strict=True)], np.float32
        ).reshape(len(rows), len(NODE_FEATURES))
    return _node_rows(state, rows, frag.frag(state, rows), supply)


def _node_row(state: ClusterState, i: int, fragment: float, supply: ClusterSupply) -> list[float]:
    """``_node_rows`` of one node, in Python floats: the same operations, one value at a
    time (numpy's float64 arithmetic is Python's)."""
    alloc, req = state.allocatable[i], state.requested[i]
    cpu_cap, mem_cap = float(alloc[CPU_COLUMN]), float(alloc[MEMORY_COLUMN])
    cpu_left = cpu_cap - int(req[CPU_COLUMN])
    mem_left = mem_cap - int(req[MEMORY_COLUMN])
    gpus = float(state.gpu_count[i])
    free = state.gpu_free_milli[i].tolist()
    idle = float(sum(free))
    partial = [f if 0 < f < MILLI_PER_GPU else 0 for f in free]
    model = int(state.gpu_model_id[i])
    values = {
        "cpu_capacity": cpu_cap / MAX_SPEC_CPU,
        "memory_capacity": mem_cap / MEMORY_SCALE,
        "gpu_capacity": gpus / MAX_GPUS_PER_NODE,
        "cpu_free": _one_ratio(cpu_left, cpu_cap),
        "memory_free": _one_ratio(mem_left, mem_cap),
        "gpu_free": _one_ratio(idle, gpus * MILLI_PER_GPU),
        "cpu_left": cpu_left / MAX_SPEC_CPU,
        "gpus_fully_free": sum(f == MILLI_PER_GPU for f in free) / MAX_GPUS_PER_NODE,
        "gpu_partial_free": sum(partial) / MAX_SPEC_GPU,
        "gpu_largest_partial": max(partial) / MILLI_PER_GPU,
        "cpu_per_idle_gpu": _one_cores_per_gpu(cpu_left, idle / MILLI_PER_GPU),
        "frag": fragment / MAX_SPEC_GPU,
        "frag_rate": _one_ratio(fragment, idle),
        "model_access": float(supply.model_access[model]),
        "model_share": float(supply.model_share[model]),
        "in_use": 1.0 if state.pods_on_node[i] else 0.0,
        "order": i / max(len(state), 1),
    }
    return [values[name] for name in NODE_FEATURES]


def _node_rows(
    state: ClusterState, rows: IntArray, fragment: Float64Array, supply: ClusterSupply
) -> FloatArray:
    alloc = state.allocatable[rows]
    req = state.requested[rows]
    cpu_cap = alloc[:, CPU_COLUMN].astype(np.float64)
    mem_cap = alloc[:, MEMORY_COLUMN].astype(np.float64)
    cpu_left = cpu_cap - req[:, CPU_COLUMN]
    mem_left = mem_cap - req[:, MEMORY_COLUMN]
    gpus = state.gpu_count[rows].astype(np.float64)
    free = state.gpu_free_milli[rows]
    idle = free.sum(axis=1).astype(np.float64)
    partial = np.where((free > 0) & (free < MILLI_PER_GPU), free, 0)
    model = state.gpu_model_id[rows]
    return columns(
        NODE_FEATURES,
        {
            "cpu_capacity": cpu_cap / MAX_SPEC_CPU,
            "memory_capacity": mem_cap / MEMORY_SCALE,
            "gpu_capacity": gpus / MAX_GPUS_PER_NODE,
            "cpu_free": _ratio(cpu_left, cpu_cap),
            "memory_free": _ratio(mem_left, mem_cap),
            "gpu_free": _ratio(idle, gpus * MILLI_PER_GPU),
            "cpu_left": cpu_left / MAX_SPEC_CPU,
            "gpus_fully_free": (free == MILLI_PER_GPU).sum(axis=1) / MAX_GPUS_PER_NODE,
            "gpu_partial_free": partial.sum(axis=1) / MAX_SPEC_GPU,
            "gpu_largest_partial": partial.max(axis=1) / MILLI_PER_GPU,
            "cpu_per_idle_gpu": _cores_per_gpu(cpu_left, idle / MILLI_PER_GPU),
            "frag": fragment / MAX_SPEC_GPU,
            "frag_rate": _ratio(fragment, idle),
            "model_access": supply.model_access[model],
            "model_share": supply.model_share[model],
            "in_use": np.array([len(state.pods_on_node[i]) > 0 for i in rows], np.float64),
            "order": rows / max(len(state), 1),
        },
    )


def pod_row(pod: Pod, demand: WorkloadDemand, supply: ClusterSupply) -> FloatArray:
    """``[len(POD_FEATURES)]`` for ``pod`` in this workload and cluster."""
    gpu = pod.gpu
    count = gpu.count if gpu.milli_per_gpu else 0
    gpu_total = count * gpu.milli_per_gpu / MILLI_PER_GPU
    return columns(
        POD_FEATURES,
        {
            "cpu": pod.cpu_milli / POD_CPU_SCALE,
            "memory": pod.memory / POD_MEMORY_SCALE,
            "gpu_milli": gpu.milli_per_gpu / MILLI_PER_GPU if count else 0.0,
            "gpu_count": count / MAX_GPUS_PER_NODE,
            "is_share": float(gpu.is_share),
            "is_cpu_only": float(count == 0),
            "has_model_constraint": float(bool(gpu.models)),
            "cpu_per_gpu": (pod.cpu_milli / 1000 / gpu_total / CORES_PER_GPU_SCALE) if gpu_total else 0.0,
            "workload_gpu_cpu_per_gpu": demand.gpu_cpu_per_gpu / CORES_PER_GPU_SCALE,
            "workload_cpu_only_per_gpu": demand.cpu_only_per_gpu / CORES_PER_GPU_SCALE,
            "cluster_cpu_per_gpu": supply.cpu_per_gpu / CORES_PER_GPU_SCALE,
            "cpu_pressure": cpu_pressure(demand, supply),
        },
    )


def pair_rows(state: ClusterState, pod: Pod, nodes: IntArray, frag: FragDelta) -> tuple[FloatArray, IntArray]:
    """``([K, len(PAIR_FEATURES)], gpu choice [K])`` for placing ``pod`` on ``nodes``;
    the GPU choice is the GPU a share pod would take on each (-1 otherwise)."""
    shape = pod_shape(pod)
    delta, gpu_choice = frag.delta(state, shape, pod.gpu, nodes)
    if len(nodes) <= FEW_ROWS:
        # FGD's score through numpy's exp, as below: libm's may differ in the last bit.
        fgd = (1.0 / (1.0 + np.exp(delta / 1000.0)) * 100.0).astype(np.int64).tolist()
        few = [
            _pair_row(state, pod, shape, int(i), d, f, c)
            for i, d, f, c in zip(nodes, delta.tolist(), fgd, gpu_choice.tolist(), strict=True)
        ]
        return np.array(few, np.float32).reshape(len(nodes), len(PAIR_FEATURES)), gpu_choice
    alloc = state.allocatable[nodes]
    req = state.requested[nodes]
    cpu_cap = alloc[:, CPU_COLUMN].astype(np.float64)
    mem_cap = alloc[:, MEMORY_COLUMN].astype(np.float64)
    cpu_after = cpu_cap - req[:, CPU_COLUMN] - pod.cpu_milli
    mem_after = mem_cap - req[:, MEMORY_COLUMN] - pod.memory
    free = state.gpu_free_milli[nodes]
    gpus = state.gpu_count[nodes].astype(np.float64)
    idle_after = free.sum(axis=1) - shape.gpu_count * shape.gpu_milli
    full_after = (free == MILLI_PER_GPU).sum(axis=1).astype(np.float64)
    share_left = np.zeros(nodes.size)
    opens = np.zeros(nodes.size)
    if shape.gpu_count == 1 and 0 < shape.gpu_milli < MILLI_PER_GPU:
        chosen = free[np.arange(nodes.size), gpu_choice]
        share_left = (chosen - shape.gpu_milli) / MILLI_PER_GPU
        opens = (chosen == MILLI_PER_GPU).astype(np.float64)
        full_after -= opens
    elif shape.gpu_milli == MILLI_PER_GPU:
        full_after -= shape.gpu_count
    idle_gpus = idle_after / MILLI_PER_GPU
    cores_after = cpu_after / 1000
    shortfalls = {
        f"cpu_shortfall_{c}": np.maximum(c * idle_gpus - cores_after, 0.0) / CORES_PER_GPU_SCALE
        for c in RESERVES_CORES_PER_GPU
    }
    # FGD's own score: trunc(100 * sigmoid(-dF / 1000)), the same float operations.
    fgd = (1.0 / (1.0 + np.exp(delta / 1000.0)) * 100.0).astype(np.int64)
    rows = columns(
        PAIR_FEATURES,
        {
            "fgd_score": fgd / 100.0,
            "frag_delta": np.clip(delta / 1000.0, -4.0, 4.0),
            "cpu_left_after": cpu_after / MAX_SPEC_CPU,
            "cpu_free_after": _ratio(cpu_after, cpu_cap),
            "memory_free_after": _ratio(mem_after, mem_cap),
            "gpu_free_after": _ratio(idle_after.astype(np.float64), gpus * MILLI_PER_GPU),
            "gpus_fully_free_after": full_after / MAX_GPUS_PER_NODE,
            "idle_gpus_after": idle_gpus / MAX_GPUS_PER_NODE,
            "cpu_per_idle_gpu_after": _cores_per_gpu(cpu_after, idle_gpus),
            **shortfalls,
            "share_gpu_left_after": share_left,
            "share_opens_gpu": opens,
            "best_fit": 1.0 - (cpu_after / MAX_SPEC_CPU + idle_after / MAX_SPEC_GPU) / 2,
        },
    )
    return rows, gpu_choice


def _pair_row(
    state: ClusterState, pod: Pod, shape: PodShape, i: int, delta: float, fgd: int, choice: int
) -> list[float]:
    """``pair_rows`` of one node, in Python floats: the same operations, one value at a
    time (``fgd``: FGD's integer score, computed with the arrays')."""
    alloc, req = state.allocatable[i], state.requested[i]
    cpu_cap, mem_cap = float(alloc[CPU_COLUMN]), float(alloc[MEMORY_COLUMN])
    cpu_after = cpu_cap - int(req[CPU_COLUMN]) - pod.cpu_milli
    mem_after = mem_cap - int(req[MEMORY_COLUMN]) - pod.memory
    free = state.gpu_free_milli[i].tolist()
    gpus = float(state.gpu_count[i])
    idle_after = sum(free) - shape.gpu_count * shape.gpu_milli
    full_after = float(sum(f == MILLI_PER_GPU for f in free))
    share_left = opens = 0.0
    if shape.gpu_count == 1 and 0 < shape.gpu_milli < MILLI_PER_GPU:
        chosen = free[choice]
        share_left = (chosen - shape.gpu_milli) / MILLI_PER_GPU
        opens = 1.0 if chosen == MILLI_PER_GPU else 0.0
        full_after -= opens
    elif shape.gpu_milli == MILLI_PER_GPU:
        full_after -= shape.gpu_count
    idle_gpus = idle_after / MILLI_PER_GPU
    cores_after = cpu_after / 1000
    values = {
        "fgd_score": fgd / 100.0,
        "frag_delta": min(max(delta / 1000.0, -4.0), 4.0),
        "cpu_left_after": cpu_after / MAX_SPEC_CPU,
        "cpu_free_after": _one_ratio(cpu_after, cpu_cap),
        "memory_free_after": _one_ratio(mem_after, mem_cap),
        "gpu_free_after": _one_ratio(float(idle_after), gpus * MILLI_PER_GPU),
        "gpus_fully_free_after": full_after / MAX_GPUS_PER_NODE,
        "idle_gpus_after": idle_gpus / MAX_GPUS_PER_NODE,
        "cpu_per_idle_gpu_after": _one_cores_per_gpu(cpu_after, idle_gpus),
        **{
            f"cpu_shortfall_{c}": max(c * idle_gpus - cores_after, 0.0) / CORES_PER_GPU_SCALE
            for c in RESERVES_CORES_PER_GPU
        },
        "share_gpu_left_after": share_left,
        "share_opens_gpu": opens,
        "best_fit": 1.0 - (cpu_after / MAX_SPEC_CPU + idle_after / MAX_SPEC_GPU) / 2,
    }
    return [values[name] for name in PAIR_FEATURES]


def _one_ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else 0.0


def _one_cores_per_gpu(cpu_milli: float, idle_gpus: float) -> float:
    per_gpu = cpu_milli / 1000 / max(idle_gpus, 1e-9) if idle_gpus > 0 else math.inf
    return min(per_gpu / CORES_PER_GPU_SCALE, 4.0)


def _ratio(numerator: Float64Array, denominator: Float64Array) -> Float64Array:
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, numerator / safe, 0.0)


def _cores_per_gpu(cpu_milli: Float64Array, idle_gpus: Float64Array) -> Float64Array:
    """Cores left per idle GPU, in units of 16 cores, capped at 4 (and 4 with no idle GPU)."""
    per_gpu = np.where(idle_gpus > 0, cpu_milli / 1000 / np.maximum(idle_gpus, 1e-9), np.inf)
    return np.minimum(per_gpu / CORES_PER_GPU_SCALE, 4.0)
