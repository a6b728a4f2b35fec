"""A trace's timed pods and its node list, as the timeline replay reads them.

- Lifetimes: ``deletion_time - creation_time``, at least ``MIN_LIFETIME_S``.
- Censoring: the openb pod lists are snapshots, and a pod still running when the list
  was taken has the snapshot's time as its ``deletion_time`` (on ``default``, 34 pods
  end at 12,902,960 s, the latest deletion time, all in phase Running, 1,199 s after the
  last creation). A pod deleted at or after the trace's end (``trace_end_s``: by default
  the latest deletion time of the list) is *censored*: its lifetime is only known to be
  at least what was observed, so the replay never ends it (``replay_lifetime_s`` is
  infinite) and it runs to the replay's end. Where a lifetime must be a number (the
  GPU-hours of a pod that failed) the observed one is used, a lower bound.
  (The loader reports and skips a row without a ``deletion_time``; no openb list has
  one.)
- Offered load (``offered_load``): on the replay lifetimes, so a censored pod is alive to
  the last arrival at any compression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.errors import SchedulerInputError
from scheduler.objects.node import Node
from scheduler.sim.catalog import DEFAULT_NODE_LIST, node_list_path, pod_list_path
from scheduler.sim.node_sample import sample_nodes
from scheduler.sim.offered_load import (
    busy_from,
    compression_for_load,
    most_offered_gpu_milli,
    offered_gpu_milli,
)
from scheduler.sim.replay import gpu_capacity_milli
from scheduler.sim.trace import TimedPod, TraceIssues, check_pods_against_nodes, load_nodes, load_timed_pods

MIN_LIFETIME_S = 1.0
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def lifetime_s(pod: TimedPod) -> float:
    return max(pod.deletion_s - pod.creation_s, MIN_LIFETIME_S)


@dataclass(frozen=True)
class TimedWorkload:
    """A trace's pods (sorted by creation time, ties in file order) and the node list."""

    pods: list[TimedPod]
    nodes: list[Node]
    issues: list[str]
    trace_end_s: float = math.inf  # pods deleted at or after it are censored

    @property
    def capacity_milli(self) -> int:
        return gpu_capacity_milli(self.nodes)

    @property
    def creation_s(self) -> FloatArray:
        return np.array([p.creation_s for p in self.pods], np.float64)

    @property
    def censored(self) -> BoolArray:
        """Pods still running when the list was taken (deleted at or after its end)."""
        return np.array([p.deletion_s >= self.trace_end_s for p in self.pods], np.bool_)

    @property
    def lifetime_s(self) -> FloatArray:
        """Observed lifetimes (a censored pod's up to the trace's end: a lower bound)."""
        return np.array([lifetime_s(p) for p in self.pods], np.float64)

    @property
    def replay_lifetime_s(self) -> FloatArray:
        """What the replay runs: the observed lifetime, infinite for a censored pod."""
        return np.where(self.censored, np.inf, self.lifetime_s)

    @property
    def gpu_milli(self) -> FloatArray:
        return np.array([p.pod.gpu.total_milli for p in self.pods], np.float64)

    def cluster(self, fraction: float, seed: int) -> list[Node]:
        """The nodes a compressed replay with ``seed`` runs on: ``fraction`` of the list,
        at least one node of each shape (``sample_nodes``)."""
        return sample_nodes(self.nodes, fraction, seed)

    def nominal_capacity_milli(self, fraction: float) -> float:
        """The GPU capacity ``load`` is a multiple of: ``fraction`` of the node list's."""
        return min(fraction, 1.0) * self.capacity_milli

    def describe_capacity(self, fraction: float) -> str:
        gpus = self.capacity_milli // 1000
        if fraction >= 1.0:
            return f"the cluster's {gpus} GPUs"
        nominal = self.nominal_capacity_milli(fraction) / 1000
        return f"the {nominal:g} GPUs of {fraction:g} of the node list's {gpus}"

    def offered_on_trace_clock_milli(self) -> float:
        """The GPU the pods offer over the busy window on the trace's own clock (arrivals
        and lifetimes alike: ``offered(1)``; any common scale gives the same)."""
        return offered_gpu_milli(self.creation_s, self.replay_lifetime_s, self.gpu_milli, 1.0)

    def compression_for(self, load: float, fraction: float = 1.0) -> float:
        """The ``k`` whose offered GPU load is ``load`` x ``fraction`` of the node list's
        capacity; a load no compression reaches is an error that says how much the trace
        can offer."""
        creation, lifetime, gpu = self.creation_s, self.replay_lifetime_s, self.gpu_milli
        capacity = max(self.nominal_capacity_milli(fraction), 1.0)
        most = most_offered_gpu_milli(creation, lifetime, gpu) / capacity
        if load > most:
            raise SchedulerInputError(
                "offered load",
                "load",
                f"{load:g} is out of reach: at any compression this trace offers at most {most:.3f} x "
                f"{self.describe_capacity(fraction)} (every pod alive from its arrival, "
                "or the busy window's start, to the last arrival)",
            )
        return compression_for_load(creation, lifetime, gpu, load * capacity)

    def offered_load(self, compression: float, capacity_milli: float) -> float:
        """The offered GPU load with arrivals compressed ``compression`` x more than
        lifetimes (1: one clock), as a share of ``capacity_milli``; NaN when the busy
        window is a single instant (no span to average over)."""
        creation = self.creation_s
        if creation[-1] <= busy_from(creation):
            return math.nan
        offered = offered_gpu_milli(creation, self.replay_lifetime_s, self.gpu_milli, compression)
        return offered / max(capacity_milli, 1.0)


def load_timed_workload(
    trace: str, nodes: str = DEFAULT_NODE_LIST, trace_end_s: float | None = None
) -> TimedWorkload:
    """The trace's timed pods and the node list; a pod named twice keeps its first row
    (the others are reported). ``trace_end_s`` None: the latest deletion time."""
    issues = TraceIssues()
    cluster = load_nodes(node_list_path(nodes), issues)
    pods: list[TimedPod] = []
    first_row: dict[str, str] = {}
    for timed in load_timed_pods(pod_list_path(trace), issues):
        seen = first_row.setdefault(timed.pod.name, timed.pod.source)
        if seen != timed.pod.source:
            issues.add(f"{timed.pod.source}: name: pod {timed.pod.name} again (first at {seen}); skipped")
            continue
        pods.append(timed)
    check_pods_against_nodes([p.pod for p in pods], cluster, issues)
    pods.sort(key=lambda p: p.creation_s)  # stable: equal times keep file order
    if trace_end_s is None:
        trace_end_s = max((p.deletion_s for p in pods), default=math.inf)
    return TimedWorkload(pods, cluster, issues.messages, trace_end_s)
