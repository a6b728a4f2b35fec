"""Run many replays (traces or synthetic workloads, x policies x seeds) in parallel
processes or on a Ray cluster (``scheduler.parallel``), reporting progress in pods."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from scheduler.parallel import Report, Workers, task_pool
from scheduler.sim.curves import Curves, curves
from scheduler.sim.replay import ReplaySpec, replay
from scheduler.sim.synthetic import SyntheticResult, SyntheticSpec, run_synthetic

# Progress is reported every this many pods, so the queue stays quiet.
_PROGRESS_EVERY = 250

Spec = TypeVar("Spec")
Result = TypeVar("Result")
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RunResult:
    """A trace replay, reduced to its curves."""

    spec: ReplaySpec
    curves: Curves
    pods: int
    pods_failed: int
    seconds: float
    issues: tuple[str, ...]


def run_trace(spec: ReplaySpec, progress: Progress | None = None) -> RunResult:
    log = replay(spec, progress)
    return RunResult(
        log.spec, curves(log), len(log.scheduled), log.pods_failed, log.seconds, tuple(log.issues)
    )


def run_synthetic_spec(spec: SyntheticSpec, progress: Progress | None = None) -> SyntheticResult:
    return run_synthetic(spec, progress)


class _Progress:
    """Turns a replay's ``(done, total)`` callbacks into batched pod counts."""

    def __init__(self, emit: Callable[[int], None] | None) -> None:
        self.emit = emit
        self.reported = 0

    def __call__(self, done: int, total: int) -> None:
        if self.emit is not None and (done - self.reported >= _PROGRESS_EVERY or done == total):
            self.emit(done - self.reported)
            self.reported = done


def _reporting(runner: Callable[[Spec, Progress], Result], spec: Spec, report: Report) -> Result:
    return runner(spec, _Progress(report))


def expand(
    traces: Iterable[str], policies: Iterable[str], seeds: Iterable[int], **options: Any
) -> list[ReplaySpec]:
    return [ReplaySpec(t, p, s, **options) for t in traces for p in policies for s in seeds]


def run_sweep(
    specs: Sequence[Spec],
    runner: Callable[[Spec, Progress], Result],
    workers: int,
    on_pods: Callable[[int], None] | None = None,
    ray_address: str | None = None,
) -> list[Result]:
    """``runner`` over ``specs`` in up to ``workers`` processes, or on the Ray cluster at
    ``ray_address``; results in spec order. ``runner`` must be a module-level function
    (it is sent to the workers)."""
    where = Workers(workers if len(specs) > 1 else 1, ray_address)
    with task_pool(where) as pool:
        return pool.map_reporting(partial(_reporting, runner), specs, on_pods)
