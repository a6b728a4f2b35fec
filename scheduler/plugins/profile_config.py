"""A profile as data, in the shape of KubeSchedulerConfiguration's ``profiles``, and
its resolution into the plugins that run, as kube-scheduler resolves it.

    schedulerName: rl-packer
    plugins:
      score:
        disabled: [{name: NodeResourcesFit}, {name: NodeResourcesBalancedAllocation}]
        enabled: [{name: GpuPacking}]
    pluginConfig:
      - name: InterPodAffinity
        args: {hardPodAffinityWeight: 2}

Resolution follows kube-scheduler v1.36 (``mergePlugins`` then the framework's
``expandMultiPointPlugins``): every profile starts from the default plugins (kube's
``multiPoint`` list, or a built-in preset's); a point's ``disabled`` (``*`` for all)
removes defaults there, its ``enabled`` re-weights a default in place or appends; a
``multiPoint`` plugin runs at each point it serves unless disabled there; weights left
out or 0 count 1. rl-scheduler runs a plugin's PreFilter with its Filter and its
PreScore with its Score: a plugin disabled at ``preFilter`` (``preScore``) must be
disabled at ``filter`` (``score``) too, and enabling one at ``preFilter`` or
``preScore`` alone does nothing. Points and fields rl-scheduler does not implement are refused with
their path (``profiles[0].plugins.reserve: not supported by rl-scheduler``), as are
unknown plugin names.

``preset`` is rl-scheduler's own field (settings files only): the built-in profile the
plugins start from instead of kube's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scheduler.errors import SchedulerInputError
from scheduler.plugins.args import PluginArgs
from scheduler.plugins.registry import FILTER, PERMIT, PLUGINS, POST_FILTER, SCORE, plugin_names

ALL = "*"


class ProfileConfigError(SchedulerInputError):
    """A profile that names an unknown plugin or a field rl-scheduler does not implement."""

    def __init__(self, where: str, path: str, problem: str) -> None:
        self.path = path
        super().__init__(where, path, problem)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class PluginRef(_Model):
    name: str = Field(min_length=1)
    weight: int | None = Field(None, ge=0, le=100)


class PluginSet(_Model):
    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[PluginRef, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.enabled and not self.disabled


class Plugins(_Model):
    """kube-scheduler's ``Plugins``: one plugin set per extension point."""

    multi_point: PluginSet = Field(default_factory=PluginSet, alias="multiPoint")
    pre_enqueue: PluginSet = Field(default_factory=PluginSet, alias="preEnqueue")
    queue_sort: PluginSet = Field(default_factory=PluginSet, alias="queueSort")
    pre_filter: PluginSet = Field(default_factory=PluginSet, alias="preFilter")
    filter: PluginSet = Field(default_factory=PluginSet)
    post_filter: PluginSet = Field(default_factory=PluginSet, alias="postFilter")
    pre_score: PluginSet = Field(default_factory=PluginSet, alias="preScore")
    score: PluginSet = Field(default_factory=PluginSet)
    reserve: PluginSet = Field(default_factory=PluginSet)
    permit: PluginSet = Field(default_factory=PluginSet)
    pre_bind: PluginSet = Field(default_factory=PluginSet, alias="preBind")
    bind: PluginSet = Field(default_factory=PluginSet)
    post_bind: PluginSet = Field(default_factory=PluginSet, alias="postBind")
    placement_generate: PluginSet = Field(default_factory=PluginSet, alias="placementGenerate")
    placement_score: PluginSet = Field(default_factory=PluginSet, alias="placementScore")

    def point(self, alias: str) -> PluginSet:
        value: PluginSet = getattr(self, _FIELD_OF[alias])
        return value


_FIELD_OF = {(info.alias or name): name for name, info in Plugins.model_fields.items()}
POINTS = tuple(_FIELD_OF)
# The points a profile may configure, and the plugin kind each one runs.
CONFIGURABLE = {
    "preFilter": FILTER,
    "filter": FILTER,
    "postFilter": POST_FILTER,
    "preScore": SCORE,
    "score": SCORE,
    "permit": PERMIT,
}


