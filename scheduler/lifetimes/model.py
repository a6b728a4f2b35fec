"""A pod's lifetime as a piecewise-constant hazard over log-spaced bins, and the
queries the scheduler asks of it, vectorised over pods (numpy only).

Form. Lifetimes run from seconds to weeks, so the time axis is cut into bins whose
edges are log-spaced (``default_edges``: 0, 1 s, then 30 bins to 2^24 s = 194 days,
past the longest openb trace). In bin ``b`` a pod with features ``x`` ends at the
constant rate ``rate_b(x) = exp(bias_b + weights_b . x)`` (per second); the last bin
is open (its rate goes on past the horizon). This is the continuous-time twin of a
discrete-time hazard model (``sigmoid(w_b . x + c_b)`` per bin), preferred here
because:

- a pod censored (or ending) part-way through a bin counts exactly the seconds it was
  seen: no half-bin convention, and a 30-day bin costs nothing in resolution;
- the survival curve is continuous, so quantiles and means are exact, closed-form
  inversions, not interpolations of a step function;
- the likelihood is a Poisson GLM in the parameters: concave, one optimum (``fit``).

``weights`` has a row per bin, so the effect of a request may change with age (a
request that marks short pods early says little about a pod that has already run for
a day); how it may change is the fitter's business (``fit`` ties the rows to a few
smooth curves over log time).

Age. A pod of age ``a`` has remaining lifetime ``T - a`` given ``T > a``: its survival
is ``S(a + t) / S(a)``, i.e. the cumulative hazard from ``a`` on. Quantiles solve
``H(a + t) = H(a) - log(1 - q)`` in the bin where the cumulative hazard crosses; the
mean is integrated bin by bin and truncated at the horizon (``edges[-1]``; a pod older
than the horizon has mean 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
DEFAULT_QUANTILES = (0.1, 0.5, 0.9)
HORIZON_LOG2_S = 24.0  # 2^24 s = 194 days
DEFAULT_BINS = 31


def default_edges(bins: int = DEFAULT_BINS, horizon_log2_s: float = HORIZON_LOG2_S) -> FloatArray:
    """Bin edges in seconds: 0, then ``bins`` edges log-spaced from 1 s to the horizon
    (``bins`` bins, the last open past the horizon for the rate, closed for means)."""
    return np.concatenate([[0.0], np.exp2(np.linspace(0.0, horizon_log2_s, bins))])


@dataclass(frozen=True)
class LifetimeModel:
    """``edges``: ``bins + 1`` increasing times, ``edges[0] == 0``, ``edges[-1]`` the
    horizon; ``bias``: ``(bins,)``; ``weights``: ``(bins, features)``."""

    edges: FloatArray
    bias: FloatArray
    weights: FloatArray

    @property
    def bins(self) -> int:
        return int(self.bias.shape[0])

    @property
    def features(self) -> int:
        return int(self.weights.shape[1])

    @property
    def horizon_s(self) -> float:
        return float(self.edges[-1])

    def rates(self, x: FloatArray) -> FloatArray:
        """``(pods, bins)``: each pod's rate of ending in each bin, per second."""
        x = np.atleast_2d(np.asarray(x, np.float64))
        return np.exp(np.clip(x @ self.weights.T + self.bias, -700.0, 700.0))

    def _cumulative_at_starts(self, rates: FloatArray) -> FloatArray:
        """``(pods, bins)``: the cumulative hazard at each bin's start."""
        widths = np.diff(self.edges)
        out = np.zeros_like(rates)
        np.cumsum(rates[:, :-1] * widths[:-1], axis=1, out=out[:, 1:])
        return out

    def _bin_of(self, t: FloatArray) -> IntArray:
        index = np.searchsorted(self.edges, t, side="right") - 1
        return np.clip(index, 0, self.bins - 1)

    def _cumulative(self, rates: FloatArray, starts: FloatArray, t: FloatArray) -> FloatArray:
        rows = np.arange(rates.shape[0])
        k = self._bin_of(t)
        return starts[rows, k] + rates[rows, k] * (t - self.edges[k])

    def cumulative_hazard(self, x: FloatArray, t: FloatArray) -> FloatArray:
        """``H(t | x)`` per pod (``t`` broadcast to the pods)."""
        rates = self.rates(x)
        t = np.broadcast_to(np.asarray(t, np.float64), rates.shape[:1])
        return self._cumulative(rates, self._cumulative_at_starts(rates), t)

    def survival(self, x: FloatArray, t: FloatArray) -> FloatArray:
        """``S(t | x)``: the chance a pod lives past ``t``."""
        return np.exp(-self.cumulative_hazard(x, t))

    def remaining_survival(self, x: FloatArray, age: FloatArray, t: FloatArray) -> FloatArray:
        """``S(age + t | x) / S(age | x)``: the chance a pod of ``age`` runs ``t`` more."""
        rates = self.rates(x)
        n = rates.shape[0]
        age = np.broadcast_to(np.asarray(age, np.float64), (n,))
        t = np.broadcast_to(np.asarray(t, np.float64), (n,))
        starts = self._cumulative_at_starts(rates)
        return np.exp(self._cumulative(rates, starts, age) - self._cumulative(rates, starts, age + t))

    def remaining_quantiles(
        self, x: FloatArray, age: FloatArray, quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    ) -> FloatArray:
        """``(pods, len(quantiles))``: remaining lifetimes a pod of ``age`` ends within
        with each probability (``quantiles`` in ``[0, 1)``)."""
        q = np.asarray(quantiles, np.float64)
        if np.any((q < 0) | (q >= 1)):
            raise ValueError(f"quantiles must be in [0, 1), got {quantiles}")
        rates = self.rates(x)
        n = rates.shape[0]
        age = np.broadcast_to(np.asarray(age, np.float64), (n,))
        starts = self._cumulative_at_starts(rates)
        target = self._cumulative(rates, starts, age)[:, None] - np.log1p(-q)[None, :]
        k = np.count_nonzero(starts[:, None, :] <= target[:, :, None], axis=2) - 1
        k = np.clip(k, 0, self.bins - 1)
        rows = np.arange(n)[:, None]
        ended_at = self.edges[k] + (target - starts[rows, k]) / rates[rows, k]
        return np.asarray(np.maximum(ended_at - age[:, None], 0.0), np.float64)

    def remaining_mean(self, x: FloatArray, age: FloatArray) -> FloatArray:
        """The mean remaining lifetime of a pod of ``age``, truncated at the horizon:
        ``integral of S(u) / S(age) for u from age to the horizon``."""
        rates = self.rates(x)
        n = rates.shape[0]
        age = np.broadcast_to(np.asarray(age, np.float64), (n,))
        starts = self._cumulative_at_starts(rates)
        at_age = self._cumulative(rates, starts, age)
        lo_edge, hi_edge = self.edges[:-1], self.edges[1:]
        lower = np.clip(age[:, None], lo_edge, hi_edge)
        width = hi_edge - lower
        # Hazard gathered from the age to each bin's part after it: >= 0 wherever that part
        # has a width (bins before the age have none; clipped so their exp stays finite).
        gathered = starts + rates * (lower - lo_edge) - at_age[:, None]
        kept = np.exp(-np.maximum(gathered, 0.0))
        within = -np.expm1(-rates * width) / rates
        return np.asarray(np.sum(np.where(width > 0, kept * within, 0.0), axis=1), np.float64)

    def log_density_remaining(self, x: FloatArray, age: FloatArray, remaining: FloatArray) -> FloatArray:
        """``log f(age + r | x) - log S(age | x)``: the log density, per second, that a
        pod of ``age`` ends after exactly ``remaining`` more."""
        rates = self.rates(x)
        n = rates.shape[0]
        age = np.broadcast_to(np.asarray(age, np.float64), (n,))
        end = age + np.broadcast_to(np.asarray(remaining, np.float64), (n,))
        starts = self._cumulative_at_starts(rates)
        rows = np.arange(n)
        gained = self._cumulative(rates, starts, end) - self._cumulative(rates, starts, age)
        return np.asarray(np.log(rates[rows, self._bin_of(end)]) - gained, np.float64)
