"""FgdReserveLifetime's arithmetic on a small table of nodes and residents (the oracle's
lifetimes), when it adds nothing, the node it makes a pod choose, and its args."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.framework.profile import schedule_pod
from scheduler.plugins.profile_config import ProfileConfig, ProfileConfigError
from scheduler.plugins.profiles import build, build_profile, resolve
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.remaining_lifetimes import (
    HiddenLifetimes,
    OracleLifetimes,
    RemainingLifetimes,
    ResidentClock,
)
from scheduler.plugins.scores.fgd_reserve_lifetime import (
    LifetimeReserveScore,
    alignment_penalty,
    blocked_hours,
)
from scheduler.sim.replay import trace_typical_pods
from scheduler.state.cluster_state import ClusterState
from tests.builders import all_nodes, make_node, make_pod

HOUR = 3600.0
HORIZON_S = 168 * HOUR
NODES = ("busy", "short", "free", "small", "cpu")
# Each resident's lifetime (h); all are placed at 0 and it is now 2 h.
RESIDENTS = {"busy": 10.0, "short": 3.0}


def lifetimes_h(**more: float) -> dict[str, float]:
    return {f"default/{name}": hours * HOUR for name, hours in {**RESIDENTS, **more}.items()}


def cluster(clock: ResidentClock) -> ClusterState:
    """busy (8 GPUs): a 1-GPU pod with 8 h left; short (8 GPUs): one with 1 h left; free
    (8 GPUs) and small (2 GPUs): whole free; cpu: no GPU."""
    state = ClusterState(
        [
            make_node("busy", cpu="96", memory="512Gi", gpus=8),
            make_node("short", cpu="96", memory="512Gi", gpus=8),
            make_node("free", cpu="96", memory="512Gi", gpus=8),
            make_node("small", cpu="96", memory="512Gi", gpus=2),
            make_node("cpu", cpu="96", memory="512Gi"),
        ]
    )
    for name in RESIDENTS:
        state.place(make_pod(name, cpu="4", gpus=1), name, (0,))
        clock.start(f"default/{name}")
    clock.advance(2 * HOUR)
    return state


@pytest.mark.parametrize(
    ("pod_hours", "blocked", "expected"),
    [
        # A 1-GPU pod of 4 h. busy: free in 8 h > 4 h, nothing blocked; short: free in
        # 1 h, 8 GPUs x 3 h = 24; free: 8 x 4 = 32; small: 2 x 4 = 8; cpu: 0 GPUs.
        (4.0, "GPUHours", [0.0, 24.0, 32.0, 8.0, 0.0]),
        # Node-hours: every GPU node counts 1: 0, 3, 4, 4, 0.
        (4.0, "NodeHours", [0.0, 3.0, 4.0, 4.0, 0.0]),
        # A pod that never ends counts as the horizon, 168 h: busy 8 x 160 = 1280; short
        # 8 x 167 = 1336; free 8 x 168 = 1344; small 2 x 168 = 336.
        (math.inf, "GPUHours", [1280.0, 1336.0, 1344.0, 336.0, 0.0]),
    ],
)
def test_blocked_hours(pod_hours: float, blocked: str, expected: list[float]) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    oracle = OracleLifetimes(lifetimes_h(new=pod_hours), clock)
    plugin = LifetimeReserveScore(
        None, oracle, 1.0, HORIZON_S, "GPUHours" if blocked == "GPUHours" else "NodeHours"
    )
    free_in = oracle.gpu_free_in_s(state, all_nodes(state))
    assert free_in is not None
    np.testing.assert_allclose(free_in.max(axis=1) / HOUR, [8.0, 1.0, 0.0, 0.0, 0.0])
    size = state.gpu_count[all_nodes(state)] if blocked == "GPUHours" else (state.gpu_count[: len(state)] > 0)
    hours = blocked_hours(pod_hours * HOUR, free_in.max(axis=1), size.astype(np.int64), HORIZON_S)
    np.testing.assert_allclose(hours, expected)
    # The plugin takes weight x log2(1 + blocked) points.
    correction = plugin.correction(state, make_pod("new", cpu="4", gpus=1), all_nodes(state))
    assert correction is not None
    np.testing.assert_allclose(correction, -np.log2(1.0 + np.array(expected)))


@pytest.mark.parametrize(
    ("blocked", "points"),
    [(0.0, 0.0), (1.0, 1.0), (3.0, 2.0), (24.0, math.log2(25.0)), (32.0, math.log2(33.0))],
)
def test_alignment_penalty_is_doublings_of_one_plus_the_hours_blocked(blocked: float, points: float) -> None:
    assert alignment_penalty(np.array([blocked]))[0] == pytest.approx(points)


@pytest.mark.parametrize(
    ("case", "lifetimes", "weight", "pod_args"),
    [
        ("hidden lifetimes", HiddenLifetimes(), 10.0, {"gpus": 1}),
        ("weight 0", None, 0.0, {"gpus": 1}),
        ("a CPU-only pod", None, 10.0, {}),
    ],
)
def test_nothing_is_added_when(
    case: str, lifetimes: HiddenLifetimes | None, weight: float, pod_args: dict[str, int]
) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    source = lifetimes if lifetimes is not None else OracleLifetimes(lifetimes_h(new=4.0), clock)
    plugin = LifetimeReserveScore(None, source, weight, HORIZON_S)
    pod = make_pod("new", cpu="4", **pod_args)
    assert plugin.correction(state, pod, all_nodes(state)) is None, case
    # ... and its values are FgdReserve's, to the bit.
    np.testing.assert_array_equal(
        plugin.values(state, pod, all_nodes(state)), plugin.reserve.values(state, pod, all_nodes(state))
    )


def profile_context(lifetimes: RemainingLifetimes) -> ProfileContext:
    typical = trace_typical_pods([make_pod("t1", cpu="4", gpus=1), make_pod("t8", cpu="32", gpus=8)])
    return ProfileContext(typical_pods=typical, lifetimes=lifetimes)


@pytest.mark.parametrize(
    ("pod_hours", "chosen"),
    [
        (4.0, "busy"),  # busy's resident outlasts it: nothing blocked
        (0.5, "busy"),  # shorter than short's resident too: busy and short block nothing, FGD picks busy
        (20.0, "small"),  # outlasts every resident: the fewest GPU-hours blocked, 2 x 20 = 40 on small
    ],
)
def test_the_profile_picks_the_node_that_blocks_the_fewest_gpu_hours(pod_hours: float, chosen: str) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    oracle = OracleLifetimes(lifetimes_h(new=pod_hours), clock)
    config = ProfileConfig.model_validate(
        {
            "preset": "fgd-reserve-lifetime",
            "pluginConfig": [{"name": "FgdReserveLifetime", "args": {"weight": 100}}],
        }
    )
    profile = build(resolve(config), profile_context(oracle))
    decision = schedule_pod(state, make_pod("new", cpu="4", gpus=1), profile, np.random.default_rng(0))
    assert decision.node == chosen


def test_the_preset_with_hidden_lifetimes_scores_as_fgd_reserve() -> None:
    state = cluster(ResidentClock())
    pod = make_pod("new", cpu="4", gpus=1)
    lifetime = build_profile("fgd-reserve-lifetime", profile_context(HiddenLifetimes()))
    reserve = build_profile("fgd-reserve", profile_context(HiddenLifetimes()))
    rng = np.random.default_rng(0)
    ours, theirs = schedule_pod(state, pod, lifetime, rng), schedule_pod(state, pod, reserve, rng)
    assert (ours.node, ours.gpu_indices) == (theirs.node, theirs.gpu_indices)
    assert ours.scores is not None
    assert theirs.scores is not None
    np.testing.assert_array_equal(ours.scores, theirs.scores)


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"weight": -1}, "weight"),
        ({"weight": "nan"}, "weight"),
        ({"horizonHours": 0}, "horizonHours"),
        ({"blocked": "PodHours"}, "blocked"),
        ({"wieght": 3}, "wieght"),
    ],
)
def test_bad_args_are_refused_naming_the_field(args: dict[str, object], path: str) -> None:
    config = ProfileConfig.model_validate(
        {"preset": "fgd-reserve-lifetime", "pluginConfig": [{"name": "FgdReserveLifetime", "args": args}]}
    )
    with pytest.raises(ProfileConfigError, match=rf"pluginConfig\[0\]\.args\.{path}"):
        resolve(config)
