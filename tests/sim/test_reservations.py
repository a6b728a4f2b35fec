"""Reservations for waiting multi-GPU pods with lifetime-aware backfill: the decisions
as tables (``scheduler.sim.reservations``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.sim.reservations import (
    BEYOND_HORIZON,
    NEVER,
    UNKNOWN_END,
    Reservation,
    ReservationConfig,
    choose_node,
    gpu_free_in,
    keeps_room,
    leaves_intact,
    start_in,
    to_reserve,
)

U, N = UNKNOWN_END, NEVER

# (id, per-GPU free times, GPUs needed, seconds until that many are free)
START = [
    ("all free: now", [0, 0, 0, 0], 4, 0.0),
    ("the 4th smallest of 0, 0, 50, 100, 300, 900, 20, 10", [0, 0, 50, 100, 300, 900, 20, 10], 4, 20.0),
    ("8 of 8: the last to free", [0, 0, 50, 100, 300, 900, 20, 10], 8, 900.0),
    ("more GPUs than the node has: never", [0, 0], 4, math.inf),
    ("none needed: now", [5.0], 0, 0.0),
]


@pytest.mark.parametrize(("free", "count", "expected"), [r[1:] for r in START], ids=[r[0] for r in START])
def test_start_is_when_enough_gpus_are_free(free: list[float], count: int, expected: float) -> None:
    assert start_in(np.array(free, np.float64), count) == expected


def test_a_gpu_is_free_when_its_last_resident_leaves() -> None:
    """GPU 0 holds residents ending at 10 and 30 (a share each), GPU 2 one ending at 5
    and a negative end (already over) counts as 0; GPUs 1 and 3 are free."""
    free = gpu_free_in(4, np.array([0, 0, 2, 3], np.int64), np.array([10.0, 30.0, 5.0, -1.0]))
    assert free.tolist() == [30.0, 0.0, 5.0, 0.0]


# (id, per-GPU free times, GPUs the candidate takes, its end, GPUs the reserved pod needs, intact?)
INTACT = [
    # 8-GPU node, 4 needed: free times sorted 0 0 10 20 | 50 100 300 900, start 20.
    (
        "ends before the start (15 < 20) on a GPU free now: backfill",
        [0, 0, 50, 100, 300, 900, 20, 10],
        [0],
        15.0,
        4,
        True,
    ),
    ("ends at the start exactly (20): no delay", [0, 0, 50, 100, 300, 900, 20, 10], [0], 20.0, 4, True),
    (
        "ends after the start on a GPU free now: 0 10 20 50 -> start 50",
        [0, 0, 50, 100, 300, 900, 20, 10],
        [0],
        60.0,
        4,
        False,
    ),
    (
        "stays long on a GPU beyond the need (held to 900): start still 20",
        [0, 0, 50, 100, 300, 900, 20, 10],
        [5],
        10_000.0,
        4,
        True,
    ),
    (
        "two long GPUs, one beyond (900) and one free now: start 50",
        [0, 0, 50, 100, 300, 900, 20, 10],
        [5, 0],
        10_000.0,
        4,
        False,
    ),
    ("takes no GPU (CPU only): intact", [0, 0, 50, 100], [], 10_000.0, 4, True),
    # Hidden lifetimes: residents before the reservation at U, after it at N.
    (
        "hidden, 4 of 8, 3 free: taking one free GPU leaves 4 to come",
        [0, 0, 0, U, U, U, U, U],
        [0],
        N,
        4,
        True,
    ),
    ("hidden, 4 of 8, after 4 such pods: a 5th breaks it", [U, U, U, U, N, N, N, N], [0], N, 4, False),
    ("hidden, 8 of 8: any GPU taken breaks it", [0, 0, 0, U, U, U, U, U], [0], N, 8, False),
    # A resident that never ends (oracle, censored) counts at BEYOND_HORIZON.
    (
        "never-ending resident: a pod that ends may backfill",
        [0, 0, 0, 0, 0, 0, 0, BEYOND_HORIZON],
        [0],
        1e9,
        8,
        True,
    ),
    (
        "never-ending resident: a pod that never ends may not",
        [0, 0, 0, 0, 0, 0, 0, BEYOND_HORIZON],
        [0],
        N,
        8,
        False,
    ),
]


@pytest.mark.parametrize(
    ("free", "taken", "end", "count", "intact"), [r[1:] for r in INTACT], ids=[r[0] for r in INTACT]
)
def test_who_leaves_the_reservation_intact(
    free: list[float], taken: list[int], end: float, count: int, intact: bool
) -> None:
    gpu_free = np.array(free, np.float64)
    assert leaves_intact(gpu_free, taken, end, count) is intact
    assert gpu_free.tolist() == [float(f) for f in free]  # not changed in place


# (id, allocatable, staying, request, reserved request, room kept?) on (CPU milli, memory MiB)
ROOM = [
    ("64 - 16 - 8 = 40 >= 32 CPUs", [64_000, 256], [16_000, 0], [8_000, 1], [32_000, 128], True),
    ("64 - 16 - 24 = 24 < 32 CPUs", [64_000, 256], [16_000, 0], [24_000, 1], [32_000, 128], False),
    (
        "memory too: 256 - 100 - 50 = 106 < 128 MiB",
        [64_000, 256],
        [0, 100],
        [1_000, 50],
        [32_000, 128],
        False,
    ),
]


@pytest.mark.parametrize(
    ("allocatable", "staying", "asks", "reserved", "kept"), [r[1:] for r in ROOM], ids=[r[0] for r in ROOM]
)
def test_a_pod_that_stays_leaves_the_reserved_pod_its_cpu_and_memory(
    allocatable: list[int], staying: list[int], asks: list[int], reserved: list[int], kept: bool
) -> None:
    arrays = (np.array(v, np.int64) for v in (allocatable, staying, asks, reserved))
    assert keeps_room(*arrays) is kept


# (id, rows, free GPUs, start times or None (hidden), chosen row)
CHOICE = [
    ("hidden: the most free GPUs", [3, 5, 7], [2, 6, 4], None, 5),
    ("hidden: ties to the first in the cluster's order", [3, 5, 7], [6, 6, 4], None, 3),
    ("lifetimes: the soonest start, whatever is free now", [3, 5, 7], [2, 6, 4], [100.0, 900.0, 50.0], 7),
    ("lifetimes: equal starts go to more free GPUs", [3, 5, 7], [2, 6, 4], [50.0, 50.0, 50.0], 5),
    ("lifetimes: the soonest even past the max wait (a node draining)", [3, 5], [2, 6], [9e4, 5e4], 5),
    ("no candidate: none", [], [], None, None),
]


@pytest.mark.parametrize(
    ("rows", "free", "start", "chosen"), [r[1:] for r in CHOICE], ids=[r[0] for r in CHOICE]
)
def test_which_node_is_reserved(
    rows: list[int], free: list[int], start: list[float] | None, chosen: int | None
) -> None:
    starts = None if start is None else np.array(start, np.float64)
    assert choose_node(np.array(rows, np.int64), np.array(free, np.int64), starts) == chosen


# (id, pending FIFO, GPU milli per pod, K, R, held, who may try)
WHO = [
    ("the multi-GPU pods in FIFO order", [4, 1, 2, 3], [0, 1000, 8000, 500, 4000], 4, 2, [], [4, 2]),
    ("K = 8: only the 8-GPU pod", [4, 1, 2, 3], [0, 1000, 8000, 500, 4000], 8, 2, [], [2]),
    ("a pod holding one does not try again", [4, 1, 2, 3], [0, 1000, 8000, 500, 4000], 4, 2, [2], [4]),
    ("every slot held: none", [4, 1, 2, 3], [0, 1000, 8000, 500, 4000], 4, 1, [2], []),
]


@pytest.mark.parametrize(
    ("pending", "milli", "k", "r", "held", "expected"), [r[1:] for r in WHO], ids=[r[0] for r in WHO]
)
def test_the_oldest_waiting_multi_gpu_pods_reserve_first(
    pending: list[int], milli: list[int], k: int, r: int, held: list[int], expected: list[int]
) -> None:
    config = ReservationConfig(min_gpus=k, max_reservations=r)
    assert to_reserve(pending, np.array(milli, np.int64), config, held) == expected


@pytest.mark.parametrize(("now", "expired"), [(3599.0, False), (3600.0, True), (4000.0, True)])
def test_a_reservation_expires_with_its_pods_max_wait(now: float, expired: bool) -> None:
    """Made at 100 for a pod that arrived at 0 with a max wait of 3600."""
    assert Reservation(pod=7, node=2, made_s=100.0, expires_s=3600.0, count=8).expired(now) is expired


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"min_gpus": 0}, "min_gpus"),
        ({"max_reservations": 0}, "max_reservations"),
        ({"backfill_quantile": 1.0}, "backfill_quantile"),
        ({"start_quantile": 0.0}, "start_quantile"),
    ],
)
def test_a_config_out_of_range_is_refused_naming_the_field(args: dict[str, float], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ReservationConfig(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("config", "tag"),
    [
        (ReservationConfig(), "reserve4"),
        (ReservationConfig(min_gpus=8, max_reservations=2, backfill_quantile=0.5), "reserve8,R=2,q=0.5"),
    ],
)
def test_the_label_names_what_differs_from_the_defaults(config: ReservationConfig, tag: str) -> None:
    assert config.tag() == tag
