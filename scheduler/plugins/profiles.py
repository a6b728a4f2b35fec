"""Profiles: a profile's data (``ProfileConfig``) resolved and built into the plugins
that run (``Profile``), and the built-in presets by name.

Every profile runs ``Unsupported`` first (what rl-scheduler refuses to place: resource
claims, ...), then its filters. Without a policy plugin the profile scores as
kube-scheduler does (weighted sum, random among the best). With one, the other score
plugins are the pod's *preferences*: they keep the nodes with the highest weighted
sum, the policy decides among those, ties to the first node, and the policy picks the
GPUs when it can (best fit otherwise). A pod that asks for nothing (no request, GPU or
claim) has nothing for the policy to pack: kube's default resource score
(LeastAllocated over kube's scoring requests, 100m and 200Mi per container; ties
random) places it among the nodes it prefers, as kube-scheduler's default profile would
(its BalancedAllocation skips such a pod).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from scheduler.framework.plugin import FilterPlugin, GpuSelector
from scheduler.framework.preemption import PreemptionArgs
from scheduler.framework.profile import Profile, WeightedScore
from scheduler.plugins.args import DefaultPreemptionArgs
from scheduler.plugins.filters.unsupported import Unsupported
from scheduler.plugins.presets import PRESETS, kube_defaults
from scheduler.plugins.profile_config import (
    ALL,
    POINTS,
    PluginRef,
    Plugins,
    PluginSet,
    ProfileConfig,
    ProfileConfigError,
    ResolvedProfile,
    Resolver,
    merge_plugins,
)
from scheduler.plugins.registry import PLUGINS, ProfileContext, resolve_factory
from scheduler.plugins.scores.gpu_choice import BestFitGpus
from scheduler.plugins.scores.resource_allocation import LeastAllocated


class UnknownProfileError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown score profile {name!r}; known: {', '.join(profile_names())}")


ProfileFactory = Callable[[ProfileContext], Profile]
# How a policy profile places a pod that asks for nothing: kube's default resource score.
UNREQUESTED_SCORES = (WeightedScore(LeastAllocated(), 1),)
# Profiles a training process adds for itself (by a call, never at import).
_EXTRA: dict[str, ProfileFactory] = {}


def preset_names() -> list[str]:
    return sorted(PRESETS)


def preset_base(preset: str | None) -> tuple[Plugins, dict[str, dict[str, object]]]:
    """The plugins and args a profile starts from: kube's defaults, with a preset's
    changes merged on top as a user's would be."""
    defaults = kube_defaults()
    if preset is None:
        return defaults, {}
    data = ProfileConfig.model_validate({"schedulerName": preset, **PRESETS[preset]})
    args = {entry.name: dict(entry.args) for entry in data.plugin_config}
    # The preset becomes the user's defaults: its "*" is spelled out, or merging the
    # user's plugins on top (kube merges once) would drop the preset's own too.
    every = tuple(PluginRef(name=p.name) for p in defaults.multi_point.enabled)
    spelled = Plugins.model_validate(
        {
            alias: PluginSet(
                enabled=data.plugins.point(alias).enabled,
                disabled=every
                if ALL in {p.name for p in data.plugins.point(alias).disabled}
                else data.plugins.point(alias).disabled,
            )
            for alias in POINTS
        }
    )
    return merge_plugins(defaults, spelled), args


def resolve(config: ProfileConfig, where: str = "profile", path: str = "profile") -> ResolvedProfile:
    """What ``config`` runs; ``ProfileConfigError`` naming the field on anything wrong."""
    if config.preset is not None and config.preset not in PRESETS:
        raise ProfileConfigError(
            where, f"{path}.preset", f"unknown preset {config.preset!r}; known: {', '.join(preset_names())}"
        )
    plugins, args = preset_base(config.preset)
    return Resolver(config, where, path).resolve(plugins, args)


def preset(name: str, scheduler_name: str | None = None) -> ResolvedProfile:
    if name not in PRESETS:
        raise UnknownProfileError(name)
    return resolve(ProfileConfig(scheduler_name=scheduler_name or name, preset=name))


def build(resolved: ResolvedProfile, ctx: ProfileContext) -> Profile:
    """The plugin objects of ``resolved``; a learned plugin reads its checkpoint here."""
    filters: list[FilterPlugin] = [Unsupported()]
    for name in resolved.filters:
        factory = PLUGINS[name].filter
        assert factory is not None
        filters.append(resolve_factory(factory)(resolved.args[name], ctx))
    scores: list[WeightedScore] = []
    policy: WeightedScore | None = None
    for name, weight in resolved.scores:
        factory = PLUGINS[name].score
        assert factory is not None
        weighted = WeightedScore(resolve_factory(factory)(resolved.args[name], ctx), weight)
        if PLUGINS[name].policy:
            policy = weighted
        else:
            scores.append(weighted)
    preemption = None
    if "DefaultPreemption" in resolved.post_filters:
        args = cast(DefaultPreemptionArgs, resolved.args["DefaultPreemption"])
        preemption = PreemptionArgs(args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute)
    gangs = "Coscheduling" in resolved.permits
    if policy is None:
        return Profile(
            resolved.name, filters, scores, BestFitGpus(), "random", preemption=preemption, gangs=gangs
        )
    spec = PLUGINS[resolved.policy or ""]
    gpus = cast(GpuSelector, policy.plugin) if spec.selects_gpus else BestFitGpus()
    return Profile(
        resolved.name, filters, [policy], gpus, "first", scores, preemption, gangs, UNREQUESTED_SCORES
    )


def register_profile(name: str, factory: ProfileFactory) -> None:
    """A profile of this process only, by name, ahead of the presets (training tools:
    the recording teacher, the learned policy of any checkpoint kind)."""
    _EXTRA[name] = factory


def profile_names() -> list[str]:
    return sorted({*PRESETS, *_EXTRA})


def build_profile(name: str, ctx: ProfileContext | None = None) -> Profile:
    """The preset (or process profile) ``name``, built."""
    ctx = ctx or ProfileContext()
    if name in _EXTRA:
        return _EXTRA[name](ctx)
    return build(preset(name), ctx)


def default_filters() -> list[FilterPlugin]:
    """The ``default`` preset's filters (every preset's), in kube-scheduler's order."""
    return list(build(preset("default"), ProfileContext()).filters)


def user_preferences(ctx: ProfileContext) -> list[WeightedScore]:
    """A policy preset's preference scores: kube's, with its weights."""
    return list(build(preset("best-fit"), ctx).preferences)
