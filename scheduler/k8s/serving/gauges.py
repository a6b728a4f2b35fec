"""Gauges refreshed every few seconds: queue sizes, unschedulable pods by plugin,
cluster allocation and GPU fragmentation, and the experience log's counters."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from scheduler.state.cluster_state import CPU_COLUMN, MEMORY_COLUMN
from scheduler.state.fragmentation import FragmentationModel

if TYPE_CHECKING:
    from scheduler.k8s.scheduling.runtime import SchedulerRuntime

# How often gauges (queue sizes, cluster allocation) are refreshed.
GAUGE_PERIOD_S = 5.0


class ExperienceCounters:
    """The experience log's running totals, published as counter increments."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def publish(self, runtime: SchedulerRuntime) -> None:
        experience, metrics = runtime.experience, runtime.metrics
        if experience is None:
            return
        counts = {"written": experience.written, **experience.dropped}
        for name, value in counts.items():
            delta = value - self._seen.get(name, 0)
            if delta > 0:
                if name == "written":
                    metrics.experience_records.inc(delta)
                else:
                    metrics.experience_dropped.labels(name).inc(delta)
            self._seen[name] = value


async def refresh_gauges(runtime: SchedulerRuntime) -> None:
    """Publish the gauges every ``GAUGE_PERIOD_S``, the first time once the scheduler
    has first run out of work (or after a period): the fragmentation of every node
    (0.1 s at 5,000 nodes) ran between the first decision and its bind. Never returns."""
    metrics = runtime.metrics
    counters = ExperienceCounters()
    model = None
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(runtime.first_idle.wait(), GAUGE_PERIOD_S)
    while True:
        counters.publish(runtime)
        for queue_name, size in runtime.queue.sizes().items():
            metrics.pending_pods.labels(queue_name.value).set(size)
        metrics.unschedulable_pods.clear()
        for (plugin, profile), count in runtime.queue.unschedulable_by_plugin().items():
            metrics.unschedulable_pods.labels(plugin, profile).set(count)
        state = runtime.cache.state
        if len(state):
            for name, column in (("cpu", CPU_COLUMN), ("memory", MEMORY_COLUMN)):
                allocatable = state.allocatable[:, column].sum()
                if allocatable:
                    requested = state.requested[:, column].sum()
                    metrics.cluster_allocation.labels(name).set(requested / allocatable)
            gpu_total = int(state.gpu_count.sum()) * 1000
            if gpu_total:
                allocated = state.allocated_gpu_milli()
                metrics.cluster_allocation.labels("gpu").set(allocated / gpu_total)
                if model is None or model.typical is not runtime.policy.workload.current:
                    model = FragmentationModel(runtime.policy.workload.current)
                idle = gpu_total - allocated
                frag = model.frag_amount(
                    state.allocatable[:, CPU_COLUMN] - state.requested[:, CPU_COLUMN],
                    state.gpu_free_milli,
                    state.gpu_model_id,
                    state.gpu_models,
                ).sum()
                metrics.gpu_fragmentation.set(frag / idle if idle else 0.0)
        await asyncio.sleep(GAUGE_PERIOD_S)
