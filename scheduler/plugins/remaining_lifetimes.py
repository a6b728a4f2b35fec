"""What a score plugin may know of how long pods will still run: the pod being placed,
and each GPU's residents (DESIGN.md, "Time: what a heuristic cannot know").

A plugin gets a ``RemainingLifetimes`` through ``ProfileContext.lifetimes`` (kube's
framework hands plugins listers the same way) and asks it, in one scheduling cycle:

- ``pod_remaining_s(pod)``: how long the pod about to be placed will run (its age is 0);
- ``gpu_free_in_s(state, nodes)``: per node and GPU slot, seconds until no resident
  holds that GPU: the largest remaining lifetime over the pods holding it, 0 for a GPU
  that is free now and for slots past the node's GPU count. ``node_free_in_s`` is the
  max over a node's GPUs: when the node is next whole free if nothing else arrives.

Either answer is None when the source knows nothing; a plugin then scores exactly as
it would without it. Three sources:

- ``HiddenLifetimes``: no information (the replay's default; the live source is
  ``scheduler.k8s.scheduling.lifetimes``, which answers None when no model loads);
- ``OracleLifetimes``: the trace's true lifetimes less each resident's age (the
  replay's ceiling on what lifetime-awareness can give; infinite for a pod that never
  ends in the replay);
- ``ModelLifetimes``: a predictor mapping (pods, their ages) to quantiles of their
  remaining lifetime, re-asked at every cycle as residents age; one quantile column is
  the estimate. The predictor makes the pods' features itself, so a model reads a pod
  as it was fitted to (``ModelLifetimes.from_forecast`` takes
  ``scheduler.lifetimes.forecast.PodLifetimeForecast``, whose features are
  ``scheduler.lifetimes.features``).

Ages come from a ``ResidentClock``: the time now and when each placed pod started, as
the caller says (the replay on its own clock). Only GPU-holding residents count: a
CPU-only pod never keeps a GPU node from being whole free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from scheduler.objects.pod import Pod
from scheduler.resources.gpu import MAX_GPUS_PER_NODE
from scheduler.state.cluster_state import ClusterState, IntArray

FloatArray = npt.NDArray[np.float64]
# (pods, their ages in seconds [n]) -> remaining-lifetime quantiles in seconds [n, q],
# one column per quantile level, ascending.
QuantilePredictor = Callable[[Sequence[Pod], FloatArray], FloatArray]


class LifetimeForecast(Protocol):
    """``scheduler.lifetimes.forecast.PodLifetimeForecast``'s question."""

    def remaining_quantiles(
        self, pods: Sequence[Pod], ages_s: Sequence[float] | FloatArray, quantiles: tuple[float, ...]
    ) -> FloatArray: ...


class RemainingLifetimes(Protocol):
    def pod_remaining_s(self, pod: Pod) -> float | None:
        """Seconds ``pod``, about to be placed, will run; None: unknown."""
        ...

    def gpu_free_in_s(self, state: ClusterState, nodes: IntArray) -> FloatArray | None:
        """``[len(nodes), MAX_GPUS_PER_NODE]`` seconds until each GPU has no resident
        (0: free now); None: unknown."""
        ...


def node_free_in_s(gpu_free_in: FloatArray) -> FloatArray:
    """Per node, seconds until every GPU is free (the max over its GPUs)."""
    free: FloatArray = gpu_free_in.max(axis=1) if gpu_free_in.size else np.zeros(gpu_free_in.shape[0])
    return free


