"""Profiles as data: the presets, kube-scheduler's merge of a profile's plugins onto
the defaults, and the refusal (with its path) of what rl-scheduler does not implement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.framework.preemption import PreemptionArgs
from scheduler.k8s.process.settings import SettingsError, load_settings
from scheduler.plugins.profile_config import ProfileConfig, ProfileConfigError
from scheduler.plugins.profiles import build, build_profile, resolve
from scheduler.plugins.registry import ProfileContext

KUBE_FILTERS = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "GpuShare",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
)
PREFERENCES = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "DynamicResources": 2,
}
KUBE_SCORES = {**PREFERENCES, "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1}


def resolved(data: dict[str, Any]) -> tuple[tuple[str, ...], dict[str, int]]:
    profile = resolve(ProfileConfig.model_validate(data))
    return profile.filters, dict(profile.scores)


@pytest.mark.parametrize(
    ("preset", "scores"),
    [
        ("default", KUBE_SCORES),
        ("most-allocated", KUBE_SCORES),
        ("random", {**PREFERENCES, "Random": 1}),
        ("dot-prod", {**PREFERENCES, "DotProd": 1}),
        ("gpu-clustering", {**PREFERENCES, "GpuClustering": 1}),
        ("gpu-packing", {**PREFERENCES, "GpuPacking": 1}),
        ("best-fit", {**PREFERENCES, "BestFit": 1}),
        ("fgd", {**PREFERENCES, "FGD": 1}),
        ("fgd-reserve", {**PREFERENCES, "FgdReserve": 1}),
        ("gnn", {**PREFERENCES, "GnnScore": 1}),
    ],
)
def test_each_preset_runs_kubes_filters_and_its_scores(preset: str, scores: dict[str, int]) -> None:
    assert resolved({"schedulerName": "s", "preset": preset}) == (KUBE_FILTERS, scores)


def test_a_policy_decides_among_the_preferred_nodes_and_picks_the_gpus() -> None:
    """The preset's other scores become the policy's preferences (built, not just named)."""
    built = build_profile("best-fit")
    assert [(w.plugin.name, w.weight) for w in built.scores] == [("BestFit", 1)]
    assert {w.plugin.name: w.weight for w in built.preferences} == PREFERENCES
    assert (built.tie_break, type(built.gpu_selector).__name__) == ("first", "BestFitGpus")
    kube = build_profile("most-allocated")
    assert kube.tie_break == "random"
    assert not kube.preferences
    assert "MostAllocated" in [w.plugin.name for w in kube.scores]


@pytest.mark.parametrize(
    ("plugins", "scores"),
    [
        pytest.param({}, KUBE_SCORES, id="kube's defaults"),
        pytest.param(
            {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
            {**KUBE_SCORES, "NodeResourcesFit": 5},
            id="a default re-weighted in place",
        ),
        pytest.param(
            {"multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 7}]}},
            {**KUBE_SCORES, "TaintToleration": 7},
            id="re-weighted through multiPoint",
        ),
        pytest.param(
            {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "GpuPacking"}]}},
            {"GpuPacking": 1},
            id="every default score off, one policy alone",
        ),
        pytest.param(
            {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
            {k: v for k, v in KUBE_SCORES.items() if k != "NodeResourcesBalancedAllocation"},
            id="one default off",
        ),
        pytest.param(
            {"preScore": {"disabled": [{"name": "*"}]}, "score": {"disabled": [{"name": "*"}]}},
            {},
            id="kube's no-scoring example",
        ),
    ],
)
def test_plugins_merge_onto_the_defaults_as_in_kube_scheduler(
    plugins: dict[str, Any], scores: dict[str, int]
) -> None:
    assert resolved({"schedulerName": "s", "plugins": plugins})[1] == scores


def test_a_profile_can_drop_a_filter_and_start_from_a_preset() -> None:
    filters, scores = resolved(
        {"schedulerName": "s", "preset": "fgd", "plugins": {"filter": {"disabled": [{"name": "NodePorts"}]}}}
    )
    assert filters == tuple(f for f in KUBE_FILTERS if f != "NodePorts")
    assert scores == {**PREFERENCES, "FGD": 1}


@pytest.mark.parametrize(
    ("plugins", "plugin_config", "expected"),
    [
        pytest.param({}, [], PreemptionArgs(10, 100), id="kube's default: on, 10% and at least 100 nodes"),
        pytest.param(
            {},
            [{"name": "DefaultPreemption", "args": {"minCandidateNodesAbsolute": 5}}],
            PreemptionArgs(10, 5),
            id="its args",
        ),
        pytest.param(
            {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}},
            [],
            None,
            id="disabled at postFilter",
        ),
        pytest.param({"multiPoint": {"disabled": [{"name": "*"}]}}, [], None, id="every default disabled"),
    ],
)
def test_preemption_is_a_post_filter_plugin_as_in_kube_scheduler(
    plugins: dict[str, Any], plugin_config: list[dict[str, Any]], expected: PreemptionArgs | None
) -> None:
    config = ProfileConfig.model_validate(
        {"schedulerName": "s", "plugins": plugins, "pluginConfig": plugin_config}
    )
    assert build(resolve(config), ProfileContext()).preemption == expected


@pytest.mark.parametrize(
    ("plugins", "gangs"),
    [
        pytest.param({}, True, id="on by default"),
        pytest.param({"permit": {"disabled": [{"name": "Coscheduling"}]}}, False, id="disabled at permit"),
        pytest.param(
            {"multiPoint": {"disabled": [{"name": "Coscheduling"}]}}, False, id="disabled everywhere"
        ),
    ],
)
def test_gang_scheduling_is_the_coscheduling_permit_plugin(plugins: dict[str, Any], gangs: bool) -> None:
    config = ProfileConfig.model_validate({"schedulerName": "s", "plugins": plugins})
    assert build(resolve(config), ProfileContext()).gangs is gangs


@pytest.mark.parametrize(
    ("data", "path", "problem"),
    [
        pytest.param(
            {
                "pluginConfig": [
                    {
                        "name": "DefaultPreemption",
                        "args": {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
                    }
                ]
            },
            "p.pluginConfig[0].args",
            "must not both be 0",
            id="preemption that could try no node",
        ),
        pytest.param(
            {"plugins": {"score": {"enabled": [{"name": "NodeResourceFit"}]}}},
            "p.plugins.score.enabled[0].name",
            "unknown plugin 'NodeResourceFit'",
            id="misspelt plugin",
        ),
        pytest.param(
            {"plugins": {"filter": {"disabled": [{"name": "Nope"}]}}},
            "p.plugins.filter.disabled[0].name",
            "unknown plugin 'Nope'",
            id="unknown plugin disabled",
        ),
        pytest.param(
            {"plugins": {"reserve": {"enabled": [{"name": "VolumeBinding"}]}}},
            "p.plugins.reserve",
            "not supported by rl-scheduler",
            id="reserve point",
        ),
        pytest.param(
            {"plugins": {"postBind": {"disabled": [{"name": "*"}]}}},
            "p.plugins.postBind",
            "not supported by rl-scheduler",
            id="postBind point",
        ),
        pytest.param(
            {"plugins": {"score": {"enabled": [{"name": "ImageLocality"}]}}},
            "p.plugins.score.enabled[0].name",
            "ImageLocality is not implemented",
            id="kube plugin not implemented",
        ),
        pytest.param(
            {"plugins": {"multiPoint": {"disabled": [{"name": "PrioritySort"}]}}},
            "p.plugins.multiPoint.disabled[0].name",
            "always runs PrioritySort",
            id="built-in plugin disabled",
        ),
        pytest.param(
            {"plugins": {"score": {"enabled": [{"name": "FGD"}, {"name": "BestFit"}]}}},
            "p.plugins.score",
            "at most one policy plugin, got FGD, BestFit",
            id="two policies",
        ),
        pytest.param(
            {"plugins": {"score": {"enabled": [{"name": "NodeName"}]}}},
            "p.plugins.score",
            "NodeName is not a score plugin",
            id="filter as a score",
        ),
        pytest.param(
            {"plugins": {"preFilter": {"disabled": [{"name": "NodeAffinity"}]}}},
            "p.plugins.preFilter.disabled",
            "NodeAffinity: rl-scheduler runs a plugin's PreFilter with its Filter",
            id="PreFilter off, Filter on",
        ),
        pytest.param(
            {"pluginConfig": [{"name": "Fgd", "args": {}}]},
            "p.pluginConfig[0].name",
            "unknown plugin 'Fgd'",
            id="args of an unknown plugin",
        ),
        pytest.param(
            {
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
                    }
                ]
            },
            "p.pluginConfig[0].args.scoringStrategy.type",
            "Input should be 'LeastAllocated' or 'MostAllocated'",
            id="scoring strategy not implemented",
        ),
        pytest.param(
            {
                "pluginConfig": [
                    {"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}}
                ]
            },
            "p.pluginConfig[0].args.ignorePreferredTermsOfExistingPods",
            "Extra inputs are not permitted",
            id="plugin arg not implemented",
        ),
        pytest.param(
            {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"kind": "InterPodAffinityArgs"}}]},
            "p.pluginConfig[NodeResourcesFit].args.kind",
            "expected NodeResourcesFitArgs",
            id="args of another kind",
        ),
        pytest.param(
            {"percentageOfNodesToScore": 50},
            "p.percentageOfNodesToScore",
            "not supported by rl-scheduler",
            id="sampling nodes",
        ),
    ],
)
def test_what_rl_scheduler_does_not_implement_is_refused_with_its_path(
    data: dict[str, Any], path: str, problem: str
) -> None:
    with pytest.raises(ProfileConfigError) as caught:
        resolve(ProfileConfig.model_validate({"schedulerName": "s", **data}), "f.yaml", "p")
    assert caught.value.path == path
    assert problem in caught.value.problem


def write(tmp_path: Path, settings: dict[str, Any]) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def test_several_profiles_in_one_settings_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "scheduler_name": "rl-scheduler",
            "profile": "fgd",
            "weights": {"TaintToleration": 4},
            "profiles": [
                {"schedulerName": "rl-packer", "preset": "gpu-packing"},
                {"schedulerName": "kube-like"},
            ],
        },
    )
    profiles = load_settings(path).scheduler_profiles()
    assert [(p.scheduler_name, p.name, p.policy) for p in profiles] == [
        ("rl-scheduler", "fgd", "FGD"),
        ("rl-packer", "gpu-packing", "GpuPacking"),
        ("kube-like", "kube-like", None),
    ]
    assert dict(profiles[0].scores)["TaintToleration"] == 4


@pytest.mark.parametrize(
    ("settings", "field", "problem"),
    [
        pytest.param(
            {"profile": "fgd", "weights": {"LeastAlocated": 2}},
            "weights.LeastAlocated",
            "not a score plugin of profile fgd",
            id="misspelt weight",
        ),
        pytest.param(
            {"profile": "gnn", "weights": {"LeastAllocated": 2}},
            "weights.LeastAllocated",
            "not a score plugin of profile gnn",
            id="weight of a score the profile does not run",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a"}, {"schedulerName": "a", "preset": "fgd"}]},
            "profiles[1].schedulerName",
            "a is the schedulerName of profiles[0] too",
            id="one schedulerName twice",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a", "plugins": {"scores": {}}}]},
            "profiles[0].plugins.scores",
            "unknown field",
            id="misspelt extension point",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a", "preset": "fgdd"}]},
            "profiles[0].preset",
            "unknown preset 'fgdd'",
            id="unknown preset",
        ),
        pytest.param(
            {
                "profiles": [
                    {"schedulerName": "a", "plugins": {"permit": {"enabled": [{"name": "GpuShare"}]}}}
                ]
            },
            "profiles[0].plugins.permit",
            "GpuShare is not a permit plugin",
            id="a filter at permit",
        ),
    ],
)
def test_bad_profiles_in_settings_name_the_field(
    tmp_path: Path, settings: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(write(tmp_path, settings))
    assert caught.value.field == field
    assert problem in caught.value.problem


def test_old_weight_names_still_weigh_node_resources_fit(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, {"profile": "default", "weights": {"LeastAllocated": 3}}))
    assert dict(settings.scheduler_profiles()[0].scores)["NodeResourcesFit"] == 3
