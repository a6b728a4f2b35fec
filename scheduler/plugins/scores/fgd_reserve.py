"""FGD with a CPU reserve per idle GPU (the ``fgd-reserve`` profile, the chart's
default, and the learned policy's imitation teacher).

Measured on the default trace (``benchmarks/fgd_stranded.py``): under FGD the first
pods fail at ~95% arrived while ~40 GPUs are still fully free, on nodes with under
2.5 cores left; every later whole-GPU pod fails for CPU. The teacher keeps CPU for
the GPUs a node still has idle:

    shortfall(node) = max(c * idle GPUs after placing - cores left after placing, 0)
    score(node)     = FGD's integer score - weight * shortfall   (points; ties: first)

with ``c`` cores held per idle GPU. The best ``c`` depends on how much CPU the
workload asks per GPU: 9 on the default trace, ~5 on cpu300 (CPU-only pods ask more
CPU than the cluster has). The teacher interpolates linearly in the workload's CPU
demand per GPU relative to the cluster's, a rule fitted on those two traces only:

    c = clip(9 - 11.1 * (demand / supply - 0.832), 4, 9)

with ``demand`` the typical pods' cores per typical GPU and ``supply`` the cluster's
cores per GPU. The student sees the same quantities as features and is then trained
on the terminal allocation, so it is not bound to this rule.

On a cluster without GPUs (FGD's score is flat there) the teacher is best fit on CPU:
``-weight * cores left after placing``. On the synthetic CPU/memory workload of
``rl-scheduler evaluate --synthetic`` (seeds 42-51) it places a median 618 pods before
the first failure: more than kube's default profile (348) and about as many as
MostAllocated (615).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.dra.gpu_view import scoring_pod
from scheduler.framework.plugin import CycleContext
from scheduler.objects.pod import Pod
from scheduler.plugins.args import PluginArgs
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.scores.fgd import FgdScore
from scheduler.policy.config import RESERVE_MAX, RESERVE_MIN
from scheduler.policy.gpu_choice import fgd_gpus
from scheduler.policy.graph import GraphBuilder
from scheduler.policy.scoring import integer_scores
from scheduler.state.cluster_state import CPU_COLUMN, ClusterState, IntArray
from scheduler.state.fragmentation import TypicalPods, pod_shape

WEIGHT_POINTS_PER_CORE = 2.0
RESERVE_SLOPE, RESERVE_PIVOT = 11.1, 0.832


def reserve_cores_per_gpu(builder: GraphBuilder, state: ClusterState) -> float:
    """``c`` for this workload and cluster (see the module docstring)."""
    demand, supply = builder.cpu_demand_and_supply(state)
    if supply <= 0:
        return RESERVE_MAX
    reserve = RESERVE_MAX - RESERVE_SLOPE * (demand / supply - RESERVE_PIVOT)
    return float(np.clip(reserve, RESERVE_MIN, RESERVE_MAX))


class ReserveScore:
    """FGD's score minus the CPU-reserve shortfall, in points (continuous)."""

    name = "FgdReserve"

    def __init__(
        self, typical: TypicalPods | None, weight: float = WEIGHT_POINTS_PER_CORE, edges: bool = True
    ) -> None:
        """``edges``: whether ``builder`` builds the graph's structure edges, which the
        score itself never reads (the training stages read them off the builder)."""
        self.builder = GraphBuilder(typical, edges=edges)
        self.fgd = FgdScore(self.builder.typical)
        self.weight = weight

    def residual(self, state: ClusterState, pod: Pod, nodes: IntArray) -> npt.NDArray[np.float64]:
        """The teacher's correction to FGD's score (points) for ``nodes``."""
        cores_after = (
            state.allocatable[nodes, CPU_COLUMN] - state.requested[nodes, CPU_COLUMN] - pod.cpu_milli
        ) / 1000.0
        _, supply = self.builder.cpu_demand_and_supply(state)
        if supply <= 0:
            # No GPUs: best fit on CPU, the resource that binds first in the synthetic mix.
            packed: npt.NDArray[np.float64] = -self.weight * cores_after
            return packed
        reserve = reserve_cores_per_gpu(self.builder, state)
        shape = pod_shape(pod)
        idle_after = state.gpu_free_milli[nodes].sum(axis=1) - shape.gpu_count * shape.gpu_milli
        shortfall = np.maximum(reserve * idle_after / 1000.0 - cores_after, 0.0)
        correction: npt.NDArray[np.float64] = -self.weight * shortfall
        return correction

    def values(self, state: ClusterState, pod: Pod, nodes: IntArray) -> npt.NDArray[np.float64]:
        """FGD's integer score (its plugin's, cached per pod shape and node version) plus
        the correction: computed without the policy's pair features, the network's
        inputs, which cost several times as much."""
        pod = scoring_pod(state, pod)  # a DRA GPU pod as the GPUs it claims
        fgd = self.fgd.score(CycleContext(state, pod), nodes)
        values: npt.NDArray[np.float64] = fgd + self.residual(state, pod, nodes)
        return values

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        return integer_scores(self.values(ctx.state, ctx.pod, nodes).astype(np.float32))

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        return fgd_gpus(self.builder.frag, ctx, node)


def reserve_score(_args: PluginArgs, ctx: ProfileContext) -> ReserveScore:
    """The ``FgdReserve`` plugin (the registry imports this module only when used)."""
    return ReserveScore(ctx.typical_pods, edges=False)