class ResidentClock:
    """The time now and when each placed pod started, in seconds of one clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.started: dict[str, float] = {}

    def advance(self, now: float) -> None:
        self.now = now

    def start(self, pod_key: str) -> None:
        """``pod_key`` was placed now."""
        self.started[pod_key] = self.now

    def end(self, pod_key: str) -> None:
        self.started.pop(pod_key, None)

    def ages_s(self, pod_keys: Sequence[str]) -> FloatArray:
        """How long each pod has run (0 for one not started)."""
        return np.array([self.now - self.started.get(k, self.now) for k in pod_keys], np.float64)


@dataclass(frozen=True)
class GpuResidents:
    """The pods holding GPUs of some nodes, one entry per (pod, GPU held)."""

    pods: list[Pod]  # each resident once
    entry_pod: IntArray  # per entry, its pod in ``pods``
    entry_node: IntArray  # per entry, the node's position in the nodes asked about
    entry_gpu: IntArray  # per entry, the GPU index on that node


def gpu_residents(state: ClusterState, nodes: IntArray) -> GpuResidents:
    pods: list[Pod] = []
    entry_pod: list[int] = []
    entry_node: list[int] = []
    entry_gpu: list[int] = []
    for position, row in enumerate(nodes.tolist()):
        for key in state.pods_on_node[row]:
            placement = state.placements[key]
            gpus = [use.index for use in placement.gpu_use] or list(placement.gpu_indices)
            if not gpus:
                continue
            for gpu in gpus:
                entry_pod.append(len(pods))
                entry_node.append(position)
                entry_gpu.append(gpu)
            pods.append(placement.pod)
    return GpuResidents(
        pods, np.array(entry_pod, np.int64), np.array(entry_node, np.int64), np.array(entry_gpu, np.int64)
    )


def latest_per_gpu(residents: GpuResidents, remaining_s: FloatArray, batch: int) -> FloatArray:
    """``[batch, MAX_GPUS_PER_NODE]``: per GPU the largest of its residents' remaining
    lifetimes (``remaining_s``, one per resident pod), 0 where none."""
    free_in = np.zeros((batch, MAX_GPUS_PER_NODE), np.float64)
    if residents.entry_pod.size:
        np.maximum.at(
            free_in,
            (residents.entry_node, residents.entry_gpu),
            np.maximum(remaining_s[residents.entry_pod], 0.0),
        )
    return free_in


class HiddenLifetimes:
    """Knows nothing: plugins score as if lifetimes did not exist."""

    def pod_remaining_s(self, pod: Pod) -> float | None:  # noqa: ARG002
        return None

    def gpu_free_in_s(self, state: ClusterState, nodes: IntArray) -> FloatArray | None:  # noqa: ARG002
        return None


class OracleLifetimes:
    """The true lifetimes (by pod key, in the clock's seconds; ``inf``: never ends) less
    each pod's age. A pod it has no lifetime for is unknown: an error, since the oracle
    is only built where every pod's lifetime is known."""

    def __init__(self, lifetimes_s: Mapping[str, float], clock: ResidentClock) -> None:
        self.lifetimes_s = lifetimes_s
        self.clock = clock

    def remaining_s(self, pods: Sequence[Pod]) -> FloatArray:
        keys = [p.key for p in pods]
        lifetimes = np.array([self.lifetimes_s[k] for k in keys], np.float64)
        left: FloatArray = np.maximum(lifetimes - self.clock.ages_s(keys), 0.0)
        return left

    def pod_remaining_s(self, pod: Pod) -> float | None:
        return float(self.remaining_s([pod])[0])

    def gpu_free_in_s(self, state: ClusterState, nodes: IntArray) -> FloatArray | None:
        residents = gpu_residents(state, nodes)
        return latest_per_gpu(residents, self.remaining_s(residents.pods), nodes.size)


class ModelLifetimes:
    """A lifetime model's estimate: column ``quantile`` of ``predict``'s quantiles of the
    remaining lifetime of each pod, given the pod and its age."""

    def __init__(self, predict: QuantilePredictor, clock: ResidentClock, quantile: int) -> None:
        self.predict = predict
        self.clock = clock
        self.quantile = quantile

    @classmethod
    def from_forecast(
        cls, forecast: LifetimeForecast, clock: ResidentClock, level: float = 0.5
    ) -> ModelLifetimes:
        """The ``level`` quantile (the median by default) of a lifetime forecast."""

        def predict(pods: Sequence[Pod], ages_s: FloatArray) -> FloatArray:
            return forecast.remaining_quantiles(pods, ages_s, (level,))

        return cls(predict, clock, 0)

    def remaining_s(self, pods: Sequence[Pod]) -> FloatArray:
        if not pods:
            return np.zeros(0, np.float64)
        ages = self.clock.ages_s([p.key for p in pods])
        quantiles = np.asarray(self.predict(pods, ages), np.float64)
        if (
            quantiles.ndim != 2
            or quantiles.shape[0] != len(pods)
            or not -quantiles.shape[1] <= self.quantile < quantiles.shape[1]
        ):
            raise ValueError(
                f"lifetime model: expected quantiles of shape ({len(pods)}, > {self.quantile}), "
                f"got {quantiles.shape}"
            )
        column: FloatArray = quantiles[:, self.quantile]
        return column

    def pod_remaining_s(self, pod: Pod) -> float | None:
        return float(self.remaining_s([pod])[0])

    def gpu_free_in_s(self, state: ClusterState, nodes: IntArray) -> FloatArray | None:
        residents = gpu_residents(state, nodes)
        return latest_per_gpu(residents, self.remaining_s(residents.pods), nodes.size)
