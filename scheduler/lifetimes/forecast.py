"""The live scheduler's question: for these pods, of these ages, how long will each
still run? ``PodLifetimeForecast`` answers it from ``Pod`` objects (their features made
by ``pod_features``) with a loaded model, in one numpy pass over the pods.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scheduler.lifetimes.features import feature_matrix
from scheduler.lifetimes.model import DEFAULT_QUANTILES, FloatArray, LifetimeModel
from scheduler.lifetimes.model_file import load_lifetime_model
from scheduler.objects.pod import Pod


@dataclass(frozen=True)
class PodLifetimeForecast:
    model: LifetimeModel

    @classmethod
    def load(cls, folder: Path | None = None) -> PodLifetimeForecast:
        """From a model folder (the shipped one when None); refused files raise
        ``LifetimeModelError``."""
        return cls(load_lifetime_model(folder))

    def remaining_quantiles(
        self,
        pods: Sequence[Pod],
        ages_s: Sequence[float] | FloatArray,
        quantiles: tuple[float, ...] = DEFAULT_QUANTILES,
    ) -> FloatArray:
        """``(pods, quantiles)`` seconds of remaining lifetime (age 0: a pod being placed)."""
        return self.model.remaining_quantiles(feature_matrix(pods), np.asarray(ages_s, np.float64), quantiles)

    def remaining_mean(self, pods: Sequence[Pod], ages_s: Sequence[float] | FloatArray) -> FloatArray:
        """Mean remaining seconds, truncated at the model's horizon."""
        return self.model.remaining_mean(feature_matrix(pods), np.asarray(ages_s, np.float64))
