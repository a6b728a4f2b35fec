"""Reservations for waiting multi-GPU pods, with lifetime-aware backfill: the decisions
as pure functions (``timeline_reservations`` runs them in the replay).

EASY backfilling, as HPC batch schedulers run it, in kube's words: a waiting pod that
asks ``min_gpus`` GPUs or more and fits nowhere is *nominated* to one node (kube's
``nominatedNodeName``), and every other pod's Filter counts it there. At most
``max_reservations`` pods hold one at a time, the oldest waiting first.

- **Which node** (``choose_node``): of the nodes where only room is missing, with
  lifetimes the one where the pod's ``count`` GPUs are free soonest by the residents'
  remaining lifetimes (``start_in``: the ``count``-th smallest of the per-GPU free
  times), ties to the one with more free GPUs, then the first; with lifetimes hidden the
  one with the most free GPUs, ties to the first.
- **Who may go there** (``leaves_intact``): a pod placed on a reserved node keeps the
  reservation intact when, with its GPUs held until its own predicted end, the
  ``count``-th GPU of the node is free no later than without it: it either leaves
  before the reservation's expected start (backfill: its remaining lifetime at the
  backfill quantile is below the node's free time) or takes GPUs beyond those the
  reserved pod needs. Per GPU the free time is the latest end of its residents (0:
  free now). Ends are predictions: a resident placed before the reservation counts at
  the start quantile (the median), one placed after it and the candidate at the
  backfill quantile (p90: a backfilled pod must really be gone). With lifetimes hidden,
  a resident placed before the reservation leaves at some unknown time (``UNKNOWN_END``,
  the same for all), one placed after it never (``NEVER``), so only room beyond the
  need may be taken. A pre-reservation resident that never ends (a censored pod under
  the oracle) counts as ``BEYOND_HORIZON``: a pod that does end may backfill next to it.
  A pod that stays past the expected start (``keeps_room``) must also leave the reserved
  pod its CPU and memory, counting the pods placed since the reservation that stay too.
- **Even when it will not free in time**: a pod reserves the soonest node even when
  its expected start comes after its max wait runs out. Draining a node often takes
  longer than one pod's wait; the next waiting pod then reserves the node that is
  already draining (skipping such reservations was measured: it lost the whole gain).
- **Expiry**: a reservation ends when its pod is placed (on its node or wherever it
  fits first) or fails at its max wait.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# With lifetimes hidden: when a resident placed before the reservation leaves (unknown,
# the same for all), and when one placed after it does (never, as far as anyone knows).
UNKNOWN_END = 1.0
NEVER = math.inf
# A resident placed before the reservation that never ends: later than any pod that ends.
BEYOND_HORIZON = 1e15


@dataclass(frozen=True)
class ReservationConfig:
    """What ``--reserve`` sets (docs/timeline.md, "Reservations")."""

    min_gpus: int = 4  # K: pods asking this many GPUs or more reserve a node
    max_reservations: int = 1  # R: reservations held at a time, the oldest waiting pods first
    backfill_quantile: float = 0.9  # q: a pod's remaining lifetime at q decides whether it backfills
    start_quantile: float = 0.5  # the residents' remaining lifetime at this level gives the start

    def __post_init__(self) -> None:
        if self.min_gpus < 1:
            raise ValueError(f"reservations: min_gpus must be at least 1, got {self.min_gpus}")
        if self.max_reservations < 1:
            raise ValueError(
                f"reservations: max_reservations must be at least 1, got {self.max_reservations}"
            )
        for name in ("backfill_quantile", "start_quantile"):
            level = getattr(self, name)
            if not 0.0 < level < 1.0:
                raise ValueError(f"reservations: {name} must be in (0, 1), got {level}")

    def tag(self) -> str:
        """How a report labels it: ``reserve4`` with R and q when not the defaults."""
        parts = [f"reserve{self.min_gpus}"]
        if self.max_reservations != 1:
            parts.append(f"R={self.max_reservations}")
        if self.backfill_quantile != 0.9:
            parts.append(f"q={self.backfill_quantile:g}")
        return ",".join(parts)


def start_in(gpu_free_in: FloatArray, count: int) -> float:
    """Seconds until ``count`` of a node's GPUs are free (``gpu_free_in``: per GPU of the
    node, seconds until it has no resident); ``inf`` when the node has fewer."""
    if count <= 0:
        return 0.0
    if count > gpu_free_in.size:
        return math.inf
    return float(np.partition(gpu_free_in, count - 1)[count - 1])


def gpu_free_in(gpu_count: int, entry_gpu: IntArray, entry_end_s: FloatArray) -> FloatArray:
    """Per GPU of a node with ``gpu_count`` GPUs, the latest end of its residents (one
    entry per resident and GPU it holds: the GPU's index and the resident's end); 0
    where none."""
    free = np.zeros(gpu_count, np.float64)
    if entry_gpu.size:
        np.maximum.at(free, entry_gpu, np.maximum(entry_end_s, 0.0))
    return free


def leaves_intact(gpu_free: FloatArray, taken: Sequence[int], end_s: float, count: int) -> bool:
    """Whether a pod holding the GPUs ``taken`` until ``end_s`` keeps ``count`` GPUs of
    the node free as soon as without it."""
    if not taken:
        return True
    after = gpu_free.copy()
    index = np.asarray(taken, np.int64)
    after[index] = np.maximum(after[index], end_s)
    return start_in(after, count) <= start_in(gpu_free, count)


def keeps_room(
    allocatable: IntArray, staying: IntArray, request: IntArray, reserved_request: IntArray
) -> bool:
    """Whether a node's ``allocatable`` (CPU, memory, ...) less what the pods that stay
    past the reservation's start hold (``staying``) and the candidate's ``request``
    still holds the reserved pod's request."""
    return bool(np.all(allocatable - staying - request >= reserved_request))


def choose_node(rows: IntArray, free_gpus: IntArray, start_s: FloatArray | None) -> int | None:
    """The node to reserve among ``rows`` (in the cluster's order), given each one's free
    GPUs and, when lifetimes are known, the seconds until the pod's GPUs are free there;
    None when there is no candidate."""
    if rows.size == 0:
        return None
    if start_s is None:
        return int(rows[int(np.argmax(free_gpus))])  # argmax: the first of the ties
    order = np.lexsort((np.arange(rows.size), -free_gpus, start_s))
    return int(rows[int(order[0])])


def to_reserve(
    pending: Sequence[int], gpu_milli: IntArray, config: ReservationConfig, held: Collection[int]
) -> list[int]:
    """The pending pods (FIFO) that may try for a reservation now, oldest first: those
    asking ``min_gpus`` GPUs or more that hold none, none when every slot is held (the
    caller stops once the slots are full: a pod may find no node worth reserving)."""
    if len(held) >= config.max_reservations:
        return []
    threshold = config.min_gpus * 1000
    return [i for i in pending if int(gpu_milli[i]) >= threshold and i not in held]


@dataclass(frozen=True)
class Reservation:
    """Pod ``pod`` (its index in the replay) holds ``node`` (a state row) since ``made_s``
    until it is placed or ``expires_s`` (its arrival plus the max wait)."""

    pod: int
    node: int
    made_s: float
    expires_s: float
    count: int  # the GPUs it needs on one node

    def expired(self, now: float) -> bool:
        return now >= self.expires_s
