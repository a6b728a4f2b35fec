"""Plugins by name: which extension points each one serves, how it is built from its
arguments, and what rl-scheduler does with kube-scheduler's plugins it runs itself or
does not implement.

A profile (``scheduler.plugins.profiles``) names plugins; this table is the only place
that knows what a name means. The table is data, written out below: no module
registers anything by being imported. The learned plugins are named by
``"module:function"`` and imported only when a profile uses them, so a process that
never schedules with the learned policy never reads a checkpoint (and the teacher's
module stays a training module).

Extension points: a filter plugin runs its PreFilter with its Filter, a score plugin
its PreScore with its Score (``FILTER``, ``SCORE``). A *policy* score plugin (the FGD
paper's policies, the learned one) decides among the nodes the profile's other score
plugins rank highest, ties going to the first node in the state's order; when it also
picks GPUs (``selects_gpus``), it chooses the chosen node's GPUs too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.plugins.args import (
    DefaultPreemptionArgs,
    FgdReserveLifetimeArgs,
    GnnLifetimeArgs,
    InterPodAffinityArgs,
    NodeResourcesFitArgs,
    PluginArgs,
)
from scheduler.plugins.filters.dynamic_resources import DynamicResources
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
from scheduler.plugins.filters.volume_binding import VolumeBinding
from scheduler.plugins.filters.volume_restrictions import VolumeRestrictions
from scheduler.plugins.filters.volume_zone import VolumeZone
from scheduler.plugins.remaining_lifetimes import HiddenLifetimes, RemainingLifetimes
from scheduler.plugins.scores.best_fit import BestFitScore
from scheduler.plugins.scores.dot_prod import DotProdScore
from scheduler.plugins.scores.dynamic_resources import DynamicResourcesScore
from scheduler.plugins.scores.fgd import FgdScore
from scheduler.plugins.scores.gpu_clustering import GpuClusteringScore
from scheduler.plugins.scores.gpu_packing import GpuPackingScore
from scheduler.plugins.scores.inter_pod_affinity import InterPodAffinityScore
from scheduler.plugins.scores.node_preferences import NodeAffinityScore, TaintTolerationScore
from scheduler.plugins.scores.pod_topology_spread import PodTopologySpreadScore
from scheduler.plugins.scores.random_score import RandomScore
from scheduler.plugins.scores.resource_allocation import BalancedAllocation, LeastAllocated, MostAllocated
from scheduler.state.fragmentation import TypicalPods

FILTER = "filter"
SCORE = "score"
POST_FILTER = "postFilter"
PERMIT = "permit"


@dataclass
class ProfileContext:
    """What plugins may need to be built."""

    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    # The workload FGD measures fragmentation against (from a trace or the live mix).
    typical_pods: TypicalPods | None = None
    # A learned policy's checkpoint (a folder with manifest.json); the shipped one if None.
    checkpoint: Path | None = None
    # What the plugins may know of pods' remaining lifetimes (nothing unless told).
    lifetimes: RemainingLifetimes = field(default_factory=HiddenLifetimes)


# (validated args, context) -> the plugin object; or "module:function" of such a
# function, imported when first used.
Factory = Callable[[Any, ProfileContext], Any]


@dataclass(frozen=True)
class PluginSpec:
    name: str
    filter: Factory | str | None = None
    score: Factory | str | None = None
    args: type[PluginArgs] = PluginArgs
    # A policy score plugin: decides among the nodes the other scores rank highest.
    policy: bool = False
    # Its score plugin also picks the chosen node's GPUs.
    selects_gpus: bool = False
    # Needs a checkpoint: while it cannot be loaded, the fallback profile schedules.
    learned: bool = False
    # Runs at PostFilter (for a pod no node fits): DefaultPreemption only.
    post_filter: bool = False
    # Runs at Permit: Coscheduling only (gangs decided whole, ``framework.gang``).
    permit: bool = False
    # kube-scheduler extension points rl-scheduler serves outside profiles (the queue,
    # the binder): the plugin always runs there and cannot be disabled.
    built_in: tuple[str, ...] = ()
    # Why rl-scheduler does not run it, for kube-scheduler plugins it does not implement
    # (enabled by kube's defaults, they are left out; enabled by name, refused).
    missing: str = ""

    @property
    def points(self) -> frozenset[str]:
        served = (
            (FILTER, self.filter),
            (SCORE, self.score),
            (POST_FILTER, self.post_filter or None),
            (PERMIT, self.permit or None),
        )
        return frozenset(p for p, f in served if f is not None)


def _fit_score(args: NodeResourcesFitArgs, _: ProfileContext) -> Any:
    return MostAllocated() if args.scoring_strategy.type == "MostAllocated" else LeastAllocated()


def _fgd(_: PluginArgs, ctx: ProfileContext) -> FgdScore:
    if ctx.typical_pods is None:
        raise ValueError("the FGD plugin needs typical pods (a trace or the observed workload)")
    return FgdScore(ctx.typical_pods)


def _plain(cls: Callable[[], Any]) -> Factory:
    return lambda _args, _ctx: cls()


_SPECS = (
    # kube-scheduler's plugins, in its default profile's order.
    PluginSpec("SchedulingGates", built_in=("preEnqueue",)),
    PluginSpec("PrioritySort", built_in=("queueSort",)),
    PluginSpec("NodeUnschedulable", filter=_plain(NodeUnschedulable)),
    PluginSpec("NodeName", filter=_plain(NodeName)),
    PluginSpec("TaintToleration", filter=_plain(TaintToleration), score=_plain(TaintTolerationScore)),
    PluginSpec("NodeAffinity", filter=_plain(NodeAffinity), score=_plain(NodeAffinityScore)),
    PluginSpec("NodePorts", filter=_plain(NodePorts)),
    PluginSpec(
        "NodeResourcesFit",
        filter=lambda args, _: NodeResourcesFit(args.ignored_resources),
        score=_fit_score,
        args=NodeResourcesFitArgs,
    ),
    PluginSpec("GpuShare", filter=_plain(GpuShare)),
    PluginSpec("VolumeRestrictions", filter=_plain(VolumeRestrictions)),
    PluginSpec("NodeVolumeLimits", filter=_plain(NodeVolumeLimits)),
    PluginSpec("VolumeBinding", filter=_plain(VolumeBinding), built_in=("reserve", "preBind")),
    PluginSpec("VolumeZone", filter=_plain(VolumeZone)),
    PluginSpec("PodTopologySpread", filter=_plain(PodTopologySpread), score=_plain(PodTopologySpreadScore)),
    PluginSpec(
        "InterPodAffinity",
        filter=_plain(InterPodAffinity),
        score=lambda args, _: InterPodAffinityScore(args.hard_pod_affinity_weight),
        args=InterPodAffinityArgs,
    ),
    # Reserve and PreBind write the claims' allocations (k8s/scheduling/dra_binder.py).
    PluginSpec(
        "DynamicResources",
        filter=_plain(DynamicResources),
        score=_plain(DynamicResourcesScore),
        built_in=("reserve", "preBind"),
    ),
    PluginSpec("DefaultPreemption", post_filter=True, args=DefaultPreemptionArgs),
    PluginSpec("NodeResourcesBalancedAllocation", score=_plain(BalancedAllocation)),
    PluginSpec("ImageLocality", missing="rl-scheduler does not score images already on a node"),
    PluginSpec("DefaultBinder", built_in=("bind",)),
    PluginSpec("NodeDeclaredFeatures", missing="rl-scheduler does not match node-declared features"),
    # HAMi's scheduler's Bind: the allocation of shared GPUs at Reserve, then the node
    # lock and a Binding that carries it (k8s/scheduling/bind_plugins.py); it skips other pods.
    PluginSpec("HAMiBinder", built_in=("reserve", "bind")),
    # scheduler-plugins' Coscheduling: pods labelled with a PodGroup are placed as a gang,
    # whole or not at all, and preempt as one; disabled, they are placed one by one.
    PluginSpec("Coscheduling", permit=True),
    # The FGD paper's policies (Weng et al., ATC'23) and the learned policy.
    PluginSpec("Random", score=lambda _, ctx: RandomScore(ctx.rng), policy=True, selects_gpus=True),
    PluginSpec("DotProd", score=_plain(DotProdScore), policy=True),
    PluginSpec("GpuClustering", score=_plain(GpuClusteringScore), policy=True),
    PluginSpec("GpuPacking", score=_plain(GpuPackingScore), policy=True),
    PluginSpec("BestFit", score=_plain(BestFitScore), policy=True),
    PluginSpec("FGD", score=_fgd, policy=True, selects_gpus=True),
    PluginSpec(
        "GnnScore", score="scheduler.policy.plugin:gnn_score", policy=True, selects_gpus=True, learned=True
    ),
    PluginSpec(
        "FgdReserve",
        score="scheduler.plugins.scores.fgd_reserve:reserve_score",
        policy=True,
        selects_gpus=True,
    ),
    PluginSpec(
        "FgdReserveLifetime",
        score="scheduler.plugins.scores.fgd_reserve_lifetime:lifetime_reserve_score",
        args=FgdReserveLifetimeArgs,
        policy=True,
        selects_gpus=True,
    ),
    PluginSpec(
        "GnnLifetimeScore",
        score="scheduler.policy.lifetime_head:gnn_lifetime_score",
        args=GnnLifetimeArgs,
        policy=True,
        selects_gpus=True,
        learned=True,
    ),
)
PLUGINS: Mapping[str, PluginSpec] = {spec.name: spec for spec in _SPECS}


class UnknownPluginError(ValueError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown plugin {name!r}; known: {', '.join(plugin_names())}")


def plugin_names() -> list[str]:
    """The plugins a profile can name (rl-scheduler's and kube-scheduler's it runs)."""
    return sorted(name for name, spec in PLUGINS.items() if not spec.missing)


def plugin_spec(name: str) -> PluginSpec:
    spec = PLUGINS.get(name)
    if spec is None:
        raise UnknownPluginError(name)
    return spec


def resolve_factory(factory: Factory | str) -> Factory:
    """The function itself; a ``"module:function"`` is imported now."""
    if not isinstance(factory, str):
        return factory
    module, _, function = factory.partition(":")
    built: Factory = getattr(importlib.import_module(module), function)
    return built
