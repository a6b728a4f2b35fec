"""The policy's view of one decision: a graph of nodes, the pod, the feasible nodes.

One builder serves the simulator, the trainer and the live operator: it reads only a
``ClusterState`` and a ``Pod`` (plus the typical workload), so a policy trained on a
replay sees live exactly the features it was trained on.

- **Node features** (``NODE_FEATURES``, one row per node, independent of the pod):
  capacity, free share and utilisation of CPU, memory and GPU, the per-GPU free-share
  summary (fully free GPUs, partial free share, largest partial), CPU left per idle
  GPU, the node's fragment amount F, how much of the typical GPU workload may run on
  its GPU model and how common that model is. Cached per node version: a placement
  recomputes one row.
- **Edges** carry structure: each node is linked to ``degree`` neighbours among the
  nodes of the same shape (GPU model, GPU count, CPU and memory), and among the nodes
  of the same zone or rack when nodes carry ``topology.kubernetes.io/zone`` /
  ``topology.rl-scheduler.io/rack`` labels (``scheduler.objects.topology``); links run
  both ways, in node order, so the graph is deterministic.
- **Pair features** (``PAIR_FEATURES``, one row per feasible node, for this pod): the
  FGD score and the continuous fragmentation change dF, what is left after placing the
  pod, and the CPU shortfall against a CPU reserve per idle GPU at several reserves
  (the capacity FGD strands at saturation is idle GPUs on nodes without CPU).
- **Pod features** (``POD_FEATURES``): the request, its kind, and the workload context
  (CPU per GPU of the typical GPU pods and of the CPU-only ones, the cluster's CPU per
  GPU).
- The **mask** of feasible nodes comes from the profile's filters (``feasible_nodes``).

``FEATURE_SCHEMA_VERSION`` changes whenever a feature's meaning or order changes; a
checkpoint trained on another version is refused.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import CycleContext, FilterPlugin
from scheduler.framework.profile import run_filters
from scheduler.objects.pod import Pod
from scheduler.objects.topology import RACK_LABEL, ZONE_LABEL
from scheduler.plugins.scores.fgd_common import MAX_SPEC_CPU, MAX_SPEC_GPU
from scheduler.plugins.scores.gpu_choice import exclusive_gpus
from scheduler.policy.frag_delta import FragDelta
from scheduler.resources.gpu import MAX_GPUS_PER_NODE, MILLI_PER_GPU
from scheduler.state.cluster_state import CPU_COLUMN, MEMORY_COLUMN, ClusterState, IntArray
from scheduler.state.fragmentation import PodShape, TypicalPods, pod_shape

FloatArray = npt.NDArray[np.float32]

FEATURE_SCHEMA_VERSION = 1

GIB = 2**30
MEMORY_SCALE = 1024 * GIB  # the largest openb node has 1 TiB
CORES_PER_GPU_SCALE = 16.0  # CPU per GPU features are in units of 16 cores
RESERVES_CORES_PER_GPU = (3, 5, 7, 9, 11)
TOPOLOGY_LABELS = (ZONE_LABEL, RACK_LABEL)

NODE_FEATURES = (
    "cpu_capacity",  # allocatable CPU / 128 cores
    "memory_capacity",  # allocatable memory / 1 TiB
    "gpu_capacity",  # GPUs / 8
    "cpu_free",  # share of the node's CPU left
    "memory_free",
    "gpu_free",  # share of the node's GPU milli left (0 without GPUs)
    "cpu_left",  # CPU left / 128 cores
    "gpus_fully_free",  # / 8
    "gpu_partial_free",  # free milli on partly used GPUs / 8000
    "gpu_largest_partial",  # largest free share of a partly used GPU / 1000
    "cpu_per_idle_gpu",  # cores left per idle GPU / 16, capped at 4
    "frag",  # F(node) / 8000
    "frag_rate",  # F(node) / idle milli
    "model_access",  # share of the typical GPU workload that may run on this model
    "model_share",  # share of the cluster's GPUs of this model
    "in_use",  # 1 if any pod is placed on the node
    "order",  # position in the state's node order / nodes (the fixed priority of ties)
)
PAIR_FEATURES = (
    "fgd_score",  # FGD's integer score / 100
    "frag_delta",  # dF / 1000, clipped to [-4, 4]
    "cpu_left_after",  # / 128 cores
    "cpu_free_after",  # share of the node's CPU left after placing
    "memory_free_after",
    "gpu_free_after",
    "gpus_fully_free_after",  # / 8
    "idle_gpus_after",  # idle GPU share left on the node after placing, in GPUs / 8
    "cpu_per_idle_gpu_after",  # / 16 cores, capped at 4
    *(f"cpu_shortfall_{c}" for c in RESERVES_CORES_PER_GPU),  # (c * idle GPUs - cores left)+ / 16
    "share_gpu_left_after",  # free share of the GPU a share pod takes, after (/1000)
    "share_opens_gpu",  # 1 if a share pod takes a fully free GPU
    "best_fit",  # 1 - (cpu left / 128 cores + GPU left / 8 GPUs) / 2, after placing
)
POD_FEATURES = (
    "cpu",  # / 32 cores
    "memory",  # / 256 GiB
    "gpu_milli",  # per GPU / 1000
    "gpu_count",  # / 8
    "is_share",
    "is_cpu_only",
    "has_model_constraint",
    "cpu_per_gpu",  # cores per GPU of the pod / 16 (0 for CPU-only pods)
    "workload_gpu_cpu_per_gpu",  # typical GPU pods' cores per GPU / 16
    "workload_cpu_only_per_gpu",  # typical CPU-only pods' cores per typical GPU / 16
    "cluster_cpu_per_gpu",  # the cluster's cores per GPU / 16 (0 without GPUs)
    "cpu_pressure",  # workload cores per GPU / cluster cores per GPU (0 without GPUs)
)


@dataclass(frozen=True)
class PolicyInput:
    """Everything the policy sees for one decision."""

    node_x: FloatArray  # [N, len(NODE_FEATURES)], all nodes
    edge_index: IntArray  # [2, E], source -> target
    candidates: IntArray  # [K] feasible node indices
    pair_x: FloatArray  # [K, len(PAIR_FEATURES)]
    pod_x: FloatArray  # [len(POD_FEATURES)]
    gpu_choice: IntArray  # [K] the GPU a share pod would get on each candidate (-1 otherwise)


def feasible_nodes(state: ClusterState, pod: Pod, filters: Sequence[FilterPlugin]) -> IntArray:
    """Indices of the nodes that pass ``filters`` (the action mask, as indices)."""
    return run_filters(CycleContext(state, pod), filters).feasible


def action_mask(state: ClusterState, pod: Pod, filters: Sequence[FilterPlugin]) -> npt.NDArray[np.bool_]:
    mask = np.zeros(len(state), np.bool_)
    mask[feasible_nodes(state, pod, filters)] = True
    return mask


def _ring_edges(groups: dict[tuple[object, ...], list[int]], degree: int) -> set[tuple[int, int]]:
    edges: set[tuple[int, int]] = set()
    half = max(1, degree // 2)
    for members in groups.values():
        size = len(members)
        for position, node in enumerate(members):
            for step in range(1, min(half, size - 1) + 1):
                other = members[(position + step) % size]
                edges.add((node, other))
                edges.add((other, node))
    return edges


def node_shape(state: ClusterState, i: int) -> tuple[object, ...]:
    """Node ``i``'s shape, which ``structure_edges`` links: GPU model and count, CPU
    and memory."""
    node = state.nodes[i]
    return (
        node.gpu_model,
        node.gpu_count,
        int(state.allocatable[i, CPU_COLUMN]),
        int(state.allocatable[i, MEMORY_COLUMN]),
    )


def structure_edges(state: ClusterState, degree: int) -> IntArray:
    """``[2, E]`` links between nodes of the same shape and of the same zone/rack."""
    shapes: dict[tuple[object, ...], list[int]] = defaultdict(list)
    zones: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for i, node in enumerate(state.nodes):
        shapes[node_shape(state, i)].append(i)
        for label in TOPOLOGY_LABELS:
            if label in node.labels:
                zones[(label, node.labels[label])].append(i)
    edges = sorted(_ring_edges(shapes, degree) | _ring_edges(zones, degree), key=lambda e: (e[1], e[0]))
    if not edges:
        return np.zeros((2, 0), np.int64)
    return np.array(edges, np.int64).T.copy()


def node_signature(state: ClusterState, i: int) -> tuple[object, ...]:
    """What ``structure_edges`` and the model statistics read of node ``i``."""
    node = state.nodes[i]
    return (node.name, *node_shape(state, i), *(node.labels.get(label) for label in TOPOLOGY_LABELS))


class GraphBuilder:
    """Features for one decision, cached between decisions by node version."""

    def __init__(self, typical: TypicalPods | None, degree: int = 4) -> None:
        self.typical = typical or TypicalPods((), ())
        self.degree = degree
        self.frag = FragDelta(self.typical)
        self._serial = -1
        self._version = np.zeros(0, np.int64)
        self._node_x = np.zeros((0, len(NODE_FEATURES)), np.float32)
        self._edges = np.zeros((2, 0), np.int64)
        self._signatures: list[tuple[object, ...]] = []
        self._signature_version = np.zeros(0, np.int64)
        self._model_access = np.zeros(1, np.float32)
        self._model_share = np.zeros(1, np.float32)
        self.cluster_cpu_per_gpu = 0.0
        gpu_freq = sum(f for s, f in zip(self.typical.shapes, self.typical.freq, strict=True) if s.gpu_count)
        gpus = sum(
            f * s.gpu_count * s.gpu_milli / MILLI_PER_GPU
            for s, f in zip(self.typical.shapes, self.typical.freq, strict=True)
        )
        gpu_cpu = sum(
            f * s.cpu_milli / 1000
            for s, f in zip(self.typical.shapes, self.typical.freq, strict=True)
            if s.gpu_count
        )
        cpu_only = sum(
            f * s.cpu_milli / 1000
            for s, f in zip(self.typical.shapes, self.typical.freq, strict=True)
            if not s.gpu_count
        )
        self._gpu_freq = gpu_freq
        self.workload_gpu_cpu_per_gpu = gpu_cpu / gpus if gpus else 0.0
        self.workload_cpu_only_per_gpu = cpu_only / gpus if gpus else 0.0

    # ---- per state ------------------------------------------------------------------

    def _sync(self, state: ClusterState) -> None:
        """Reset caches for a new state; rebuild edges and model statistics when what
        they are made of changes: the node set, a node's shape or its topology labels.
        (Any label or taint used to rebuild them, and a node's new allocatable did
        not; a cluster adding a label to each of its 5,000 nodes, one at a time,
        rebuilt the edges once per node.)"""
        if state.serial != self._serial:
            self._serial = state.serial
            self._signatures = []
        if self._structure_changed(state) or self._version.size != len(state):
            self._edges = structure_edges(state, self.degree)
            self._version = np.full(len(state), -1, np.int64)
            self._node_x = np.zeros((len(state), len(NODE_FEATURES)), np.float32)
            self._model_statistics(state)

    def _structure_changed(self, state: ClusterState) -> bool:
        """Whether a node's ``node_signature`` differs from the last check's; only the
        nodes touched since then (``node_version``) are looked at."""
        n = len(state)
        if len(self._signatures) != n:
            self._signatures = [node_signature(state, i) for i in range(n)]
            self._signature_version = state.node_version.copy()
            return True
        touched = np.flatnonzero(self._signature_version != state.node_version)
        changed = False
        for i in touched.tolist():
            signature = node_signature(state, i)
            if signature != self._signatures[i]:
                self._signatures[i] = signature
                changed = True
        self._signature_version[touched] = state.node_version[touched]
        return changed

    def _model_statistics(self, state: ClusterState) -> None:
        models = state.gpu_models
        access = self.typical.accessible(models)  # [T, M + 1]
        freq = np.array(self.typical.freq, np.float64)
        is_gpu = np.array([s.gpu_count > 0 for s in self.typical.shapes], np.bool_)
        if self._gpu_freq > 0:
            self._model_access = ((freq[is_gpu, None] * access[is_gpu]).sum(axis=0) / self._gpu_freq).astype(
                np.float32
            )
        else:
            self._model_access = np.ones(len(models) + 1, np.float32)
        gpus = state.gpu_count
        total = float(gpus.sum())
        share = np.zeros(len(models) + 1, np.float32)
        if total:
            np.add.at(share, state.gpu_model_id, gpus / total)  # id -1 lands in the last slot
        self._model_share = share
        cores = float(state.allocatable[:, CPU_COLUMN].sum()) / 1000
        self.cluster_cpu_per_gpu = cores / total if total else 0.0

    @property
    def cpu_pressure(self) -> float:
        """Cores per GPU the workload asks over cores per GPU the cluster has."""
        demand = self.workload_gpu_cpu_per_gpu + self.workload_cpu_only_per_gpu
        return demand / self.cluster_cpu_per_gpu if self.cluster_cpu_per_gpu else 0.0

    def cpu_demand_and_supply(self, state: ClusterState) -> tuple[float, float]:
        """Cores per GPU the typical workload asks (GPU and CPU-only pods together, per
        typical GPU) and cores per GPU the cluster has."""
        self._sync(state)
        return self.workload_gpu_cpu_per_gpu + self.workload_cpu_only_per_gpu, self.cluster_cpu_per_gpu

    @property
    def edge_index(self) -> IntArray:
        return self._edges

    def node_features(self, state: ClusterState) -> FloatArray:
        """``[N, len(NODE_FEATURES)]``, recomputing only rows whose node changed."""
        self._sync(state)
        stale = np.flatnonzero(self._version != state.node_version)
        if stale.size:
            self._node_x[stale] = self._node_rows(state, stale)
            self._version[stale] = state.node_version[stale]
        return self._node_x

    def stale_nodes(self, state: ClusterState) -> IntArray:
        """Rows that ``node_features`` would recompute now."""
        self._sync(state)
        return np.flatnonzero(self._version != state.node_version)

    def _node_rows(self, state: ClusterState, rows: IntArray) -> FloatArray:
        alloc = state.allocatable[rows]
        req = state.requested[rows]
        cpu_cap = alloc[:, CPU_COLUMN].astype(np.float64)
        mem_cap = alloc[:, MEMORY_COLUMN].astype(np.float64)
        cpu_left = cpu_cap - req[:, CPU_COLUMN]
        mem_left = mem_cap - req[:, MEMORY_COLUMN]
        gpus = state.gpu_count[rows].astype(np.float64)
        free = state.gpu_free_milli[rows]
        idle = free.sum(axis=1).astype(np.float64)
        full = (free == MILLI_PER_GPU).sum(axis=1)
        partial = np.where((free > 0) & (free < MILLI_PER_GPU), free, 0)
        frag = self.frag.frag(state, rows)
        model = state.gpu_model_id[rows]
        in_use = np.array([len(state.pods_on_node[i]) > 0 for i in rows], np.float64)
        idle_gpus = idle / MILLI_PER_GPU
        out = np.stack(
            [
                cpu_cap / MAX_SPEC_CPU,
                mem_cap / MEMORY_SCALE,
                gpus / MAX_GPUS_PER_NODE,
                _ratio(cpu_left, cpu_cap),
                _ratio(mem_left, mem_cap),
                _ratio(idle, gpus * MILLI_PER_GPU),
                cpu_left / MAX_SPEC_CPU,
                full / MAX_GPUS_PER_NODE,
                partial.sum(axis=1) / MAX_SPEC_GPU,
                partial.max(axis=1) / MILLI_PER_GPU,
                _cores_per_gpu(cpu_left, idle_gpus),
                frag / MAX_SPEC_GPU,
                _ratio(frag, idle),
                self._model_access[model],
                self._model_share[model],
                in_use,
                rows / max(len(state), 1),
            ],
            axis=1,
        )
        return out.astype(np.float32)

    # ---- per pod --------------------------------------------------------------------

    def pod_features(self, pod: Pod, state: ClusterState) -> FloatArray:
        self._sync(state)
        gpu = pod.gpu
        count = gpu.count if gpu.milli_per_gpu else 0
        gpu_total = count * gpu.milli_per_gpu / MILLI_PER_GPU
        return np.array(
            [
                pod.cpu_milli / 32_000,
                pod.memory / (256 * GIB),
                gpu.milli_per_gpu / MILLI_PER_GPU if count else 0.0,
                count / MAX_GPUS_PER_NODE,
                float(gpu.is_share),
                float(count == 0),
                float(bool(gpu.models)),
                (pod.cpu_milli / 1000 / gpu_total / CORES_PER_GPU_SCALE) if gpu_total else 0.0,
                self.workload_gpu_cpu_per_gpu / CORES_PER_GPU_SCALE,
                self.workload_cpu_only_per_gpu / CORES_PER_GPU_SCALE,
                self.cluster_cpu_per_gpu / CORES_PER_GPU_SCALE,
                self.cpu_pressure,
            ],
            np.float32,
        )

    def fgd_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        """FGD's GPU choice on ``node``: a GPU share goes to the GPU whose fragmentation
        grows least; whole GPUs are taken as the exclusive-GPU plugins take them."""
        shape = pod_shape(ctx.pod)
        if shape.gpu_count == 1 and 0 < shape.gpu_milli < 1000:
            _, gpu = self.frag.delta(ctx.state, shape, ctx.pod.gpu, np.array([node], np.int64))
            return (int(gpu[0]),)
        return exclusive_gpus(ctx, node)

    def pair_features(self, state: ClusterState, pod: Pod, nodes: IntArray) -> tuple[FloatArray, IntArray]:
        """``([K, len(PAIR_FEATURES)], gpu choice [K])`` for placing ``pod`` on ``nodes``."""
        shape: PodShape = pod_shape(pod)
        delta, gpu_choice = self.frag.delta(state, shape, pod.gpu, nodes)
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
        shortfalls = [
            np.maximum(c * idle_gpus - cores_after, 0.0) / CORES_PER_GPU_SCALE for c in RESERVES_CORES_PER_GPU
        ]
        # FGD's own score: trunc(100 * sigmoid(-dF / 1000)), the same float operations.
        fgd = (1.0 / (1.0 + np.exp(delta / 1000.0)) * 100.0).astype(np.int64)
        out = np.stack(
            [
                fgd / 100.0,
                np.clip(delta / 1000.0, -4.0, 4.0),
                cpu_after / MAX_SPEC_CPU,
                _ratio(cpu_after, cpu_cap),
                _ratio(mem_after, mem_cap),
                _ratio(idle_after.astype(np.float64), gpus * MILLI_PER_GPU),
                full_after / MAX_GPUS_PER_NODE,
                idle_gpus / MAX_GPUS_PER_NODE,
                _cores_per_gpu(cpu_after, idle_gpus),
                *shortfalls,
                share_left,
                opens,
                1.0 - (cpu_after / MAX_SPEC_CPU + idle_after / MAX_SPEC_GPU) / 2,
            ],
            axis=1,
        )
        return out.astype(np.float32), gpu_choice

    def build(self, state: ClusterState, pod: Pod, nodes: IntArray) -> PolicyInput:
        node_x = self.node_features(state)
        pair_x, gpu_choice = self.pair_features(state, pod, nodes)
        return PolicyInput(
            node_x=node_x,
            edge_index=self._edges,
            candidates=nodes,
            pair_x=pair_x,
            pod_x=self.pod_features(pod, state),
            gpu_choice=gpu_choice,
        )


def _ratio(
    numerator: npt.NDArray[np.float64], denominator: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, numerator / safe, 0.0)


def _cores_per_gpu(
    cpu_milli: npt.NDArray[np.float64], idle_gpus: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Cores left per idle GPU, in units of 16 cores, capped at 4 (and 4 with no idle GPU)."""
    per_gpu = np.where(idle_gpus > 0, cpu_milli / 1000 / np.maximum(idle_gpus, 1e-9), np.inf)
    return np.minimum(per_gpu / CORES_PER_GPU_SCALE, 4.0)