class PluginConfig(_Model):
    name: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class ProfileConfig(_Model):
    """kube-scheduler's ``KubeSchedulerProfile`` (and rl-scheduler's ``preset``)."""

    scheduler_name: str = Field("default-scheduler", min_length=1, alias="schedulerName")
    preset: str | None = None
    plugins: Plugins = Field(default_factory=Plugins)
    plugin_config: tuple[PluginConfig, ...] = Field((), alias="pluginConfig")
    percentage_of_nodes_to_score: int | None = Field(None, alias="percentageOfNodesToScore")


@dataclass(frozen=True)
class ResolvedProfile:
    """What runs: filters in order, scores with weights, each plugin's validated args."""

    scheduler_name: str
    name: str  # the preset's name, or the scheduler name
    filters: tuple[str, ...]
    scores: tuple[tuple[str, int], ...]
    args: Mapping[str, PluginArgs]
    # PostFilter plugins (DefaultPreemption, or none: a pod that fits nowhere waits).
    post_filters: tuple[str, ...] = ()
    # Permit plugins (Coscheduling, or none: a PodGroup's pods are placed one by one).
    permits: tuple[str, ...] = ()

    @property
    def learned(self) -> bool:
        return any(PLUGINS[name].learned for name, _ in self.scores)

    @property
    def policy(self) -> str | None:
        return next((name for name, _ in self.scores if PLUGINS[name].policy), None)


