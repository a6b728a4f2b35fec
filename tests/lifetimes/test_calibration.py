"""Calibration measures: by hand, and a model scored on its own draws is calibrated."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.lifetimes.calibration import Forecaster, concordance, km_share_at_most, score
from scheduler.lifetimes.features import FEATURE_COUNT
from scheduler.lifetimes.model import LifetimeModel, default_edges
from scheduler.lifetimes.trace_lifetimes import PodLifetimes


@pytest.mark.parametrize(
    ("values", "ended", "threshold", "share"),
    [
        ([0.2, 0.4, 0.6, 0.8], [True] * 4, 0.5, 0.5),  # all ended: the plain share
        ([0.2, 0.4, 0.6, 0.8], [True] * 4, 0.9, 1.0),
        ([0.2, 0.3, 0.6, 0.8], [True, False, True, True], 0.5, 0.25),  # censored at 0.3: 1 - 3/4
        ([0.2, 0.3, 0.6, 0.8], [True, False, True, True], 0.7, 1 - 0.75 * 0.5),  # then 1 of 2 at risk
        ([0.5, 0.5], [False, True], 0.5, 0.5),  # a tie: the event first, both at risk
    ],
)
def test_kaplan_meier_share(values: list[float], ended: list[bool], threshold: float, share: float) -> None:
    got = km_share_at_most(np.array(values), np.array(ended), (threshold,))
    assert got[threshold] == pytest.approx(share)


@pytest.mark.parametrize(
    ("predicted", "observed", "ended", "c"),
    [
        ([1, 2, 3], [10, 20, 30], [True] * 3, 1.0),
        ([3, 2, 1], [10, 20, 30], [True] * 3, 0.0),
        ([1, 1, 1], [10, 20, 30], [True] * 3, 0.5),
        ([1, 3, 2], [10, 20, 30], [True, True, False], 2 / 3),  # (20 ended, 30 censored) comparable
        ([1, 3, 2], [10, 20, 30], [True, False, True], 1.0),  # 20 censored: no pair with 30
    ],
)
def test_concordance_by_hand(
    predicted: list[float], observed: list[float], ended: list[bool], c: float
) -> None:
    assert concordance(
        np.array(predicted, float), np.array(observed, float), np.array(ended)
    ) == pytest.approx(c)


def test_a_model_is_calibrated_on_its_own_draws() -> None:
    rng = np.random.default_rng(5)
    model = LifetimeModel(default_edges(), np.linspace(-3, -14, 31), rng.normal(0, 0.4, (31, FEATURE_COUNT)))
    n = 6000
    x = rng.normal(0, 1, (n, FEATURE_COUNT))
    # Draw lifetimes by inverting S: S(T) = U.
    u = rng.uniform(size=n)
    lifetime = model.remaining_quantiles(x, np.zeros(n), ())[:, :0]  # shape check of the empty query
    assert lifetime.shape == (n, 0)
    lifetime = np.array(
        [model.remaining_quantiles(x[i : i + 1], np.zeros(1), (1 - u[i],))[0, 0] for i in range(n)]
    )
    censor = rng.exponential(np.median(lifetime) * 4, n)
    pods = PodLifetimes(
        "own draws", x, np.zeros(n), np.minimum(lifetime, censor), lifetime <= censor, np.zeros(n)
    )
    for age in (0.0, float(np.median(lifetime))):
        scored = score(Forecaster("self", model), pods, age)
        assert scored is not None
        for q, share in scored.coverage.items():
            assert share == pytest.approx(q, abs=0.03)
