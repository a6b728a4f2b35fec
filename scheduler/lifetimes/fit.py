"""Fitting a ``LifetimeModel`` by penalised maximum likelihood with censoring (offline:
numpy and scipy's L-BFGS).

Likelihood. A pod seen for ``d`` seconds spends ``exposure_b`` of them in bin ``b``. If
it ended at ``d`` (in bin ``k``) it contributes ``log rate_k - sum_b exposure_b
rate_b``; if it was still running when observation stopped (censored) only the
survival part ``- sum_b exposure_b rate_b``: it is known to have lived ``d`` and no
more. Treating a censored pod as ended would shorten every long-lived group's
lifetimes (tested). The log-likelihood is that of a Poisson regression of events on
exposure, concave in the parameters, so L-BFGS from the marginal rates finds the one
optimum. A pod first seen at an age ``e`` (left truncation: the trace lists pods alive in
its window, so an old pod is there because it outlived the window's start) counts its
exposure from ``e`` on: its likelihood is conditioned on having lived to ``e``.

Parameters. ``weights_b = sum_j basis_bj curve_j``: each feature's effect is a
piecewise-linear curve over log time with ``curves`` knots (hat functions, so the
curves are the effect at the knots; ``curves=1`` is one effect for all ages, the
proportional-hazards form). On ``default`` the effects change sign with age: with
one curve the model ranks pods at 1 hour worse than chance on later pods (C 0.39 on the
time split), with 4 curves 0.62; 8 curves at ``l2 = 0.01`` had the best held-out
likelihood of 1, 4, 6 and 8 at ``l2`` 0.001 to 0.1 (fit before the 50% and the 70%
pod, test after), at ``8 x features`` parameters instead of ``bins x features``.
Features are standardised inside the fit (the penalty then weighs them
alike) and folded back, so the model reads raw features.

Penalties, per pod of data: ``l2 / 2 |curves|^2`` (a feature seen in few pods stays near
no effect), and ``smoothness / 2 |second differences of bias|^2`` (a bin with no events,
past the longest lifetime or between sparse ones, takes its neighbours' rate instead of
rate 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from scheduler.lifetimes.model import FloatArray, LifetimeModel, default_edges

BoolArray = npt.NDArray[np.bool_]

# Rates are floored where a bin has no events, for the starting point only.
_START_FLOOR = 1e-12


@dataclass(frozen=True)
class FitConfig:
    edges: FloatArray = field(default_factory=default_edges)
    curves: int = 8
    l2: float = 1e-2
    smoothness: float = 1e-2
    max_iterations: int = 500


@dataclass(frozen=True)
class FitReport:
    iterations: int
    converged: bool
    log_likelihood_per_pod: float  # unpenalised, on the data fitted


def exposure(edges: FloatArray, observed_s: FloatArray) -> FloatArray:
    """``(pods, bins)``: seconds of each pod's observed life in each bin (the last bin
    open)."""
    starts = edges[:-1]
    ends = np.concatenate([edges[1:-1], [np.inf]])
    seen = np.asarray(observed_s, np.float64)[:, None]
    return np.asarray(np.clip(np.minimum(seen, ends) - starts, 0.0, None), np.float64)


def event_bins(edges: FloatArray, observed_s: FloatArray) -> FloatArray:
    """The bin each observed time falls in (the last bin open)."""
    index = np.searchsorted(edges, observed_s, side="right") - 1
    return np.clip(index, 0, edges.size - 2)


def basis(bins: int, curves: int) -> FloatArray:
    """``(bins, curves)`` hat functions over the bin index (log time), knots evenly
    spread; rows sum to 1."""
    if curves == 1:
        return np.ones((bins, 1))
    knots = np.linspace(0.0, bins - 1.0, curves)
    spacing = knots[1] - knots[0]
    position = np.arange(bins, dtype=np.float64)[:, None]
    return np.asarray(np.clip(1.0 - np.abs(position - knots[None, :]) / spacing, 0.0, None), np.float64)


def _second_differences(bins: int) -> FloatArray:
    return np.diff(np.eye(bins), n=2, axis=0)


def fit_lifetimes(
    x: FloatArray,
    observed_s: FloatArray,
    ended: BoolArray,
    config: FitConfig | None = None,
    entry_s: FloatArray | None = None,
) -> tuple[LifetimeModel, FitReport]:
    """The penalised maximum-likelihood model of pods with features ``x`` (pods,
    features), seen up to age ``observed_s`` each, ``ended`` where the pod ended then
    (else censored), and first seen at age ``entry_s`` (left truncation: a pod that is
    in the data only because it outlived that age; 0 by default)."""
    config = config or FitConfig()
    x = np.asarray(x, np.float64)
    observed = np.asarray(observed_s, np.float64)
    done = np.asarray(ended, np.bool_)
    n, d = x.shape
    if observed.shape != (n,) or done.shape != (n,):
        raise ValueError(f"{n} pods of features, {observed.size} times, {done.size} end flags")
    if n == 0 or not np.all(np.isfinite(observed)) or np.any(observed < 0):
        raise ValueError("need at least one pod and finite times at least 0")
    edges = np.asarray(config.edges, np.float64)
    bins = edges.size - 1
    entry = np.zeros(n) if entry_s is None else np.asarray(entry_s, np.float64)
    if entry.shape != (n,) or np.any(entry > observed) or np.any(entry < 0):
        raise ValueError("entry ages must be at least 0 and at most the observed ages")
    seconds = exposure(edges, observed) - exposure(edges, entry)
    events = np.zeros((n, bins))
    events[np.arange(n)[done], event_bins(edges, observed[done])] = 1.0
    # A constant column (every GPU-model flag on ``default``) gets no effect: its std may
    # come out as rounding noise, which standardising would blow up into a feature.
    constant = np.ptp(x, axis=0) == 0 if n else np.ones(d, np.bool_)
    mean = np.where(constant, 0.0, x.mean(axis=0))
    scale = np.where(constant, 1.0, x.std(axis=0))
    z = np.where(constant, 0.0, (x - mean) / scale)
    phi = basis(bins, config.curves)
    second = _second_differences(bins)
    smooth = config.smoothness * (second.T @ second) if bins > 2 else np.zeros((bins, bins))
    start_bias = np.log(np.maximum(events.sum(0), _START_FLOOR) / np.maximum(seconds.sum(0), 1e-9))

    def unpack(theta: FloatArray) -> tuple[FloatArray, FloatArray]:
        return theta[:bins], theta[bins:].reshape(config.curves, d)

    def objective(theta: FloatArray) -> tuple[float, FloatArray]:
        bias, curves = unpack(theta)
        weights = phi @ curves
        eta = bias + z @ weights.T
        rate = np.exp(np.clip(eta, -700.0, 700.0))
        expected = seconds * rate
        loglik = float(np.sum(events * eta) - np.sum(expected)) / n
        residual = (events - expected) / n
        loss = -loglik + 0.5 * config.l2 * float(np.sum(curves**2)) + 0.5 * float(bias @ smooth @ bias)
        grad_bias = -residual.sum(0) + smooth @ bias
        grad_curves = -(phi.T @ (residual.T @ z)) + config.l2 * curves
        return loss, np.concatenate([grad_bias, grad_curves.ravel()])

    theta0 = np.concatenate([start_bias, np.zeros(config.curves * d)])
    result = minimize(
        objective, theta0, jac=True, method="L-BFGS-B", options={"maxiter": config.max_iterations}
    )
    bias, curves = unpack(np.asarray(result.x, np.float64))
    weights_std = phi @ curves
    weights = weights_std / scale
    raw_bias = bias - weights_std @ (mean / scale)
    model = LifetimeModel(edges=edges, bias=raw_bias, weights=weights)
    eta = raw_bias + x @ weights.T
    loglik = float(np.sum(events * eta) - np.sum(seconds * np.exp(np.clip(eta, -700.0, 700.0)))) / n
    return model, FitReport(int(result.nit), bool(result.success), loglik)