def error_path(loc: Sequence[int | str], prefix: str = "") -> str:
    """A pydantic location as ``profiles[0].plugins.score``."""
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def merge_plugin_set(defaults: PluginSet, custom: PluginSet) -> PluginSet:
    """kube-scheduler's ``mergePluginSet``."""
    disabled = [PluginRef(name=p.name) for p in (*custom.disabled, *defaults.disabled)]
    off = {p.name for p in disabled}
    custom_index = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if ALL not in off:
        for plugin in defaults.enabled:
            if plugin.name in off:
                continue
            index = custom_index.get(plugin.name)
            if index is not None:  # re-configured in place: keeps its position
                replaced.add(index)
            enabled.append(plugin if index is None else custom.enabled[index])
    enabled += [p for i, p in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(enabled=tuple(enabled), disabled=tuple(disabled))


def merge_plugins(defaults: Plugins, custom: Plugins) -> Plugins:
    return Plugins.model_validate(
        {alias: merge_plugin_set(defaults.point(alias), custom.point(alias)) for alias in _FIELD_OF}
    )


def expand_point(plugins: Plugins, alias: str, serves: Any) -> list[PluginRef]:
    """The plugins that run at ``alias``: kube's ``expandMultiPointPlugins`` (explicit
    re-configurations first, then multiPoint's, then the point's own others)."""
    point = plugins.point(alias)
    if ALL in {p.name for p in point.disabled}:
        return list(point.enabled)
    explicit = {p.name: p for p in point.enabled}
    off = {p.name for p in point.disabled}
    multi: list[PluginRef] = []
    overridden: set[str] = set()
    for plugin in plugins.multi_point.enabled:
        if not serves(plugin.name) or plugin.name in off:
            continue
        if plugin.name in explicit:
            overridden.add(plugin.name)
            continue
        multi.append(plugin)
    first = [p for p in point.enabled if p.name in overridden]
    rest = [p for p in point.enabled if p.name not in overridden]
    return first + multi + rest


class Resolver:
    """Resolves one profile; every problem is a ``ProfileConfigError`` with its path."""

    def __init__(self, profile: ProfileConfig, where: str, path: str) -> None:
        self.profile = profile
        self.where = where
        self.path = path

    def fail(self, path: str, problem: str) -> ProfileConfigError:
        return ProfileConfigError(self.where, f"{self.path}.{path}", problem)

    def unknown(self, path: str, name: str) -> ProfileConfigError:
        return self.fail(path, f"unknown plugin {name!r}; known: {', '.join(plugin_names())}")

    def check_names(self) -> None:
        for alias in _FIELD_OF:
            point = self.profile.plugins.point(alias)
            for side in ("enabled", "disabled"):
                for i, plugin in enumerate(getattr(point, side)):
                    here = f"plugins.{alias}.{side}[{i}].name"
                    if plugin.name == ALL and side == "disabled":
                        continue
                    spec = PLUGINS.get(plugin.name)
                    if spec is None:
                        raise self.fail(
                            here, f"unknown plugin {plugin.name!r}; known: {', '.join(plugin_names())}"
                        )
                    if spec.missing and side == "enabled":
                        raise self.fail(here, f"{plugin.name} is not implemented: {spec.missing}")
                    if spec.built_in and side == "disabled" and alias in ("multiPoint", *spec.built_in):
                        raise self.fail(here, f"rl-scheduler always runs {plugin.name}")
            if alias not in CONFIGURABLE and alias != "multiPoint" and not point.empty:
                raise self.fail(f"plugins.{alias}", "not supported by rl-scheduler")
        for i, entry in enumerate(self.profile.plugin_config):
            if entry.name not in PLUGINS or PLUGINS[entry.name].missing:
                raise self.fail(
                    f"pluginConfig[{i}].name",
                    f"unknown plugin {entry.name!r}; known: {', '.join(plugin_names())}",
                )

    def args(self, base: Mapping[str, Mapping[str, Any]]) -> dict[str, PluginArgs]:
        merged = {name: dict(args) for name, args in base.items()}
        seen: set[str] = set()
        for i, entry in enumerate(self.profile.plugin_config):
            if entry.name in seen:
                raise self.fail(f"pluginConfig[{i}].name", f"{entry.name} configured twice")
            seen.add(entry.name)
            merged[entry.name] = dict(entry.args)
        out: dict[str, PluginArgs] = {}
        for name, spec in PLUGINS.items():
            try:
                out[name] = spec.args.model_validate(merged.get(name, {}))
            except ValidationError as error:
                first = error.errors()[0]
                index = (
                    next(i for i, e in enumerate(self.profile.plugin_config) if e.name == name)
                    if name in seen
                    else None
                )
                prefix = f"pluginConfig[{index}].args" if index is not None else f"preset args of {name}"
                raise self.fail(error_path(first["loc"], prefix), first["msg"]) from None
            kind = out[name].kind
            if kind and kind != f"{name}Args":
                raise self.fail(f"pluginConfig[{name}].args.kind", f"expected {name}Args, got {kind}")
        return out

    def point(self, plugins: Plugins, alias: str) -> list[PluginRef]:
        kind = CONFIGURABLE[alias]
        refs = expand_point(plugins, alias, lambda name: kind in PLUGINS[name].points)
        seen: set[str] = set()
        for ref in refs:
            if ref.name in seen:
                raise self.fail(f"plugins.{alias}", f"{ref.name} enabled twice")
            if kind not in PLUGINS[ref.name].points:
                raise self.fail(f"plugins.{alias}", f"{ref.name} is not a {kind} plugin")
            seen.add(ref.name)
        return refs

    def resolve(self, defaults: Plugins, base_args: Mapping[str, Mapping[str, Any]]) -> ResolvedProfile:
        self.check_names()
        if self.profile.percentage_of_nodes_to_score not in (None, 100):
            raise self.fail(
                "percentageOfNodesToScore", "not supported by rl-scheduler (it scores every feasible node)"
            )
        plugins = merge_plugins(defaults, self.profile.plugins)
        filters = self.point(plugins, "filter")
        scores = self.point(plugins, "score")
        for pre, main, kind in (("preFilter", filters, "Filter"), ("preScore", scores, "Score")):
            off = {p.name for p in plugins.point(pre).disabled}
            cut = [r.name for r in main if ALL in off or r.name in off]
            if cut:
                raise self.fail(
                    f"plugins.{pre}.disabled",
                    f"{', '.join(cut)}: rl-scheduler runs a plugin's Pre{kind} with its {kind}; "
                    f"disable it at {kind[0].lower() + kind[1:]} too",
                )
        policies = [r.name for r in scores if PLUGINS[r.name].policy]
        if len(policies) > 1:
            raise self.fail("plugins.score", f"at most one policy plugin, got {', '.join(policies)}")
        return ResolvedProfile(
            scheduler_name=self.profile.scheduler_name,
            name=self.profile.preset or self.profile.scheduler_name,
            filters=tuple(r.name for r in filters),
            scores=tuple((r.name, r.weight or 1) for r in scores),
            args=self.args(base_args),
            post_filters=tuple(r.name for r in self.point(plugins, "postFilter")),
            permits=tuple(r.name for r in self.point(plugins, "permit")),
        )
