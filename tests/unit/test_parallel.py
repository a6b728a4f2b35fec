"""``scheduler.parallel``: the same results, in task order, whether tasks run in this
process, in local processes or on a local Ray cluster; progress adds up to what the
tasks reported; an initializer's state reaches the tasks, per pool; a task that raises
surfaces with its own exception, naming the task."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from scheduler.parallel import Report, Workers, task_pool

# The in-process and local rows run everywhere; the Ray rows start a cluster (slow).
BACKENDS = [
    pytest.param(lambda _: Workers(1), id="this process"),
    pytest.param(lambda _: Workers(2), id="2 local processes"),
    pytest.param(lambda address: Workers(ray_address=address), id="ray", marks=pytest.mark.slow),
]
TASKS = [5, 0, 3, 1, 4, 2]

_STATE: dict[str, int] = {}


def square_late_first(n: int) -> int:
    # Early tasks take longest, so with two workers they finish after later ones.
    time.sleep(0.02 * n)
    return n * n


def report_pods(n: int, report: Report) -> str:
    for _ in range(n):
        report(10)
    return f"task {n}"


def remember(offset: int) -> None:
    _STATE["offset"] = offset


def add_offset(n: int) -> int:
    return n + _STATE["offset"]


def fail_on_three(n: int) -> int:
    if n == 3:
        raise ValueError(f"cannot take {n}")
    return n


def _where(request: pytest.FixtureRequest, workers: Callable[[str | None], Workers]) -> Workers:
    ray = "ray" in request.node.callspec.id
    return workers(request.getfixturevalue("ray_cluster") if ray else None)


@pytest.mark.parametrize("workers", BACKENDS)
def test_results_come_back_in_task_order(
    request: pytest.FixtureRequest, workers: Callable[..., Workers]
) -> None:
    with task_pool(_where(request, workers)) as pool:
        assert pool.map(square_late_first, TASKS) == [25, 0, 9, 1, 16, 4]
        assert pool.map(square_late_first, []) == []


@pytest.mark.parametrize("workers", BACKENDS)
def test_progress_adds_up_to_what_the_tasks_reported(
    request: pytest.FixtureRequest, workers: Callable[..., Workers]
) -> None:
    counts: list[int] = []
    with task_pool(_where(request, workers)) as pool:
        results = pool.map_reporting(report_pods, TASKS, counts.append)
    assert results == [f"task {n}" for n in TASKS]
    assert sum(counts) == 10 * sum(TASKS)  # 150 pods


@pytest.mark.parametrize("workers", BACKENDS)
def test_each_pool_runs_its_own_initializer_even_interleaved(
    request: pytest.FixtureRequest, workers: Callable[..., Workers]
) -> None:
    """On Ray both pools share one connection and may share worker processes: a
    worker handed the other pool's task runs that pool's initializer first."""
    where = _where(request, workers)
    with task_pool(where, remember, (100,)) as hundreds, task_pool(where, remember, (1000,)) as thousands:
        assert hundreds.map(add_offset, [1, 2]) == [101, 102]
        assert thousands.map(add_offset, [1, 2]) == [1001, 1002]
        assert hundreds.map(add_offset, [3, 4]) == [103, 104]


@pytest.mark.parametrize("workers", BACKENDS)
def test_a_task_that_raises_surfaces_with_its_exception_naming_the_task(
    request: pytest.FixtureRequest, workers: Callable[..., Workers]
) -> None:
    with (
        task_pool(_where(request, workers)) as pool,
        pytest.raises(ValueError, match="cannot take 3") as caught,
    ):
        pool.map(fail_on_three, [1, 2, 3, 4])
    assert "in task 2: 3" in caught.value.__notes__
