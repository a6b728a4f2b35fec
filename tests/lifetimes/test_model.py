"""Survival, remaining-lifetime quantiles and means of a hand-computable model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.lifetimes.model import LifetimeModel, default_edges

# Three bins, [0, 10), [10, 100), [100, 1000) and open past 1000 (mean truncated there), at
# rates 0.1, 0.01 and 0.001 per second: cumulative hazard 1 at 10 s, 1.9 at 100 s, 2.8 at
# 1000 s.
EDGES = np.array([0.0, 10.0, 100.0, 1000.0])
RATES = np.array([0.1, 0.01, 0.001])


def hand_model(rates: np.ndarray = RATES, edges: np.ndarray = EDGES) -> LifetimeModel:
    """A model with one feature, weight 0: every pod has ``rates``."""
    return LifetimeModel(edges=edges, bias=np.log(rates), weights=np.zeros((rates.size, 1)))


ONE_POD = np.zeros((1, 1))


@pytest.mark.parametrize(
    ("t", "cumulative"),
    [(0.0, 0.0), (5.0, 0.5), (10.0, 1.0), (55.0, 1.45), (100.0, 1.9), (1000.0, 2.8), (2000.0, 3.8)],
)
def test_survival_is_exp_of_the_cumulative_hazard(t: float, cumulative: float) -> None:
    model = hand_model()
    assert model.cumulative_hazard(ONE_POD, t)[0] == pytest.approx(cumulative)
    assert model.survival(ONE_POD, t)[0] == pytest.approx(math.exp(-cumulative))


@pytest.mark.parametrize(
    ("age", "q", "remaining"),
    [
        (0.0, 0.5, 10 * math.log(2)),  # within the first bin
        (0.0, 0.9, 100 + (math.log(10) - 1.9) / 0.001),  # crosses into the third
        (10.0, 0.5, 100 * math.log(2)),  # from a bin's start
        (50.0, 0.1, -math.log(0.9) / 0.01),  # from inside a bin
        (90.0, 0.5, 10 + (math.log(2) - 0.1) / 0.001),  # crosses a bin from inside
        (500.0, 0.5, 1000 * math.log(2)),  # past the horizon: the last bin's rate goes on
        (5000.0, 0.9, 1000 * math.log(10)),
        (0.0, 0.0, 0.0),
    ],
)
def test_remaining_quantiles_by_hand(age: float, q: float, remaining: float) -> None:
    got = hand_model().remaining_quantiles(ONE_POD, np.array([age]), (q,))
    assert got.shape == (1, 1)
    assert got[0, 0] == pytest.approx(remaining)


@pytest.mark.parametrize(
    ("rate", "age"), [(0.01, 0.0), (0.01, 400.0), (0.001, 0.0), (0.002, 999.0), (0.01, 1e4)]
)
def test_mean_of_a_constant_rate_is_truncated_at_the_horizon(rate: float, age: float) -> None:
    model = hand_model(np.full(3, rate))
    expected = -math.expm1(-rate * max(1000.0 - age, 0.0)) / rate
    assert model.remaining_mean(ONE_POD, np.array([age]))[0] == pytest.approx(expected)


def test_mean_across_bins_matches_numeric_integration() -> None:
    model = hand_model()
    for age in (0.0, 7.0, 150.0):
        u = np.linspace(age, 1000.0, 400_001)
        s = model.survival(np.zeros((u.size, 1)), u) / model.survival(ONE_POD, age)[0]
        numeric = float(np.sum((s[1:] + s[:-1]) / 2 * np.diff(u)))
        assert model.remaining_mean(ONE_POD, np.array([age]))[0] == pytest.approx(numeric, rel=1e-6)


def test_remaining_survival_and_density_agree() -> None:
    model = hand_model()
    age, r, h = 30.0, 200.0, 1e-4
    s = model.remaining_survival(np.zeros((2, 1)), age, np.array([r - h, r + h]))
    density = -(s[1] - s[0]) / (2 * h)
    log_density = model.log_density_remaining(ONE_POD, np.array([age]), np.array([r]))[0]
    assert math.exp(log_density) == pytest.approx(density, rel=1e-5)


def test_quantiles_invert_remaining_survival() -> None:
    rng = np.random.default_rng(1)
    model = LifetimeModel(default_edges(), rng.normal(-8, 2, 31), rng.normal(0, 0.5, (31, 3)))
    x = rng.normal(0, 1, (500, 3))
    age = rng.uniform(0, 1e5, 500)
    q = model.remaining_quantiles(x, age, (0.1, 0.5, 0.9))
    assert np.all(np.diff(q, axis=1) >= 0)
    for j, level in enumerate((0.1, 0.5, 0.9)):
        assert np.allclose(model.remaining_survival(x, age, q[:, j]), 1 - level, atol=1e-9)


def test_batch_equals_one_pod_at_a_time() -> None:
    rng = np.random.default_rng(2)
    model = LifetimeModel(default_edges(), rng.normal(-8, 2, 31), rng.normal(0, 0.5, (31, 2)))
    x, age = rng.normal(0, 1, (20, 2)), rng.uniform(0, 1e4, 20)
    batch = np.column_stack([model.remaining_quantiles(x, age), model.remaining_mean(x, age)])
    single = [
        np.concatenate(
            [
                model.remaining_quantiles(x[i : i + 1], age[i : i + 1])[0],
                model.remaining_mean(x[i : i + 1], age[i : i + 1]),
            ]
        )
        for i in range(20)
    ]
    assert np.allclose(batch, np.array(single))


def test_quantile_levels_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="quantiles"):
        hand_model().remaining_quantiles(ONE_POD, np.zeros(1), (1.0,))
