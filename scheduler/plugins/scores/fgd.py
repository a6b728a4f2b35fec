"""FGD, Fragmentation Gradient Descent (Weng et al., USENIX ATC'23): place the pod
where it increases the expected GPU fragmentation the least.

    score(node) = trunc(100 * sigmoid((F(node) - F(node after placing)) / 1000))

with F the fragment amount in milli-GPU (``scheduler.state.fragmentation``). A GPU
share is tried on every GPU with room, in index order, and the node scores its best
GPU (ties to the lowest index), which is also the GPU it gets. Whole-GPU pods take
the lowest-index free GPUs; a CPU-only pod changes F through the CPU it uses. Which
GPUs can take the pod is ``scheduler.state.gpu_fit``'s (memory and slots too); F
counts cores only.

Scores are cached per pod shape (and what else decides which GPUs fit) and node
version (``node_version_cache``): between two pods of the same shape only the nodes
that changed are scored again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.dra.gpu_view import scoring_pod
from scheduler.framework.plugin import CycleContext
from scheduler.plugins.scores.fgd_common import cpu_left
from scheduler.plugins.scores.gpu_choice import exclusive_gpus, taken_fullest_first
from scheduler.plugins.scores.node_version_cache import ShapeCache, unset_versions
from scheduler.resources.gpu import GpuRequest
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.fragmentation import FragmentationModel, PodShape, TypicalPods, pod_shape
from scheduler.state.gpu_fit import gpus_fitting


def sigmoid_score(before: npt.NDArray[np.float64], after: npt.NDArray[np.float64]) -> IntArray:
    x = (before - after) / 1000.0
    return (1.0 / (1.0 + np.exp(-x)) * 100.0).astype(np.int64)


@dataclass
class _ShapeScores:
    version: IntArray
    score: IntArray
    gpu: IntArray

    @classmethod
    def unset(cls, n: int) -> _ShapeScores:
        return cls(unset_versions(n), np.zeros(n, np.int64), np.full(n, -1, np.int64))


class NodeFragCache:
    """F of every node's current state, recomputed only for nodes that changed."""

    def __init__(self, model: FragmentationModel) -> None:
        self.model = model
        self._version = np.zeros(0, np.int64)
        self._frag = np.zeros(0, np.float64)

    def frag(self, state: ClusterState, nodes: IntArray) -> npt.NDArray[np.float64]:
        n = len(state)
        if self._version.size != n:
            self._version = np.resize(self._version, n)
            self._version[:] = -1
            self._frag = np.resize(self._frag, n)
        stale = nodes[self._version[nodes] != state.node_version[nodes]]
        if stale.size:
            self._frag[stale] = self.model.frag_amount(
                cpu_left(state, stale),
                state.gpu_free_milli[stale],
                state.gpu_model_id[stale],
                state.gpu_models,
            )
            self._version[stale] = state.node_version[stale]
        return self._frag[nodes]


class FgdScore:
    name = "FGD"

    def __init__(self, typical: TypicalPods) -> None:
        self.model = FragmentationModel(typical)
        self.node_frag = NodeFragCache(self.model)
        self._cache: ShapeCache[_ShapeScores] = ShapeCache(_ShapeScores.unset, self._forget_frag)

    def _forget_frag(self) -> None:
        self.node_frag = NodeFragCache(self.model)

    def _refresh(
        self, state: ClusterState, shape: PodShape, gpu: GpuRequest, nodes: IntArray
    ) -> _ShapeScores:
        entry = self._cache.entry(state, (shape, gpu.gpu_filter_key))
        stale = ShapeCache.stale(entry, state, nodes)
        if stale.size:
            before = self.node_frag.frag(state, stale)
            if shape.gpu_count == 1 and shape.gpu_milli < 1000:
                score, choice = self._score_share(state, shape, gpu, stale, before)
            else:
                score = self._score_whole(state, shape, gpu, stale, before)
                choice = np.full(stale.size, -1, np.int64)
            entry.score[stale] = score
            entry.gpu[stale] = choice
            ShapeCache.mark_fresh(entry, state, stale)
        return entry

    def _score_share(
        self,
        state: ClusterState,
        shape: PodShape,
        gpu: GpuRequest,
        nodes: IntArray,
        before: npt.NDArray[np.float64],
    ) -> tuple[IntArray, IntArray]:
        free = state.gpu_free_milli[nodes]  # [B, G]
        batch, gpus = free.shape
        # One hypothetical state per (node, GPU): that GPU gives up the share.
        hypothetical = np.repeat(free[:, None, :], gpus, axis=1)  # [B, G, G]
        diagonal = np.arange(gpus)
        hypothetical[:, diagonal, diagonal] -= shape.gpu_milli
        cpu = np.repeat(cpu_left(state, nodes) - shape.cpu_milli, gpus)
        models = np.repeat(state.gpu_model_id[nodes], gpus)
        after = self.model.frag_amount(
            cpu, hypothetical.reshape(batch * gpus, gpus), models, state.gpu_models
        )
        scores = sigmoid_score(np.repeat(before, gpus), after).reshape(batch, gpus)
        scores = np.where(gpus_fitting(state, nodes, gpu), scores, -1)
        best = scores.argmax(axis=1)  # first maximum: the lowest index wins ties
        return scores[np.arange(batch), best], best

    def _score_whole(
        self,
        state: ClusterState,
        shape: PodShape,
        gpu: GpuRequest,
        nodes: IntArray,
        before: npt.NDArray[np.float64],
    ) -> IntArray:
        free = state.gpu_free_milli[nodes].copy()
        if shape.gpu_count:
            # The simulator's NodeResource.Sub: the fullest GPUs with room first (stable).
            taken = taken_fullest_first(free, gpus_fitting(state, nodes, gpu), shape.gpu_count)
            free -= np.where(taken, shape.gpu_milli, 0)
        after = self.model.frag_amount(
            cpu_left(state, nodes) - shape.cpu_milli, free, state.gpu_model_id[nodes], state.gpu_models
        )
        return sigmoid_score(before, after)

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        pod = scoring_pod(ctx.state, ctx.pod)  # a DRA GPU pod as the GPUs it claims
        return self._refresh(ctx.state, pod_shape(pod), pod.gpu, nodes).score[nodes]

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        shape = pod_shape(ctx.pod)
        if shape.gpu_count == 1 and shape.gpu_milli < 1000:
            entry = self._refresh(ctx.state, shape, ctx.pod.gpu, np.array([node], np.int64))
            return (int(entry.gpu[node]),)
        return exclusive_gpus(ctx, node)
