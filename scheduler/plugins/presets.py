"""The built-in profiles, as data: each is what a user could write in a profile, on top
of kube-scheduler's default plugins (``KUBE_DEFAULTS``).

| preset         | scores (weight)                                                   | ties   |
|----------------|-------------------------------------------------------------------|--------|
| default        | kube's: TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1     | random |
|                | (LeastAllocated), PodTopologySpread 2, InterPodAffinity 2,        |        |
|                | NodeResourcesBalancedAllocation 1, DynamicResources 2             |        |
| most-allocated | as default, NodeResourcesFit with the MostAllocated strategy      | random |
| random, dot-prod, gpu-clustering, gpu-packing, best-fit, fgd                       |        |
|                | that FGD-paper policy, among the nodes the pod prefers most       | first  |
| fgd-reserve    | FGD with a CPU reserve per idle GPU, among the nodes the pod      | first  |
|                | prefers most (the chart's default)                                |        |
| fgd-reserve-   | fgd-reserve's score minus a lifetime-alignment penalty (the        | first  |
| lifetime       | profile context's lifetimes; none known: fgd-reserve exactly)      |        |
| gnn            | the learned policy, among the nodes the pod prefers most          | first  |
| gnn-lifetime   | gnn plus a learned head over the context's lifetimes (none known: | first  |
|                | gnn exactly; ``scheduler.policy.lifetime_head``)                   |        |

"The nodes the pod prefers most": the policy presets keep kube's preference scores
(taints, node affinity, inter-pod affinity, topology spread, DRA's firstAvailable
alternatives, with kube's weights) and
drop the resource scores; a policy plugin decides among the nodes the others rank
highest (``scheduler.plugins.registry``). A pod that asks for nothing (every trace
pod) leaves all feasible nodes to the policy. ``first`` takes the best node earliest
in the state's node order; the trace replay adds nodes in a seeded order, as the FGD
simulator ranks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.plugins.profile_config import Plugins

# kube-scheduler v1.36's default plugins (pkg/scheduler/apis/config/v1/default_plugins.go,
# with DynamicResources and NodeDeclaredFeatures, on by default), plus rl-scheduler's
# GpuShare (HAMi's per-GPU fit) right after NodeResourcesFit, and scheduler-plugins'
# Coscheduling (gangs) at the end. Plugins rl-scheduler does
# not implement (ImageLocality, NodeDeclaredFeatures)
# stay in the list, as in kube's, and are left out when a profile is built.
KUBE_DEFAULTS: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("GpuShare", None),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
    ("Coscheduling", None),
)


def kube_defaults() -> Plugins:
    return Plugins.model_validate(
        {"multiPoint": {"enabled": [{"name": n, "weight": w} for n, w in KUBE_DEFAULTS]}}
    )


def _policy(plugin: str) -> dict[str, Any]:
    """A policy among the nodes the pod prefers most: kube's preference scores stay."""
    return {
        "plugins": {
            "score": {
                "disabled": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesBalancedAllocation"}],
                "enabled": [{"name": plugin}],
            }
        }
    }


PRESETS: Mapping[str, Mapping[str, Any]] = {
    "default": {},
    "most-allocated": {
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]
    },
    "random": _policy("Random"),
    "dot-prod": _policy("DotProd"),
    "gpu-clustering": _policy("GpuClustering"),
    "gpu-packing": _policy("GpuPacking"),
    "best-fit": _policy("BestFit"),
    "fgd": _policy("FGD"),
    "fgd-reserve": _policy("FgdReserve"),
    "fgd-reserve-lifetime": _policy("FgdReserveLifetime"),
    "gnn": _policy("GnnScore"),
    "gnn-lifetime": _policy("GnnLifetimeScore"),
}
