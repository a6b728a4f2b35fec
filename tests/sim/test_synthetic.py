"""The synthetic CPU/memory workload: the same pods for every policy of a seed, and a
bound on pods placed before the first failure that no policy exceeds."""

import numpy as np
import pytest

from scheduler.sim.report import summarise_synthetic, synthetic_table
from scheduler.sim.synthetic import (
    POD_SHAPES,
    SyntheticResult,
    SyntheticSpec,
    SyntheticWorkload,
    demand_bound,
    run_synthetic,
    synthetic_nodes,
)

SMALL, LARGE = 0, 8  # POD_SHAPES[0]: 250m / 512Mi; POD_SHAPES[8]: 8000m / 8192Mi
GI = 2**30


def workload(arrivals: list[float], shapes: list[int], lifetimes: list[float]) -> SyntheticWorkload:
    return SyntheticWorkload(
        arrivals=np.array(arrivals, np.float64),
        shapes=np.array(shapes, np.int64),
        lifetimes=np.array(lifetimes, np.float64),
    )


@pytest.mark.parametrize(
    ("case", "arrivals", "shapes", "lifetimes", "cpu_milli", "memory", "bound"),
    [
        ("everything fits", [0, 1, 2], [SMALL] * 3, [100] * 3, 1000, 4 * GI, 3),
        ("the fifth small pod exceeds 1 core", [0, 1, 2, 3, 4], [SMALL] * 5, [100] * 5, 1000, 4 * GI, 4),
        ("departures make room", [0, 1, 2, 3, 4], [SMALL] * 5, [1.5] * 5, 1000, 4 * GI, 5),
        ("a departure at the arrival's instant counts", [0, 1], [LARGE] * 2, [1, 1], 8000, 8 * GI, 2),
        ("memory binds first", [0, 1, 2], [SMALL] * 3, [100] * 3, 10_000, GI, 2),
        ("the first pod alone is too large", [0], [LARGE], [100], 4000, 64 * GI, 0),
    ],
)
def test_demand_bound(
    case: str,
    arrivals: list[float],
    shapes: list[int],
    lifetimes: list[float],
    cpu_milli: int,
    memory: int,
    bound: int,
) -> None:
    assert POD_SHAPES[SMALL][:2] == (250, 512)
    assert POD_SHAPES[LARGE][:2] == (8000, 8192)
    assert demand_bound(workload(arrivals, shapes, lifetimes), cpu_milli, memory) == bound, case


@pytest.mark.parametrize("seed", [1, 2])
def test_every_policy_sees_the_same_workload_and_stays_within_the_bound(seed: int) -> None:
    # default and most-allocated break ties at random; the workload must not depend on it.
    results = [
        run_synthetic(SyntheticSpec(policy, seed, nodes=6, pods=400, target_load=1.3))
        for policy in ("default", "most-allocated", "best-fit")
    ]
    bounds = {r.demand_bound for r in results}
    assert len(bounds) == 1
    bound = bounds.pop()
    assert bound < 400  # load 1.3 overflows this small cluster within 400 arrivals
    for result in results:
        assert result.placed_before_first_failure <= bound, result.spec.policy
        assert result.placed + result.failed == 400


def test_a_seed_replays_identically() -> None:
    first, second = (run_synthetic(SyntheticSpec("most-allocated", 7, nodes=6, pods=300)) for _ in range(2))
    assert (first.placed, first.failed, first.placed_before_first_failure) == (
        second.placed,
        second.failed,
        second.placed_before_first_failure,
    )


def test_a_cluster_without_nodes_is_refused() -> None:
    with pytest.raises(ValueError, match="nodes must be positive"):
        synthetic_nodes(0, np.random.default_rng(0))


def result(policy: str, seed: int, placed_first: int, bound: int) -> SyntheticResult:
    spec = SyntheticSpec(policy, seed)
    return SyntheticResult(
        spec,
        placed=placed_first + 10,
        failed=5,
        placed_before_first_failure=placed_first,
        demand_bound=bound,
        cpu_allocated_at_failures=95.0,
        memory_allocated_at_failures=50.0,
        seconds=1.0,
    )


def test_the_summary_keeps_each_seed_for_paired_comparisons() -> None:
    summary = summarise_synthetic(
        [
            result("most-allocated", 43, 90, 100),
            result("most-allocated", 42, 40, 50),
            result("gnn", 42, 50, 50),
        ]
    )
    packed = summary["policies"]["most-allocated"]
    assert packed["placed_before_first_failure_by_seed"] == {"42": 40, "43": 90}
    assert packed["placed_before_first_failure"] == 65.0
    assert packed["demand_bound"] == 75.0
    assert packed["share_of_bound"] == 85.0  # median of 80% and 90%
    assert summary["policies"]["gnn"]["share_of_bound"] == 100.0
    table = synthetic_table(summary)
    assert table.splitlines()[2].split()[:4] == ["most-allocated", "65", "75", "85.00"]
