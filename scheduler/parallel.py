"""Where tasks run: in this process, in local worker processes (the default), or on a
Ray cluster (``--ray-address``). Results come back in task order either way.

A task is a picklable value and the function a module-level one: it travels to the
workers by name, so a Ray cluster's nodes need this package installed, and the files a
task names (traces, checkpoints) readable at the same path (a local cluster, or nodes
that share a filesystem). Relative paths resolve against the caller's folder on Ray too.

A function that reports progress takes ``(task, report)`` and calls ``report(count)``
as it goes (pods replayed): from local processes the counts arrive as they are
reported, from Ray when each task finishes. A pool's initializer (ES loads its
checkpoint) runs once in each process that runs the pool's tasks, and again where a
process ran another pool's tasks in between (in this process, or a Ray worker that
serves two pools). A task that raises re-raises its exception here with a note naming
the task.

Ray is imported only when an address is given.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scheduler.errors import SchedulerInputError

Task = TypeVar("Task")
Result = TypeVar("Result")
Report = Callable[[int], None]
Initializer = Callable[..., object]

RAY_OPTION = "--ray-address"


@dataclass(frozen=True)
class Workers:
    """``processes`` local processes (1: this process), or the Ray cluster at
    ``ray_address`` (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``; its CPUs then set
    how many tasks run at once)."""

    processes: int = 1
    ray_address: str | None = None


def _ignore(count: int) -> None:
    del count


class _Plain(Generic[Task, Result]):
    """A function of the task alone, called as a reporting one (picklable)."""

    def __init__(self, function: Callable[[Task], Result]) -> None:
        self.function = function

    def __call__(self, task: Task, report: Report) -> Result:
        del report
        return self.function(task)


# How much of a task's repr a failure's note shows (an ES task holds a parameter vector).
_NOTE_CHARS = 300


def _name_task(error: BaseException, index: int, task: object) -> None:
    shown = repr(task)
    if len(shown) > _NOTE_CHARS:
        shown = shown[:_NOTE_CHARS] + "..."
    error.add_note(f"in task {index}: {shown}")


@dataclass(frozen=True)
class _Setup:
    """A pool's initializer, with a token of its own so that two pools with the same
    initializer each run it."""

    initializer: Initializer | None
    initargs: tuple[Any, ...]
    token: str

    def ensure(self) -> None:
        """Run the initializer unless this process's last one was this pool's."""
        if self.initializer is not None and _LAST_SETUP.get("token") != self.token:
            self.initializer(*self.initargs)
            _LAST_SETUP["token"] = self.token


# The token of the pool whose initializer this process ran last.
_LAST_SETUP: dict[str, str] = {}


def _setup(initializer: Initializer | None, initargs: tuple[Any, ...]) -> _Setup:
    return _Setup(initializer, initargs, uuid.uuid4().hex)


class TaskPool(ABC):
    """Maps functions over tasks; ``close`` ends its workers."""

    def map(self, function: Callable[[Task], Result], tasks: Sequence[Task]) -> list[Result]:
        return self.map_reporting(_Plain(function), tasks)

    @abstractmethod
    def map_reporting(
        self,
        function: Callable[[Task, Report], Result],
        tasks: Sequence[Task],
        on_progress: Report | None = None,
    ) -> list[Result]: ...

    def close(self) -> None:
        return None


class InProcess(TaskPool):
    """Every task here, one after the other (``processes`` 1)."""

    def __init__(self, initializer: Initializer | None, initargs: tuple[Any, ...]) -> None:
        self.setup = _setup(initializer, initargs)
        self.setup.ensure()

    def map_reporting(
        self,
        function: Callable[[Task, Report], Result],
        tasks: Sequence[Task],
        on_progress: Report | None = None,
    ) -> list[Result]:
        results: list[Result] = []
        for index, task in enumerate(tasks):
            try:
                self.setup.ensure()
                results.append(function(task, on_progress or _ignore))
            except Exception as error:
                _name_task(error, index, task)
                raise
        return results


def _in_process(function: Callable[[Task, Report], Result], task: Task, queue: Any) -> Result:
    return function(task, _ignore if queue is None else queue.put)


class LocalProcesses(TaskPool):
    """A pool of spawned processes, kept across ``map`` calls (ES maps every generation)."""

    def __init__(self, processes: int, initializer: Initializer | None, initargs: tuple[Any, ...]) -> None:
        # Spawn: no fork of a process that may hold torch threads.
        self.context = multiprocessing.get_context("spawn")
        self.pool = ProcessPoolExecutor(
            processes, mp_context=self.context, initializer=initializer, initargs=initargs
        )
        self.manager: Any = None

    def _queue(self) -> Any:
        if self.manager is None:
            self.manager = self.context.Manager()
        return self.manager.Queue()

    def map_reporting(
        self,
        function: Callable[[Task, Report], Result],
        tasks: Sequence[Task],
        on_progress: Report | None = None,
    ) -> list[Result]:
        queue = self._queue() if on_progress is not None else None
        futures: dict[Future[Result], int] = {
            self.pool.submit(_in_process, function, task, queue): i for i, task in enumerate(tasks)
        }
        results: dict[int, Result] = {}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            while queue is not None and on_progress is not None and not queue.empty():
                on_progress(queue.get())
            for future in finished:
                index = futures[future]
                try:
                    results[index] = future.result()
                except Exception as error:
                    for other in pending:
                        other.cancel()
                    _name_task(error, index, tasks[index])
                    raise
        return [results[i] for i in range(len(tasks))]

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)
        if self.manager is not None:
            self.manager.shutdown()


def _in_ray_worker(
    function: Callable[[Task, Report], Result], task: Task, setup: _Setup, folder: str
) -> tuple[Result, int]:
    if os.path.isdir(folder):  # relative paths mean what they mean to the caller
        os.chdir(folder)
    setup.ensure()
    counts: list[int] = []
    result = function(task, counts.append)
    return result, sum(counts)


class RayCluster(TaskPool):
    """One Ray task per task on the cluster at ``address`` (connected here unless this
    process is connected already, e.g. inside a Ray task)."""

    def __init__(self, address: str, initializer: Initializer | None, initargs: tuple[Any, ...]) -> None:
        import ray  # noqa: PLC0415 - the ray extra, only when an address is given

        self.ray: Any = ray
        self.connected_here = not ray.is_initialized()
        if self.connected_here:
            try:
                ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
            except ConnectionError as error:
                problem = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise SchedulerInputError(RAY_OPTION, address, problem) from None
        self.remote: Any = ray.remote(_in_ray_worker)
        self.setup = _setup(initializer, initargs)

    def map_reporting(
        self,
        function: Callable[[Task, Report], Result],
        tasks: Sequence[Task],
        on_progress: Report | None = None,
    ) -> list[Result]:
        ray = self.ray
        folder = os.getcwd()
        refs = {self.remote.remote(function, task, self.setup, folder): i for i, task in enumerate(tasks)}
        results: dict[int, Result] = {}
        pending = list(refs)
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                index = refs[ref]
                try:
                    result, reported = ray.get(ref)
                except ray.exceptions.RayTaskError as error:
                    for other in pending:
                        ray.cancel(other)
                    cause = error.cause if isinstance(error.cause, Exception) else error
                    _name_task(cause, index, tasks[index])
                    raise cause from error
                if on_progress is not None and reported:
                    on_progress(reported)
                results[index] = result
        return [results[i] for i in range(len(tasks))]

    def close(self) -> None:
        if self.connected_here:
            self.ray.shutdown()


@contextmanager
def task_pool(
    workers: Workers, initializer: Initializer | None = None, initargs: tuple[Any, ...] = ()
) -> Iterator[TaskPool]:
    """The pool ``workers`` names, closed on the way out."""
    pool: TaskPool
    if workers.ray_address is not None:
        pool = RayCluster(workers.ray_address, initializer, initargs)
    elif workers.processes > 1:
        pool = LocalProcesses(workers.processes, initializer, initargs)
    else:
        pool = InProcess(initializer, initargs)
    try:
        yield pool
    finally:
        pool.close()
