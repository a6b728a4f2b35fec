"""FgdReserve plus lifetime alignment (the ``fgd-reserve-lifetime`` profile): prefer the
node whose GPU residents end around when the new pod ends, so nodes drain together and
whole free nodes stay whole for the pods that need them (LAVA/NILAS, Google, MLSys
2025: lifetime-aware scoring added to an existing scorer).

For a GPU pod with remaining lifetime ``L`` and a node with ``G`` GPUs whose residents
leave every GPU free in ``T`` seconds (``remaining_lifetimes.node_free_in_s``; 0 for a
node whole free now), both capped at the horizon ``H``:

    blocked(node) = size(node) * max(0, min(L, H) - min(T, H)) / 3600
    score(node)   = FgdReserve's value - weight * log2(1 + blocked(node))   (points)

with ``size`` the node's GPU count ``G`` (``blocked: GPUHours``, the default: GPU-hours)
or 1 on any GPU node (``NodeHours``: node-hours). ``blocked`` is how much longer the
placement keeps the node from being whole free: 0 on a node whose residents outlast
the pod, ``size * L`` on a whole free node. GPU-hours spare the big nodes that the
multi-GPU pods need, and fill the small ones first; node-hours keep more nodes, of
any size, whole free. The logarithm keeps the term comparable to FGD's 0-100 points
across lifetimes from minutes to days. A CPU-only pod, a node without GPUs, or a
source that knows nothing (``HiddenLifetimes``) adds nothing: the values, hence the
decisions, are FgdReserve's exactly. GPUs are chosen as FgdReserve chooses them.

It is one policy plugin rather than a score plugin beside FgdReserve because, in a
policy profile, the other score plugins are the pod's preferences, applied before the
policy (``scheduler.plugins.profiles``), not added to it.

Measured with the trace's own lifetimes (``rl-scheduler timeline --lifetimes oracle``,
the ceiling), paired with fgd-reserve over seeds 42-51, 95% t-intervals; the weights
and ``blocked`` were chosen on these seeds. ``default`` at load 0.8, GPUHours weight 10:
GPU allocated +5.7 points [+3.4, +7.9], GPU-hours waited by pods of 4+ GPUs 0.68x,
failed GPU-hours 0.47x, whole free nodes -3.8 points [-8.6, +1.1]; NodeHours weight
10: +3.2 [+1.7, +4.7], 0.72x, 0.71x, whole free nodes +13.2 [+8.7, +17.8]. At load 1
no setting gets past 0.85x waited or 0.93x failed GPU-hours (pods that never end in the
replay fill up to 34 of the 34-40 GPUs by the end). Weights 3, 10 and 30 differ little.
On ``gpushare40`` it does not help: at load 1 GPUHours costs 1.5-2.1 points of GPU
allocated. A cross-fitted model's median (``--lifetimes model``) gets, on ``default``
at load 0.8, 0.82x waited and 0.86x failed GPU-hours, and nothing at load 1.

Live, ``ProfileContext.lifetimes`` is ``scheduler.k8s.scheduling.lifetimes.LiveLifetimes``
(the policy store's refitted model, else the shipped one); when no model loads it
answers None and a live ``fgd-reserve-lifetime`` profile decides as ``fgd-reserve``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import CycleContext
from scheduler.objects.pod import Pod
from scheduler.plugins.args import FgdReserveLifetimeArgs
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.remaining_lifetimes import RemainingLifetimes, node_free_in_s
from scheduler.plugins.scores.fgd_reserve import ReserveScore
from scheduler.policy.scoring import integer_scores
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.fragmentation import TypicalPods, pod_shape

FloatArray = npt.NDArray[np.float64]
Blocked = Literal["GPUHours", "NodeHours"]
SECONDS_PER_HOUR = 3600.0


def blocked_hours(
    pod_remaining_s: float, node_free_in: FloatArray, node_size: npt.NDArray[np.int64], horizon_s: float
) -> FloatArray:
    """``node_size`` x the hours the pod keeps each node from being whole free beyond
    its residents."""
    pod_end = min(pod_remaining_s, horizon_s)
    extension = np.maximum(pod_end - np.minimum(node_free_in, horizon_s), 0.0)
    blocked: FloatArray = node_size * extension / SECONDS_PER_HOUR
    return blocked


def node_size(gpu_count: IntArray, blocked: Blocked) -> IntArray:
    """What one hour of a node counts: its GPUs (``GPUHours``), or 1 (``NodeHours``)."""
    if blocked == "GPUHours":
        return gpu_count
    return (gpu_count > 0).astype(np.int64)


def alignment_penalty(blocked: FloatArray) -> FloatArray:
    """Points per unit of weight: doublings of 1 + the GPU-hours blocked."""
    penalty: FloatArray = np.log2(1.0 + blocked)
    return penalty


class LifetimeReserveScore:
    """FgdReserve's value minus ``weight`` x the alignment penalty (continuous)."""

    name = "FgdReserveLifetime"

    def __init__(
        self,
        typical: TypicalPods | None,
        lifetimes: RemainingLifetimes,
        weight: float,
        horizon_s: float,
        blocked: Blocked = "GPUHours",
    ) -> None:
        self.reserve = ReserveScore(typical, edges=False)
        self.lifetimes = lifetimes
        self.weight = weight
        self.horizon_s = horizon_s
        self.blocked = blocked

    def correction(self, state: ClusterState, pod: Pod, nodes: IntArray) -> FloatArray | None:
        """The lifetime term (points) for ``nodes``; None when it adds nothing."""
        if self.weight == 0.0 or pod_shape(pod).gpu_count == 0:
            return None
        remaining = self.lifetimes.pod_remaining_s(pod)
        if remaining is None:
            return None
        free_in = self.lifetimes.gpu_free_in_s(state, nodes)
        if free_in is None:
            return None
        size = node_size(state.gpu_count[nodes], self.blocked)
        blocked = blocked_hours(remaining, node_free_in_s(free_in), size, self.horizon_s)
        term: FloatArray = -self.weight * alignment_penalty(blocked)
        return term

    def values(self, state: ClusterState, pod: Pod, nodes: IntArray) -> FloatArray:
        values = self.reserve.values(state, pod, nodes)
        correction = self.correction(state, pod, nodes)
        return values if correction is None else values + correction

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        return integer_scores(self.values(ctx.state, ctx.pod, nodes).astype(np.float32))

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        return self.reserve.select_gpus(ctx, node)


def lifetime_reserve_score(args: FgdReserveLifetimeArgs, ctx: ProfileContext) -> LifetimeReserveScore:
    """The ``FgdReserveLifetime`` plugin (the registry imports this module only when used)."""
    return LifetimeReserveScore(
        ctx.typical_pods, ctx.lifetimes, args.weight, args.horizon_hours * SECONDS_PER_HOUR, args.blocked
    )
