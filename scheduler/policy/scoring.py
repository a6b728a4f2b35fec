"""From a scorer's values to the framework's integer scores, without losing its choice."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import MAX_NODE_SCORE
from scheduler.state.cluster_state import IntArray


def integer_scores(values: npt.NDArray[np.float32]) -> IntArray:
    """0..100 with 100 exactly for the best value (ties included), so the profile's
    first-node tie break picks the scorer's own argmax."""
    top, low = float(values.max()), float(values.min())
    if top == low:
        return np.full(values.size, MAX_NODE_SCORE, np.int64)
    scaled = np.floor((values - low) / (top - low) * (MAX_NODE_SCORE - 1)).astype(np.int64)
    return np.where(values == top, MAX_NODE_SCORE, np.minimum(scaled, MAX_NODE_SCORE - 1))


def round_to_step(values: npt.NDArray[np.float32], step: float) -> npt.NDArray[np.float32]:
    """Values rounded to steps of ``step`` (unchanged for step 0); see ``model.quantize``."""
    if step <= 0:
        return values
    rounded: npt.NDArray[np.float32] = np.floor(values / step + 0.5).astype(np.float32)
    return rounded
