"""How well a lifetime model's distributions match pods it did not see.

A model is scored at ages: at arrival (age 0: what a pending pod's placement knows) and
at fixed ages (1 minute, 1 hour, 10 hours, 1 day), each time on the pods still running
at that age (seen at it: created within the list's window, or entered before it) and
their remaining lifetime from it. Those are the pods the scheduler holds a forecast
for at that age. (Drawing one age per pod uniformly over its life instead would
over-weight short pods at every age: a resident pod is one in proportion to its
lifetime.)

- Coverage of quantile ``q``: the share of pods whose remaining lifetime is within their
  predicted ``q``-quantile; ``q`` when calibrated. Censored pods (still running at the
  trace's end) are handled through the probability integral transform ``u = 1 -
  S(a + r) / S(a)``: uniform on ``[0, 1]`` for a calibrated model, and for a censored pod
  only a lower bound, so the share of ``u <= q`` is a Kaplan-Meier estimate over ``u``
  (with every pod ended it is the plain share).
- Concordance (Harrell's C): of the pairs whose order is known (the shorter one ended),
  the share the predicted median orders the same way (ties count a half). 0.5 is
  chance.
- Log-likelihood per pod of the remaining lifetime (nats, density per second; a
  censored pod scores its survival), comparable between models on the same pods.

Baselines: ``marginal`` (no features: the same bins fitted to lifetimes alone, a binned
Kaplan-Meier estimate that still conditions on age) and ``no age`` (the model's
distribution at arrival used for the remaining lifetime at any age).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.lifetimes.model import FloatArray, LifetimeModel
from scheduler.lifetimes.trace_lifetimes import BoolArray, PodLifetimes

COVERAGE_QUANTILES = (0.1, 0.5, 0.9)
AGES_S = (0.0, 60.0, 3600.0, 36000.0, 86400.0)
_CHUNK = 1024


@dataclass(frozen=True)
class Forecaster:
    """A model read one way: with or without the pod's features, with or without its age."""

    name: str
    model: LifetimeModel
    use_features: bool = True
    use_age: bool = True

    def _inputs(self, x: FloatArray, age: FloatArray) -> tuple[FloatArray, FloatArray]:
        features = x if self.use_features else x[:, :0]
        return features, age if self.use_age else np.zeros_like(age)

    def remaining_quantiles(self, x: FloatArray, age: FloatArray, q: tuple[float, ...]) -> FloatArray:
        return self.model.remaining_quantiles(*self._inputs(x, age), q)

    def pit(self, x: FloatArray, age: FloatArray, remaining: FloatArray) -> FloatArray:
        """``1 - S(a + r) / S(a)``: the predicted chance of ending within ``remaining``."""
        return 1.0 - self.model.remaining_survival(*self._inputs(x, age), remaining)

    def log_likelihood(
        self, x: FloatArray, age: FloatArray, remaining: FloatArray, ended: BoolArray
    ) -> FloatArray:
        features, at = self._inputs(x, age)
        density = self.model.log_density_remaining(features, at, remaining)
        survival = np.log(np.maximum(self.model.remaining_survival(features, at, remaining), 1e-300))
        return np.where(ended, density, survival)


@dataclass(frozen=True)
class Score:
    forecaster: str
    age_s: float
    pods: int
    coverage: dict[float, float]
    concordance: float
    log_likelihood: float


def km_share_at_most(
    values: FloatArray, ended: BoolArray, thresholds: tuple[float, ...]
) -> dict[float, float]:
    """Kaplan-Meier estimate of ``P(value <= t)`` for each threshold, where a censored
    value is a lower bound."""
    order = np.lexsort((~ended, values))  # at a tie, events before censorings
    v, e = values[order], ended[order]
    at_risk = v.size - np.arange(v.size)
    factors = np.where(e, 1.0 - 1.0 / at_risk, 1.0)
    survival = np.cumprod(factors)
    out = {}
    for t in thresholds:
        seen = int(np.searchsorted(v, t, side="right"))
        out[t] = float(1.0 - (survival[seen - 1] if seen else 1.0))
    return out


def concordance(predicted: FloatArray, observed: FloatArray, ended: BoolArray) -> float:
    """Harrell's C of predicted against observed durations (higher predicts longer)."""
    agree = 0.0
    pairs = 0.0
    for start in range(0, observed.size, _CHUNK):
        o = observed[start : start + _CHUNK, None]
        p = predicted[start : start + _CHUNK, None]
        comparable = ended[start : start + _CHUNK, None] & (o < observed[None, :])
        pairs += float(np.count_nonzero(comparable))
        agree += float(np.count_nonzero(comparable & (p < predicted[None, :])))
        agree += 0.5 * float(np.count_nonzero(comparable & (p == predicted[None, :])))
    return agree / pairs if pairs else float("nan")


def score(forecaster: Forecaster, pods: PodLifetimes, age_s: float) -> Score | None:
    """The forecaster on the pods running at ``age_s`` (None when there are none)."""
    alive = (pods.entry_s <= age_s) & (pods.observed_s > age_s)
    if not np.any(alive):
        return None
    x = pods.features[alive]
    ended = pods.ended[alive]
    age = np.full(x.shape[0], age_s)
    remaining = pods.observed_s[alive] - age_s
    u = forecaster.pit(x, age, remaining)
    median = forecaster.remaining_quantiles(x, age, (0.5,))[:, 0]
    return Score(
        forecaster=forecaster.name,
        age_s=age_s,
        pods=int(x.shape[0]),
        coverage=km_share_at_most(u, ended, COVERAGE_QUANTILES),
        concordance=concordance(median, remaining, ended),
        log_likelihood=float(np.mean(forecaster.log_likelihood(x, age, remaining, ended))),
    )


def score_all(
    forecasters: list[Forecaster], pods: PodLifetimes, ages_s: tuple[float, ...] = AGES_S
) -> list[Score]:
    """Each forecaster at each age. Without its age a forecaster is its own at arrival,
    so it is scored at later ages only."""
    out = []
    for age in ages_s:
        for f in forecasters:
            if f.use_age or age > 0:
                scored = score(f, pods, age)
                if scored is not None:
                    out.append(scored)
    return out
