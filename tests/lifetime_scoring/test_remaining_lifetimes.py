"""What a lifetime source says: the oracle's remaining lifetimes at given times, per GPU
and per node; the model hook's residents, ages and quantile column, and the lifetime
package's forecast through it; hidden says nothing."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from scheduler.lifetimes.features import FEATURE_COUNT
from scheduler.lifetimes.forecast import PodLifetimeForecast
from scheduler.lifetimes.model import LifetimeModel, default_edges
from scheduler.objects.pod import Pod
from scheduler.plugins.remaining_lifetimes import (
    FloatArray,
    HiddenLifetimes,
    ModelLifetimes,
    OracleLifetimes,
    ResidentClock,
    node_free_in_s,
)
from scheduler.state.cluster_state import ClusterState
from tests.builders import all_nodes, make_node, make_pod

# Lifetimes (s) the oracle knows, by pod key.
LIFETIMES = {"default/whole2": 1000.0, "default/share": 400.0, "default/cpu": 5000.0, "default/new": 300.0}


def cluster(clock: ResidentClock) -> ClusterState:
    """n1 (4 GPUs): ``whole2`` on GPUs 0 and 1 and ``share`` (half a GPU) on GPU 2, both
    placed at 100 s, and CPU-only ``cpu``; n2 (2 GPUs): nothing."""
    state = ClusterState([make_node("n1", cpu="32", gpus=4), make_node("n2", cpu="32", gpus=2)])
    clock.advance(100.0)
    for pod, gpus in (
        (make_pod("whole2", cpu="1", gpus=2), (0, 1)),
        (make_pod("share", cpu="1", gpus=1, gpu_milli=500), (2,)),
        (make_pod("cpu", cpu="1"), ()),
    ):
        state.place(pod, "n1", gpus)
        clock.start(pod.key)
    return state


@pytest.mark.parametrize(
    ("now", "whole2", "share"),
    [
        (100.0, 1000.0, 400.0),  # just placed: the whole lifetime is left
        (350.0, 750.0, 150.0),  # 1000 - 250, 400 - 250
        (500.0, 600.0, 0.0),  # share's lifetime ran out at 500
        (2000.0, 0.0, 0.0),  # past both: never negative
    ],
)
def test_the_oracle_gives_what_is_left_of_each_lifetime(now: float, whole2: float, share: float) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    clock.advance(now)
    oracle = OracleLifetimes(LIFETIMES, clock)
    free_in = oracle.gpu_free_in_s(state, all_nodes(state))
    assert free_in is not None
    # n1's GPUs 0-1 wait for whole2, GPU 2 for share, GPU 3 and n2 are free; the CPU-only
    # pod holds no GPU.
    expected = np.zeros((2, 8))
    expected[0, :3] = (whole2, whole2, share)
    np.testing.assert_allclose(free_in, expected)
    np.testing.assert_allclose(node_free_in_s(free_in), [max(whole2, share), 0.0])
    # A pod not placed yet has its whole lifetime ahead of it, at any time.
    assert oracle.pod_remaining_s(make_pod("new", gpus=1)) == 300.0


def test_a_departed_pod_no_longer_counts() -> None:
    clock = ResidentClock()
    state = cluster(clock)
    state.remove("default/whole2")
    clock.end("default/whole2")
    clock.advance(200.0)
    free_in = OracleLifetimes(LIFETIMES, clock).gpu_free_in_s(state, np.array([0], np.int64))
    assert free_in is not None
    assert node_free_in_s(free_in).tolist() == [300.0]  # share: 400 - 100


def test_a_pod_that_never_ends_is_free_in_infinity() -> None:
    clock = ResidentClock()
    state = cluster(clock)
    oracle = OracleLifetimes({**LIFETIMES, "default/whole2": math.inf}, clock)
    free_in = oracle.gpu_free_in_s(state, np.array([1, 0], np.int64))  # n2 first: rows follow `nodes`
    assert free_in is not None
    assert node_free_in_s(free_in).tolist() == [0.0, math.inf]


def test_hidden_knows_nothing() -> None:
    state = cluster(ResidentClock())
    hidden = HiddenLifetimes()
    assert hidden.pod_remaining_s(make_pod("new", gpus=1)) is None
    assert hidden.gpu_free_in_s(state, all_nodes(state)) is None


class RecordingModel:
    """Quantiles (0.1, 0.5, 0.9) of the remaining lifetime: 1000 s per GPU, less the age,
    x 0.5, 1, 2; remembers what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], FloatArray]] = []

    def __call__(self, pods: Sequence[Pod], ages: FloatArray) -> FloatArray:
        self.calls.append(([p.key for p in pods], ages))
        median = np.maximum(1000.0 * np.array([p.gpu.count for p in pods]) - ages, 0.0)
        return np.stack([0.5 * median, median, 2.0 * median], axis=1)


