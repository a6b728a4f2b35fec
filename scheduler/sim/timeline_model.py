"""A lifetime model for the timeline replay that never predicts a pod it was fitted on
(``--lifetimes model``): the trace's pods are cut into ``FOLDS`` folds by their row in
the pod list (every ``FOLDS``-th row), a ``scheduler.lifetimes`` model is fitted on the
pods outside each fold (censoring and left truncation as ``trace_lifetimes`` reads
them, ``FitConfig``'s defaults), and each pod's remaining lifetime is asked of the model
that did not see it, at its age, from the features the fit read (its QoS from the
list's column). The estimate is the median.

A time split (fit on the past, replay the future) would be the stricter test, but the
replay covers the whole busy window; cross-fitting keeps every pod's own lifetime out
of its forecast, and the model reads requests only, never when a pod arrived.

Fits are cached per trace in the process (about 12 s each on ``default``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt

from scheduler.lifetimes.fit import FitConfig, fit_lifetimes
from scheduler.lifetimes.model import LifetimeModel
from scheduler.lifetimes.trace_lifetimes import PodLifetimes, load_pod_lifetimes
from scheduler.objects.pod import Pod
from scheduler.plugins.remaining_lifetimes import FloatArray, ModelLifetimes, ResidentClock
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.trace import load_timed_pods

FOLDS = 2
MEDIAN = 0.5


@dataclass(frozen=True)
class CrossFitted:
    """Per pod key its row in ``lifetimes``; per row its fold; a model per fold fitted on
    the other folds."""

    row_of: dict[str, int]
    fold: npt.NDArray[np.int64]
    lifetimes: PodLifetimes
    models: tuple[LifetimeModel, ...]

    def __call__(self, pods: Sequence[Pod], ages_s: FloatArray) -> FloatArray:
        """Median remaining lifetimes, ``(pods, 1)``: each pod by its out-of-fold model."""
        return self.quantiles(pods, ages_s, np.array([MEDIAN]))

    def quantiles(self, pods: Sequence[Pod], ages_s: FloatArray, levels: FloatArray) -> FloatArray:
        """Remaining lifetimes at each of ``levels``, ``(pods, levels)``: each pod by its
        out-of-fold model (the start forecast's sampler)."""
        rows = np.array([self.row_of[p.key] for p in pods], np.int64)
        out = np.empty((rows.size, len(levels)), np.float64)
        for k, model in enumerate(self.models):
            mine = self.fold[rows] == k
            if mine.any():
                features = self.lifetimes.features[rows[mine]]
                out[mine] = model.remaining_quantiles(features, ages_s[mine], tuple(float(q) for q in levels))
        return out


@cache
def cross_fitted(trace: str) -> CrossFitted:
    lifetimes = load_pod_lifetimes(trace)
    keys = [p.pod.key for p in load_timed_pods(pod_list_path(trace))]
    fold = np.arange(len(keys), dtype=np.int64) % FOLDS
    models = []
    for k in range(FOLDS):
        seen = lifetimes.subset(fold != k, f"{lifetimes.name} without fold {k}")
        model, _ = fit_lifetimes(seen.features, seen.observed_s, seen.ended, FitConfig(), seen.entry_s)
        models.append(model)
    return CrossFitted({key: i for i, key in enumerate(keys)}, fold, lifetimes, tuple(models))


def model_lifetimes(trace: str, clock: ResidentClock) -> ModelLifetimes:
    return ModelLifetimes(cross_fitted(trace), clock, 0)
