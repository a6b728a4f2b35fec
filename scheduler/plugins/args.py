"""Plugin arguments (a profile's ``pluginConfig[].args``), validated by plugin.

The names and meanings are kube-scheduler's (``NodeResourcesFitArgs``,
``InterPodAffinityArgs``, ...) for the subset rl-scheduler implements; any other field
is refused with its path. An ``apiVersion``/``kind`` pair, as kube-scheduler's own
files carry, is accepted when the kind is the plugin's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class PluginArgs(BaseModel):
    """No arguments (``apiVersion`` and ``kind`` only)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    api_version: str = Field("", alias="apiVersion")
    kind: str = ""


class ScoredResource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    weight: int = 1


# kube-scheduler's default: cpu and memory, weight 1 each; the only set rl-scheduler scores.
DEFAULT_SCORED = (ScoredResource(name="cpu"), ScoredResource(name="memory"))


class ScoringStrategy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"
    resources: tuple[ScoredResource, ...] = DEFAULT_SCORED

    @field_validator("resources")
    @classmethod
    def _cpu_and_memory(cls, value: tuple[ScoredResource, ...]) -> tuple[ScoredResource, ...]:
        if sorted((r.name, r.weight) for r in value) != [("cpu", 1), ("memory", 1)]:
            raise ValueError("rl-scheduler scores cpu and memory with weight 1 each only")
        return value


class NodeResourcesFitArgs(PluginArgs):
    ignored_resources: tuple[str, ...] = Field((), alias="ignoredResources")
    scoring_strategy: ScoringStrategy = Field(default_factory=ScoringStrategy, alias="scoringStrategy")


class InterPodAffinityArgs(PluginArgs):
    hard_pod_affinity_weight: int = Field(1, ge=0, le=100, alias="hardPodAffinityWeight")


class DefaultPreemptionArgs(PluginArgs):
    """How many nodes preemption dry-runs before it picks one (kube's defaults: 10% of
    the nodes, at least 100)."""

    min_candidate_nodes_percentage: int = Field(10, ge=0, le=100, alias="minCandidateNodesPercentage")
    min_candidate_nodes_absolute: int = Field(100, ge=0, alias="minCandidateNodesAbsolute")

    @model_validator(mode="after")
    def _not_both_zero(self) -> DefaultPreemptionArgs:
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise ValueError("minCandidateNodesPercentage and minCandidateNodesAbsolute must not both be 0")
        return self


class FgdReserveLifetimeArgs(PluginArgs):
    """``FgdReserveLifetime``: points taken per doubling of 1 + what a placement keeps a
    node from being whole free (``weight``; 0: FgdReserve itself), counted in the node's
    GPU-hours or in node-hours (``blocked``: ``GPUHours`` spares big nodes first,
    ``NodeHours`` counts every node alike), and the longest remaining lifetime believed
    (``horizonHours``: a pod that never ends in a replay, or a model's long tail, counts
    as this long)."""

    weight: float = Field(10.0, ge=0.0, le=1000.0, allow_inf_nan=False)
    blocked: Literal["GPUHours", "NodeHours"] = "GPUHours"
    horizon_hours: float = Field(168.0, gt=0.0, le=8760.0, allow_inf_nan=False, alias="horizonHours")


class GnnLifetimeArgs(PluginArgs):
    """``GnnLifetimeScore``: the folder of its lifetime head (``head``; empty: the shipped
    ``scheduler/policy/checkpoints/gnn-lifetime``)."""

    head: str = ""