@pytest.mark.parametrize(
    ("quantile", "whole2_s", "share_s", "new_s"),
    [
        (1, 1500.0, 500.0, 1000.0),  # the median
        (2, 3000.0, 1000.0, 2000.0),  # the 0.9 quantile: 2 x the median
        (-1, 3000.0, 1000.0, 2000.0),  # the last column
    ],
)
def test_the_model_hook_gets_the_residents_and_their_ages_and_one_quantile_is_the_estimate(
    quantile: int, whole2_s: float, share_s: float, new_s: float
) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    clock.advance(600.0)
    model = RecordingModel()
    lifetimes = ModelLifetimes(model, clock, quantile)
    free_in = lifetimes.gpu_free_in_s(state, np.array([0], np.int64))
    assert free_in is not None
    # whole2: 2 GPUs, age 500: median 2000 - 500 = 1500; share: 1 GPU, 1000 - 500 = 500.
    assert free_in[0, :3].tolist() == [whole2_s, whole2_s, share_s]
    keys, ages = model.calls[0]
    assert keys == ["default/whole2", "default/share"]  # GPU holders only
    np.testing.assert_allclose(ages, [500.0, 500.0])
    # The pod being placed has age 0: 1 GPU -> median 1000 s.
    assert lifetimes.pod_remaining_s(make_pod("new", gpus=1)) == new_s
    assert model.calls[-1][0] == ["default/new"]
    np.testing.assert_allclose(model.calls[-1][1], [0.0])


def test_the_lifetime_packages_forecast_plugs_in() -> None:
    """A model of one constant hazard, ln 2 per hour, for every pod: whatever its age, the
    median time left is 1 h (memorylessness)."""
    edges = default_edges()
    bins = edges.size - 1
    model = LifetimeModel(
        edges, np.full(bins, math.log(math.log(2.0) / 3600.0)), np.zeros((bins, FEATURE_COUNT))
    )
    clock = ResidentClock()
    state = cluster(clock)
    clock.advance(5000.0)
    lifetimes = ModelLifetimes.from_forecast(PodLifetimeForecast(model), clock)
    free_in = lifetimes.gpu_free_in_s(state, np.array([0], np.int64))
    assert free_in is not None
    np.testing.assert_allclose(free_in[0, :4], [3600.0, 3600.0, 3600.0, 0.0])
    assert lifetimes.pod_remaining_s(make_pod("new", gpus=1)) == pytest.approx(3600.0)


@pytest.mark.parametrize(
    "answer",
    [np.zeros((1, 2)), np.zeros((2,)), np.zeros((3, 3))],
    ids=["one column too few", "one dimension", "a row per pod too many"],
)
def test_a_model_answer_of_the_wrong_shape_is_refused(answer: FloatArray) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    lifetimes = ModelLifetimes(lambda _pods, _ages: answer, clock, 2)
    with pytest.raises(ValueError, match="lifetime model: expected quantiles"):
        lifetimes.gpu_free_in_s(state, np.array([0], np.int64))
