"""The reserve term keeps its cores per idle GPU within the configured bounds, in the
torch model and in the numpy scorer the live plugin uses; the teacher's scores agree
with the pair features the network reads."""

import numpy as np
import pytest
import torch

from scheduler.framework.profile import Profile, WeightedScore, schedule_pod
from scheduler.learn.episode import EpisodeSpec, make_episode
from scheduler.plugins.profiles import default_filters
from scheduler.plugins.scores.fgd_reserve import ReserveScore, reserve_cores_per_gpu
from scheduler.policy.config import PRESSURE_PIVOT, ScorerConfig
from scheduler.policy.features import (
    CPU_LEFT_AFTER,
    CPU_PRESSURE,
    FGD_SCORE,
    IDLE_GPUS_AFTER,
    PAIR_FEATURES,
    POD_FEATURES,
)
from scheduler.policy.model import NodeScorer, numpy_scorer
from scheduler.resources.gpu import MAX_GPUS_PER_NODE


@pytest.mark.parametrize(
    ("base", "slope", "pressure", "expected_reserve"),
    [
        pytest.param(6.5, 0.0, PRESSURE_PIVOT, 6.5, id="inside the bounds"),
        pytest.param(2.0, 0.0, PRESSURE_PIVOT, 4.0, id="below: the minimum"),
        pytest.param(8.5, -11.0, 0.635, 9.0, id="extrapolated above: the maximum (openb cpu0)"),
        pytest.param(8.5, -11.0, 1.193, 4.53, id="cpu300: inside"),
    ],
)
def test_the_reserve_is_clamped(base: float, slope: float, pressure: float, expected_reserve: float) -> None:
    model = NodeScorer(ScorerConfig(hidden=8, head_hidden=8))
    assert model.reserve is not None
    with torch.no_grad():
        model.reserve.reserve.copy_(torch.tensor([base, slope, 0.0, 0.0, 0.0]))
        model.reserve.weight.fill_(1.0)
    pair = np.zeros((1, len(PAIR_FEATURES)), np.float32)
    pair[0, IDLE_GPUS_AFTER] = 1 / 8  # one idle GPU after placing
    pair[0, CPU_LEFT_AFTER] = 0.0  # no core left
    pod = np.zeros(len(POD_FEATURES), np.float32)
    pod[CPU_PRESSURE] = pressure
    with torch.no_grad():
        slow = float(model.reserve(torch.from_numpy(pair), torch.from_numpy(pod))[0])
    fast = float(numpy_scorer(model).reserve_penalty(pair, pod)[0])
    assert slow == pytest.approx(-expected_reserve, abs=0.01)
    assert fast == pytest.approx(slow, abs=1e-4)


def test_bounds_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="reserve_min <= reserve_max"):
        NodeScorer(ScorerConfig(reserve_min=9.0, reserve_max=4.0))
    with pytest.raises(ValueError, match="reserve_min <= reserve_max"):
        ScorerConfig.from_json({"reserve_min": -1.0})


@pytest.mark.parametrize(
    ("base", "case"),
    [(6.5, "inside the bounds"), (12.0, "above the maximum"), (1.0, "below the minimum")],
)
def test_a_clamped_reserve_still_learns(base: float, case: str) -> None:
    """The clamp bounds the value, not the gradient: a rule past a bound still moves
    toward the teacher's reserve (straight-through)."""
    model = NodeScorer(ScorerConfig(hidden=8, head_hidden=8))
    assert model.reserve is not None
    with torch.no_grad():
        model.reserve.reserve.copy_(torch.tensor([base, 0.0, 0.0, 0.0, 0.0]))
        model.reserve.weight.fill_(1.0)
    pair = torch.zeros((1, len(PAIR_FEATURES)))
    pair[0, IDLE_GPUS_AFTER] = 1 / 8
    pod = torch.zeros(len(POD_FEATURES))
    pod[CPU_PRESSURE] = PRESSURE_PIVOT
    penalty = model.reserve(pair, pod)[0]  # -reserve cores: one idle GPU, no core left
    penalty.backward()
    gradient = model.reserve.reserve.grad
    assert gradient is not None
    assert float(gradient[0]) == pytest.approx(-1.0), case  # d(-reserve)/d(base)


@pytest.mark.parametrize(("trace", "fraction"), [("default", 0.05), ("cpu300", 0.05), ("gpushare40", 0.05)])
def test_the_teacher_scores_as_the_policy_features_describe_it(trace: str, fraction: float) -> None:
    """``fgd-reserve`` ranks by FGD's plugin score plus the reserve correction, computed
    without the pair features; the same quantities read from the pair features (FGD's
    score, cores left after placing) give the same values at every decision of an
    episode, so the network is trained on inputs that describe its teacher."""
    episode = make_episode(EpisodeSpec(trace, 42, fraction))
    teacher = ReserveScore(episode.typical)
    profile = Profile("teacher", default_filters(), [WeightedScore(teacher, 1)], teacher, "first")
    state, rng = episode.fresh_state(), np.random.default_rng(0)
    decisions = 0
    for pod in episode.arrivals:
        decision = schedule_pod(state, pod, profile, rng)
        if decision.feasible.size:
            pair_x, _ = teacher.builder.pair_features(state, pod, decision.feasible)
            cores_after = pair_x[:, CPU_LEFT_AFTER].astype(np.float64) * 128.0
            reserve = reserve_cores_per_gpu(teacher.builder, state)
            idle_after = pair_x[:, IDLE_GPUS_AFTER].astype(np.float64) * MAX_GPUS_PER_NODE
            from_features = np.rint(
                pair_x[:, FGD_SCORE].astype(np.float64) * 100.0
            ) - teacher.weight * np.maximum(reserve * idle_after - cores_after, 0.0)
            values = teacher.values(state, pod, decision.feasible)
            assert values == pytest.approx(from_features, abs=1e-4), pod.name
            decisions += 1
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
    assert decisions > 100


def test_the_profiles_teacher_builds_no_edges_and_scores_the_same() -> None:
    """The ``FgdReserve`` plugin's builder skips the structure edges (the score never
    reads them); the training stages' teacher keeps them, and both score alike."""
    episode = make_episode(EpisodeSpec("default", 42, 0.05))
    with_edges, plugin = ReserveScore(episode.typical), ReserveScore(episode.typical, edges=False)
    profile = Profile("teacher", default_filters(), [WeightedScore(with_edges, 1)], with_edges, "first")
    state, rng = episode.fresh_state(), np.random.default_rng(0)
    for pod in episode.arrivals[:200]:
        decision = schedule_pod(state, pod, profile, rng)
        if decision.feasible.size:
            expected = with_edges.values(state, pod, decision.feasible)
            assert plugin.values(state, pod, decision.feasible) == pytest.approx(expected), pod.name
        if decision.scheduled:
            state.place(pod, decision.node, decision.gpu_indices)
    assert with_edges.builder.edge_index.shape[1] > 0
    assert plugin.builder.edge_index.shape[1] == 0
