"""The policy's view of one decision: a graph of nodes, the pod, the feasible nodes.

One builder serves the simulator, the trainer and the live operator: it reads only a
``ClusterState`` and a ``Pod`` (plus the typical workload), so a policy trained on a
replay sees live exactly the features it was trained on. What it is made of, one
module each:

- the feature lists, their columns and scales (``scheduler.policy.features``) and the
  arithmetic of the rows (``feature_rows``);
- the edges between nodes of the same shape, zone or rack (``edges``);
- the workload's demand and the cluster's supply per GPU model (``workload``);
- the mask of feasible nodes, from the profile's filters (``feasible_nodes``, here).

The builder is their cache: node rows are kept per node version (a placement
recomputes one row); edges and the supply statistics are rebuilt only when a node's
shape or topology labels change. The GPU a pod gets on the chosen node is
``gpu_choice.fgd_gpus``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import CycleContext, FilterPlugin
from scheduler.framework.profile import run_filters
from scheduler.objects.pod import Pod
from scheduler.policy.edges import SignatureWatch, structure_edges
from scheduler.policy.feature_rows import node_rows, pair_rows, pod_row
from scheduler.policy.features import NODE_FEATURES, FloatArray
from scheduler.policy.frag_delta import FragDelta
from scheduler.policy.workload import ClusterSupply, WorkloadDemand
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.fragmentation import TypicalPods

# Pod rows kept (then made again): a cluster's pods come in a few dozen requests.
MAX_POD_ROWS = 1024


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


class GraphBuilder:
    """Features for one decision, cached between decisions by node version. With
    ``edges=False`` no structure edges are built (``edge_index`` is empty): for a
    caller that reads the statistics and the features only (the ``FgdReserve``
    plugin); the edges took 0.1 s of a 5,000-node start."""

    def __init__(self, typical: TypicalPods | None, degree: int = 4, edges: bool = True) -> None:
        self.typical = typical or TypicalPods((), ())
        self.degree = degree
        self.edges = edges
        self.frag = FragDelta(self.typical)
        self.demand = WorkloadDemand.of(self.typical)
        self.supply = ClusterSupply.empty()
        self._serial = -1
        self._version = np.zeros(0, np.int64)
        self._node_x = np.zeros((0, len(NODE_FEATURES)), np.float32)
        self._edges = np.zeros((2, 0), np.int64)
        self._signatures = SignatureWatch()
        # Pod rows by what they are made of, for the current supply statistics.
        self._pod_rows: dict[tuple[int, int, int, int, bool], FloatArray] = {}

    # ---- per state ------------------------------------------------------------------

    def _sync(self, state: ClusterState) -> None:
        """Reset caches for a new state; rebuild edges and the supply statistics when
        what they are made of changes: the node set, a node's shape or its topology
        labels (``edges.node_signature``)."""
        if state.serial != self._serial:
            self._serial = state.serial
            self._signatures.forget()
        if self._signatures.changed(state) or self._version.size != len(state):
            if self.edges:
                self._edges = structure_edges(state, self.degree)
            self._version = np.full(len(state), -1, np.int64)
            self._node_x = np.zeros((len(state), len(NODE_FEATURES)), np.float32)
            self.supply = ClusterSupply.of(state, self.typical, self.demand)
            self._pod_rows.clear()

    def cpu_demand_and_supply(self, state: ClusterState) -> tuple[float, float]:
        """Cores per GPU the typical workload asks (GPU and CPU-only pods together, per
        typical GPU) and cores per GPU the cluster has."""
        self._sync(state)
        return self.demand.cpu_per_gpu, self.supply.cpu_per_gpu

    @property
    def edge_index(self) -> IntArray:
        return self._edges

    def node_features(self, state: ClusterState) -> FloatArray:
        """``[N, len(NODE_FEATURES)]``, recomputing only rows whose node changed."""
        return self.node_features_and_stale(state)[0]

    def node_features_and_stale(self, state: ClusterState) -> tuple[FloatArray, IntArray]:
        """``node_features`` and the rows it recomputed (those whose node changed, or all
        of them after the statistics were rebuilt)."""
        self._sync(state)
        stale = np.flatnonzero(self._version != state.node_version)
        if stale.size:
            self._node_x[stale] = node_rows(state, stale, self.frag, self.supply)
            self._version[stale] = state.node_version[stale]
        return self._node_x, stale

    # ---- per pod --------------------------------------------------------------------

    def pod_features(self, pod: Pod, state: ClusterState) -> FloatArray:
        """``[len(POD_FEATURES)]``, read-only: made once per pod request (CPU, memory,
        GPU share, count, whether it names models) until the supply statistics change."""
        self._sync(state)
        gpu = pod.gpu
        key = (pod.cpu_milli, pod.memory, gpu.milli_per_gpu, gpu.count, bool(gpu.models))
        row = self._pod_rows.get(key)
        if row is None:
            if len(self._pod_rows) >= MAX_POD_ROWS:
                self._pod_rows.clear()
            row = pod_row(pod, self.demand, self.supply)
            row.flags.writeable = False
            self._pod_rows[key] = row
        return row

    def pair_features(self, state: ClusterState, pod: Pod, nodes: IntArray) -> tuple[FloatArray, IntArray]:
        """``([K, len(PAIR_FEATURES)], gpu choice [K])`` for placing ``pod`` on ``nodes``."""
        return pair_rows(state, pod, nodes, self.frag)

    def build(self, state: ClusterState, pod: Pod, nodes: IntArray) -> PolicyInput:
        node_x = self.node_features(state)
        pair_x, gpu_choice = self.pair_features(state, pod, nodes)
        return PolicyInput(
            node_x=node_x,
            edge_index=self._edges,
            candidates=nodes,
            pair_x=pair_x,
            pod_x=self.pod_features(pod, state).copy(),  # training tensors are made from it
            gpu_choice=gpu_choice,
        )
