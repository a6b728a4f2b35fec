"""What the lifetime source says about placing a pod on each feasible node, as features
of the learned policy (``lifetime_head``; the source is ``ProfileContext.lifetimes``).

For a GPU pod with remaining lifetime ``L``, and a node with ``G`` GPUs whose GPU ``g``
is free in ``t_g`` seconds (its residents' longest remaining lifetime; 0 when free now)
and the node whole free in ``T = max_g t_g``, all capped at the horizon ``H``, in hours
through ``lg(x) = log2(1 + x)``:

- ``lifetime_known``: 1 (0 in the unknown encoding below);
- ``pod_remaining``: lg(L);
- ``node_free_in``: lg(T); ``gpu_free_in_mean``: lg(mean_g t_g), the node's GPUs;
- ``blocked_gpu_hours``: lg(G x max(0, L - T)): how much longer, in the node's
  GPU-hours, the placement keeps the node from being whole free (the hand rule
  ``fgd-reserve-lifetime``'s GPUHours term); ``blocked_node_hours``: lg(max(0, L - T));
- ``outlived_by_node``: lg(max(0, T - L)): how long the residents outlast the pod;
- ``whole_free_now``: 1 when the node's GPUs are all free now.

Unknown (the source knows nothing, as ``HiddenLifetimes``; or a CPU-only pod, which
never keeps a GPU node from being whole free): every column 0, ``lifetime_known`` 0
included. ``LIFETIME_SCHEMA_VERSION`` changes whenever a feature's meaning or order
changes; a head trained on another version is refused.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.objects.pod import Pod
from scheduler.plugins.remaining_lifetimes import RemainingLifetimes
from scheduler.policy.features import FloatArray, columns
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.fragmentation import pod_shape

LIFETIME_SCHEMA_VERSION = 1
SECONDS_PER_HOUR = 3600.0

LIFETIME_PAIR_FEATURES = (
    "lifetime_known",
    "pod_remaining",
    "node_free_in",
    "gpu_free_in_mean",
    "blocked_gpu_hours",
    "blocked_node_hours",
    "outlived_by_node",
    "whole_free_now",
)


def _lg(hours: npt.ArrayLike) -> FloatArray:
    out: FloatArray = np.log2(1.0 + np.asarray(hours, np.float64)).astype(np.float32)
    return out


def lifetime_pair_rows(
    lifetimes: RemainingLifetimes, state: ClusterState, pod: Pod, nodes: IntArray, horizon_s: float
) -> FloatArray | None:
    """``[len(nodes), len(LIFETIME_PAIR_FEATURES)]``, or None for the unknown encoding
    (all zeros: ``unknown_rows``)."""
    if pod_shape(pod).gpu_count == 0:
        return None
    remaining = lifetimes.pod_remaining_s(pod)
    if remaining is None:
        return None
    free_in = lifetimes.gpu_free_in_s(state, nodes)
    if free_in is None:
        return None
    gpus = state.gpu_count[nodes].astype(np.int64)
    capped = np.minimum(free_in, horizon_s) / SECONDS_PER_HOUR
    node_free = capped.max(axis=1) if capped.size else np.zeros(nodes.size)
    slots = np.arange(capped.shape[1])[None, :] < gpus[:, None]
    mean_free = np.where(gpus > 0, (capped * slots).sum(axis=1) / np.maximum(gpus, 1), 0.0)
    pod_h = min(remaining, horizon_s) / SECONDS_PER_HOUR
    extension = np.maximum(pod_h - node_free, 0.0)
    return columns(
        LIFETIME_PAIR_FEATURES,
        {
            "lifetime_known": np.ones(nodes.size),
            "pod_remaining": np.full(nodes.size, np.log2(1.0 + pod_h)),
            "node_free_in": _lg(node_free),
            "gpu_free_in_mean": _lg(mean_free),
            "blocked_gpu_hours": _lg(gpus * extension),
            "blocked_node_hours": _lg(np.where(gpus > 0, extension, 0.0)),
            "outlived_by_node": _lg(np.maximum(node_free - pod_h, 0.0)),
            "whole_free_now": ((node_free == 0) & (gpus > 0)).astype(np.float64),
        },
    )


def unknown_rows(count: int) -> FloatArray:
    """The unknown encoding: ``[count, len(LIFETIME_PAIR_FEATURES)]`` zeros."""
    return np.zeros((count, len(LIFETIME_PAIR_FEATURES)), np.float32)
