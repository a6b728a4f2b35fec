"""Fitting recovers known lifetimes, and only because censoring and truncation are
counted."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.lifetimes.fit import FitConfig, basis, exposure, fit_lifetimes

# Per group: (Weibull shape, scale in seconds). Shape 1 is exponential.
GROUPS = [(1.0, 600.0), (0.6, 3600.0), (1.5, 20_000.0)]
CHECK_TIMES = (60.0, 600.0, 3600.0, 20_000.0)
TOLERANCE = 0.05  # 1,500 pods a group: about 3 standard errors of the worst of 12 checks
PODS_PER_GROUP = 1500


def population(
    seed: int, censor_scale: float = 10_000.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One-hot group features, true lifetimes, observed ages and end flags, each pod
    censored at an exponential time of ``censor_scale``."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(len(GROUPS)), PODS_PER_GROUP)
    shape = np.array([g[0] for g in GROUPS])[group]
    scale = np.array([g[1] for g in GROUPS])[group]
    lifetime = scale * rng.weibull(shape)
    censor = rng.exponential(censor_scale, group.size)
    x = np.eye(len(GROUPS))[group][:, 1:]  # group 0 is the baseline
    return x, lifetime, np.minimum(lifetime, censor), lifetime <= censor


def true_survival(group: int, t: float) -> float:
    shape, scale = GROUPS[group]
    return float(np.exp(-((t / scale) ** shape)))


def worst_error(
    model_x: np.ndarray, observed: np.ndarray, ended: np.ndarray, entry: np.ndarray | None = None
) -> float:
    model, report = fit_lifetimes(model_x, observed, ended, FitConfig(l2=1e-4), entry)
    assert report.converged
    worst = 0.0
    for g in range(len(GROUPS)):
        features = np.eye(len(GROUPS))[g : g + 1, 1:]
        for t in CHECK_TIMES:
            worst = max(worst, abs(float(model.survival(features, t)[0]) - true_survival(g, t)))
    return worst


def test_censored_fit_recovers_the_truth() -> None:
    x, _, observed, ended = population(seed=3)
    assert 0.2 < 1 - ended.mean() < 0.6  # a good share censored
    assert worst_error(x, observed, ended) < TOLERANCE


def test_treating_censored_pods_as_ended_is_biased() -> None:
    x, _, observed, ended = population(seed=3)
    assert worst_error(x, observed, np.ones_like(ended)) > 3 * TOLERANCE


def test_left_truncated_pods_are_conditioned_on_their_entry_age() -> None:
    """Pods seen only if they outlived a window's start: with the entry age the fit
    recovers the truth; without it (as if seen from birth) it is biased long."""
    rng = np.random.default_rng(4)
    x, lifetime, observed, ended = population(seed=4)
    entry = np.where(rng.uniform(size=lifetime.size) < 0.5, rng.uniform(0, 5000, lifetime.size), 0.0)
    seen = lifetime > entry
    x, observed, ended, entry = x[seen], np.maximum(observed[seen], entry[seen]), ended[seen], entry[seen]
    # a pod censored before its entry cannot be in the data: censor at entry at the earliest
    assert worst_error(x, observed, ended, entry) < TOLERANCE
    assert worst_error(x, observed, ended) > 2 * TOLERANCE


@pytest.mark.parametrize(
    ("observed", "expected"),
    [
        (0.0, [0, 0, 0]),
        (5.0, [5, 0, 0]),
        (10.0, [10, 0, 0]),
        (50.0, [10, 40, 0]),
        (5000.0, [10, 90, 4900]),  # the last bin is open
    ],
)
def test_exposure_by_hand(observed: float, expected: list[float]) -> None:
    edges = np.array([0.0, 10.0, 100.0, 1000.0])
    assert exposure(edges, np.array([observed]))[0].tolist() == expected


@pytest.mark.parametrize("curves", [1, 2, 4, 8])
def test_basis_is_a_partition_of_unity(curves: int) -> None:
    phi = basis(31, curves)
    assert phi.shape == (31, curves)
    assert np.allclose(phi.sum(axis=1), 1.0)


@pytest.mark.parametrize(
    ("observed", "ended", "entry", "problem"),
    [
        ([1.0, -1.0], [True, True], None, "at least 0"),
        ([1.0, np.nan], [True, True], None, "finite"),
        ([1.0, 2.0], [True], None, "end flags"),
        ([1.0, 2.0], [True, True], [0.0, 3.0], "entry"),
    ],
)
def test_bad_data_is_refused(
    observed: list[float], ended: list[bool], entry: list[float] | None, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        fit_lifetimes(
            np.zeros((2, 1)),
            np.array(observed),
            np.array(ended),
            entry_s=None if entry is None else np.array(entry),
        )
