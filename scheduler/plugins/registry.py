"""Plugins and profiles by name.

Every profile runs the same filters, in kube-scheduler's order (our GpuShare after
NodeResourcesFit). Profiles differ in how they score:

| profile        | scores (weight)                                                  | ties   |
|----------------|------------------------------------------------------------------|--------|
| default        | TaintToleration 3, NodeAffinity 2, InterPodAffinity 2,           | random |
|                | PodTopologySpread 2, LeastAllocated 1, BalancedAllocation 1      |        |
| most-allocated | as default with MostAllocated instead of LeastAllocated          | random |
| random, dot-prod, gpu-clustering, gpu-packing, best-fit, fgd                      |        |
|                | that FGD-paper policy alone, after the preferences               | first  |
| gnn            | the learned policy (``scheduler.policy``), after the preferences | first  |

The policy profiles rank by the pod's preferences first (the first four scores of
``default`` with their weights, ``Profile.preferences``): the policy chooses among the
nodes the pod prefers most. A pod that asks for nothing (every trace pod) leaves all
feasible nodes to the policy.

``first`` takes the best node earliest in the state's node order; the trace replay
adds nodes in a seeded order, as the FGD simulator ranks them. The learned policy is
one more profile, built (its checkpoint read) only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scheduler.framework.plugin import FilterPlugin, GpuSelector, ScorePlugin
from scheduler.framework.profile import Profile, TieBreak, WeightedScore
from scheduler.plugins.filters.gpu_share import GpuShare
from scheduler.plugins.filters.inter_pod_affinity import InterPodAffinity
from scheduler.plugins.filters.node_affinity import NodeAffinity
from scheduler.plugins.filters.node_name import NodeName
from scheduler.plugins.filters.node_ports import NodePorts
from scheduler.plugins.filters.node_resources_fit import NodeResourcesFit
from scheduler.plugins.filters.node_unschedulable import NodeUnschedulable
from scheduler.plugins.filters.node_volume_limits import NodeVolumeLimits
from scheduler.plugins.filters.pod_topology_spread import PodTopologySpread
from scheduler.plugins.filters.taint_toleration import TaintToleration
from scheduler.plugins.filters.unsupported import Unsupported
from scheduler.plugins.filters.volume_binding import VolumeBinding
from scheduler.plugins.filters.volume_restrictions import VolumeRestrictions
from scheduler.plugins.filters.volume_zone import VolumeZone
from scheduler.plugins.scores.best_fit import BestFitScore
from scheduler.plugins.scores.dot_prod import DotProdScore
from scheduler.plugins.scores.fgd import FgdScore
from scheduler.plugins.scores.gpu_choice import BestFitGpus, RandomGpus
from scheduler.plugins.scores.gpu_clustering import GpuClusteringScore
from scheduler.plugins.scores.gpu_packing import GpuPackingScore
from scheduler.plugins.scores.inter_pod_affinity import InterPodAffinityScore
from scheduler.plugins.scores.node_preferences import NodeAffinityScore, TaintTolerationScore
from scheduler.plugins.scores.pod_topology_spread import PodTopologySpreadScore
from scheduler.plugins.scores.random_score import RandomScore
from scheduler.plugins.scores.resource_allocation import BalancedAllocation, LeastAllocated, MostAllocated
from scheduler.state.fragmentation import TypicalPods


class UnknownProfileError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown score profile {name!r}; known: {', '.join(profile_names())}")


@dataclass
class ProfileContext:
    """What a profile may need to build its plugins."""

    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    # The workload FGD measures fragmentation against (from a trace or the live mix).
    typical_pods: TypicalPods | None = None
    # Weights replacing the profile's defaults, by score plugin name.
    weights: Mapping[str, int] = field(default_factory=dict)
    # A learned policy's checkpoint (a folder with manifest.json); the shipped one if None.
    checkpoint: Path | None = None


ProfileFactory = Callable[[ProfileContext], Profile]
_PROFILES: dict[str, ProfileFactory] = {}


def default_filters() -> list[FilterPlugin]:
    return [
        Unsupported(),
        NodeUnschedulable(),
        NodeName(),
        TaintToleration(),
        NodeAffinity(),
        NodePorts(),
        NodeResourcesFit(),
        GpuShare(),
        VolumeRestrictions(),
        NodeVolumeLimits(),
        VolumeBinding(),
        VolumeZone(),
        PodTopologySpread(),
        InterPodAffinity(),
    ]


def register_profile(name: str, factory: ProfileFactory) -> None:
    _PROFILES[name] = factory


def profile_names() -> list[str]:
    return sorted(_PROFILES)


def build_profile(name: str, ctx: ProfileContext | None = None) -> Profile:
    factory = _PROFILES.get(name)
    if factory is None:
        raise UnknownProfileError(name)
    return factory(ctx or ProfileContext())


def _weighted(ctx: ProfileContext, scores: list[tuple[ScorePlugin, int]]) -> list[WeightedScore]:
    return [WeightedScore(plugin, ctx.weights.get(plugin.name, weight)) for plugin, weight in scores]


def _preference_scores() -> list[tuple[ScorePlugin, int]]:
    """kube-scheduler's scores of what a pod's owner asks for, with its default weights."""
    return [
        (TaintTolerationScore(), 3),
        (NodeAffinityScore(), 2),
        (InterPodAffinityScore(), 2),
        (PodTopologySpreadScore(), 2),
    ]


def user_preferences(ctx: ProfileContext) -> list[WeightedScore]:
    """A policy profile's ``preferences``: kube's preference scores and weights (each
    weight can be set by plugin name, as for the kube profiles)."""
    return _weighted(ctx, _preference_scores())


def _kube(name: str, fit: Callable[[], ScorePlugin]) -> ProfileFactory:
    def build(ctx: ProfileContext) -> Profile:
        scores = [*_preference_scores(), (fit(), 1), (BalancedAllocation(), 1)]
        return Profile(name, default_filters(), _weighted(ctx, scores), BestFitGpus(), "random")

    return build


def _single(
    name: str,
    plugin: Callable[[ProfileContext], ScorePlugin],
    gpus: Callable[[ProfileContext, ScorePlugin], GpuSelector],
) -> ProfileFactory:
    def build(ctx: ProfileContext) -> Profile:
        score = plugin(ctx)
        tie_break: TieBreak = "first"
        scores = [WeightedScore(score, 1)]
        return Profile(name, default_filters(), scores, gpus(ctx, score), tie_break, user_preferences(ctx))

    return build


def _fgd(ctx: ProfileContext) -> ScorePlugin:
    if ctx.typical_pods is None:
        raise ValueError("the fgd profile needs typical pods (a trace or the observed workload)")
    return FgdScore(ctx.typical_pods)


def _gnn(ctx: ProfileContext) -> Profile:
    from scheduler.policy.plugin import gnn_profile  # noqa: PLC0415 - the checkpoint loads only when asked for

    return gnn_profile(ctx)


def _best_fit_gpus(_: ProfileContext, __: ScorePlugin) -> GpuSelector:
    return BestFitGpus()


register_profile("default", _kube("default", LeastAllocated))
register_profile("most-allocated", _kube("most-allocated", MostAllocated))
register_profile(
    "random", _single("random", lambda ctx: RandomScore(ctx.rng), lambda ctx, _: RandomGpus(ctx.rng))
)
register_profile("dot-prod", _single("dot-prod", lambda _: DotProdScore(), _best_fit_gpus))
register_profile("gpu-clustering", _single("gpu-clustering", lambda _: GpuClusteringScore(), _best_fit_gpus))
register_profile("gpu-packing", _single("gpu-packing", lambda _: GpuPackingScore(), _best_fit_gpus))
register_profile("best-fit", _single("best-fit", lambda _: BestFitScore(), _best_fit_gpus))
register_profile("fgd", _single("fgd", _fgd, lambda _, score: score))  # type: ignore[arg-type,return-value]
register_profile("gnn", _gnn)
