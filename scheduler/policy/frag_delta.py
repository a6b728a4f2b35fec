"""Continuous fragmentation change of placing a pod on each node.

FGD ranks nodes by ``trunc(100 * sigmoid(-dF / 1000))``: the integer hides most of
dF (one point is ~40 milli-GPU near zero), and the many ties fall to node order. The
learned policy sees dF itself:

    dF(node) = F(node after placing the pod) - F(node now)     (milli-GPU, float)

For a GPU share, every GPU with room is tried and the node keeps the GPU with the
smallest dF (ties to the lowest index); that GPU is also the one the pod gets. Whole
GPUs go to the lowest-index free GPUs, as FGD places them; a CPU-only pod changes F
through the CPU it takes.

Values are cached per pod shape and node version (``ShapeCache``, as ``FgdScore``'s):
between two pods of the same shape only the nodes that changed are computed again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.plugins.scores.fgd import NodeFragCache
from scheduler.plugins.scores.fgd_common import cpu_left
from scheduler.plugins.scores.node_version_cache import ShapeCache, unset_versions
from scheduler.resources.gpu import GpuRequest
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray
from scheduler.state.fragmentation import FragmentationModel, PodShape, TypicalPods
from scheduler.state.gpu_fit import gpus_fitting

FloatArray = npt.NDArray[np.float64]


@dataclass
class _Entry:
    version: IntArray
    delta: FloatArray
    gpu: IntArray

    @classmethod
    def unset(cls, n: int) -> _Entry:
        return cls(unset_versions(n), np.zeros(n), np.full(n, -1, np.int64))


def _whole_gpu_state(free: IntArray, fits: BoolArray, shape: PodShape) -> IntArray:
    """Free shares after taking ``gpu_count`` lowest-index GPUs that fit."""
    after = free.copy()
    if shape.gpu_count:
        taken = fits & (np.cumsum(fits, axis=1) <= shape.gpu_count)
        after -= np.where(taken, shape.gpu_milli, 0)
    return after


class FragDelta:
    """dF and the chosen GPU per node for one pod shape, cached by node version."""

    def __init__(self, typical: TypicalPods) -> None:
        self.model = FragmentationModel(typical)
        self.node_frag = NodeFragCache(self.model)
        self._cache: ShapeCache[_Entry] = ShapeCache(_Entry.unset, self._forget_frag)

    def _forget_frag(self) -> None:
        self.node_frag = NodeFragCache(self.model)

    def frag(self, state: ClusterState, nodes: IntArray) -> FloatArray:
        """F of the nodes' current states (milli-GPU)."""
        self._cache.sync(state)
        return self.node_frag.frag(state, nodes)

    def delta(
        self, state: ClusterState, shape: PodShape, gpu: GpuRequest, nodes: IntArray
    ) -> tuple[FloatArray, IntArray]:
        """``(dF, gpu)`` for ``nodes``; ``gpu`` is the share's GPU (-1 for other pods).
        ``gpu`` (the pod's request) decides which GPUs fit."""
        entry = self._cache.entry(state, (shape, gpu.gpu_filter_key))
        stale = ShapeCache.stale(entry, state, nodes)
        if stale.size:
            before = self.node_frag.frag(state, stale)
            fits = gpus_fitting(state, stale, gpu)
            if shape.gpu_count == 1 and 0 < shape.gpu_milli < 1000:
                after, choice = self._share(state, shape, stale, fits)
            else:
                after = self._whole(state, shape, stale, fits)
                choice = np.full(stale.size, -1, np.int64)
            entry.delta[stale] = after - before
            entry.gpu[stale] = choice
            ShapeCache.mark_fresh(entry, state, stale)
        return entry.delta[nodes], entry.gpu[nodes]

    def _share(
        self, state: ClusterState, shape: PodShape, nodes: IntArray, fits_pod: BoolArray
    ) -> tuple[FloatArray, IntArray]:
        """F after the share takes each GPU with room; the best GPU per node. Only one
        GPU changes per hypothesis, so the per-typical-pod counts are updated rather
        than recounted (G times less work than ``frag_amount`` on every hypothesis,
        the same floats)."""
        model = self.model
        free = state.gpu_free_milli[nodes]  # [B, G]
        batch, gpus = free.shape
        milli, count = model.typical.gpu_milli, model.typical.gpu_count  # [T]
        fits = free[:, :, None] >= milli[None, None, :]  # [B, G, T]
        small = np.where(fits, 0, free[:, :, None])  # free milli stranded for t, per GPU
        after = free - shape.gpu_milli  # [B, G] the chosen GPU's free share after
        fits_after = after[:, :, None] >= milli[None, None, :]
        small_after = np.where(fits_after, 0, after[:, :, None])
        hosts = fits.sum(axis=1)[:, None, :] - fits + fits_after  # [B, G, T]
        stranded = small.sum(axis=1)[:, None, :] - small + small_after
        idle = np.repeat(free.sum(axis=1) - shape.gpu_milli, gpus)
        cpu = np.repeat(cpu_left(state, nodes) - shape.cpu_milli, gpus)
        models = np.repeat(state.gpu_model_id[nodes], gpus)
        frag = model.frag_from_counts(
            cpu,
            idle,
            (hosts >= count[None, None, :]).reshape(batch * gpus, -1),
            stranded.reshape(batch * gpus, -1),
            models,
            state.gpu_models,
        ).reshape(batch, gpus)
        frag = np.where(fits_pod, frag, np.inf)
        best = frag.argmin(axis=1)
        return frag[np.arange(batch), best], best

    def _whole(self, state: ClusterState, shape: PodShape, nodes: IntArray, fits: BoolArray) -> FloatArray:
        after = _whole_gpu_state(state.gpu_free_milli[nodes], fits, shape)
        return self.model.frag_amount(
            cpu_left(state, nodes) - shape.cpu_milli, after, state.gpu_model_id[nodes], state.gpu_models
        )
