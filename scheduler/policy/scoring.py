"""From a scorer's values to the framework's integer scores, without losing its choice."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import MAX_NODE_SCORE
from scheduler.state.cluster_state import IntArray


def integer_scores(values: npt.NDArray[np.float32]) -> IntArray:
    """0..100 with 100 exactly for the best value (ties included), so the profile's
    first-node tie break picks the scorer's own argmax. Values that are not finite
    (finite weights can still overflow) are put just past the finite ones, a NaN and
    -inf below, +inf above, in float64: a NaN became the int64 minimum and an infinity
    left every other node's score NaN."""
    finite = np.isfinite(values)
    if not finite.all():
        known = values[finite].astype(np.float64)
        lo, hi = (float(known.min()), float(known.max())) if known.size else (0.0, 0.0)
        span = max(hi - lo, 1.0)
        values = np.nan_to_num(values.astype(np.float64), nan=lo - span, posinf=hi + span, neginf=lo - span)
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
