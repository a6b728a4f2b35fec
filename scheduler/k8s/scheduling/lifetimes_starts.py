"""When a pending pod of ours is likely to start, said where its owner looks.

When a pod fails a scheduling attempt because it fits no node (not a gang's member:
a gang starts when all of it fits, which this does not forecast), the start forecast
(``scheduler.lifetimes.start_forecast``) runs over the cache's state with the pod's
profile's filters, the live lifetime model (``lifetimes.LiveLifetimes``) and the pods
ahead of it in the queue (higher priority, or the same and queued earlier; at most
``DEFAULT_MAX_AHEAD``). Its p50 and p90:

- end the pod's ``FailedScheduling`` message: kube's message first and intact, then
  ``; likely to start in 12m (p90 1h40m)`` (``message_suffix``; nothing when no node
  would fit it even once the pods on it leave: kube's reasons say why). The reporter
  posts an event when kube's part changes, or every 5 minutes, not each time the
  forecast moves;
- are the gauge ``rl_scheduler_pending_pod_predicted_start_seconds{namespace, pod,
  quantile="0.5"|"0.9"}``: seconds from the forecast to the start, as forecast at the
  pod's last failed attempt (``+Inf``: no node would fit it even with its pods gone).
  The series go when the pod binds or goes away; at most ``max_series`` pods have
  them (the rest are forecast and reported, not exported).

The forecast runs in the pod's own failed attempt, so at most once per attempt (once
per backoff), never for other pods' cycles; not again within ``min_interval_s`` (60 s)
of the pod's last one; and forecasts together take at most ``time_share`` (10%) of the
scheduler's time, ``burst_s`` (1 s) at once. An attempt that may not forecast reports
the pod's last forecast, its times less the seconds since, or none yet. The cost of
each is in ``rl_scheduler_start_forecast_duration_seconds``.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.framework.plugin import FilterPlugin
from scheduler.k8s.scheduling.queue import held_before_queue
from scheduler.lifetimes.start_forecast import DEFAULT_MAX_AHEAD, DEFAULT_SAMPLES, forecast_start
from scheduler.objects.pod import Pod
from scheduler.state.cluster_state import ClusterState

if TYPE_CHECKING:
    from scheduler.k8s.scheduling.lifetimes import LiveLifetimes
    from scheduler.k8s.serving.metrics import Metrics

log = logging.getLogger(__name__)

DEFAULT_MAX_SERIES = 1000
DEFAULT_MIN_INTERVAL_S = 60.0
# Forecasts may take this share of the scheduler's time, with this much at once: past
# it, an attempt reports the pod's last forecast (or none) instead of a new one.
DEFAULT_TIME_SHARE = 0.1
DEFAULT_BURST_S = 1.0
# Placing the pods ahead stops after this long (the rest are left out): a forecast takes
# this, plus one pod ahead's placement and the pod's own fit, at most.
DEFAULT_AHEAD_TIME_S = 0.1
QUANTILES = (("0.5", "p50_s"), ("0.9", "p90_s"))


@dataclass(frozen=True)
class Predicted:
    """A forecast's p50 and p90, seconds from ``at`` (``inf``: never)."""

    at: float
    p50_s: float
    p90_s: float

    def from_now(self, now: float) -> Predicted:
        """The same start times, seen from ``now``."""
        passed = max(now - self.at, 0.0)
        return Predicted(now, max(self.p50_s - passed, 0.0), max(self.p90_s - passed, 0.0))


def duration_text(seconds: float) -> str:
    """``45s``, ``12m``, ``1h40m``, ``3d4h``."""
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{round(s / 60)}m"
    if s < 86400:
        hours, minutes = divmod(round(s / 60), 60)
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    days, hours = divmod(round(s / 3600), 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


SUFFIX = "; likely to start in "


def message_suffix(predicted: Predicted) -> str:
    """What follows kube's FailedScheduling message: nothing when no start is in sight
    (no node would fit the pod even once the pods on it leave: kube's reasons say why)."""
    if not math.isfinite(predicted.p50_s):
        return ""
    p90 = duration_text(predicted.p90_s) if math.isfinite(predicted.p90_s) else "not in sight"
    return f"{SUFFIX}{duration_text(predicted.p50_s)} (p90 {p90})"


def kube_part(message: str) -> str:
    """A FailedScheduling message without the predicted start: kube-scheduler's words."""
    return message.split(SUFFIX, 1)[0]


def pods_ahead(pod: Pod, queued: Sequence[tuple[Pod, float]], limit: int = DEFAULT_MAX_AHEAD) -> list[Pod]:
    """The ``limit`` pods at the front of the queue that come before ``pod`` (higher
    priority, or the same and queued earlier), from ``(pod, first seen)`` pairs; the
    pod's own first-seen time is among them; pods held before the queue (gates, a claim
    not created yet) are not ahead."""
    key = pod.key
    mine = next((seen for p, seen in queued if p.key == key), math.inf)
    rank = (-pod.priority, mine)
    before = (
        (-p.priority, seen, p.key, p)
        for p, seen in queued
        if (-p.priority, seen) < rank and not held_before_queue(p) and p.key != key
    )
    # The front of a queue of thousands, without sorting all of it on every forecast.
    return [item[3] for item in heapq.nsmallest(limit, before, key=lambda item: item[:3])]


class StartPredictions:
    """Forecasts of pending pods' starts, their gauge series and message suffixes."""

    def __init__(
        self,
        lifetimes: LiveLifetimes,
        metrics: Metrics | None = None,
        *,
        samples: int = DEFAULT_SAMPLES,
        max_series: int = DEFAULT_MAX_SERIES,
        min_interval_s: float = DEFAULT_MIN_INTERVAL_S,
        time_share: float = DEFAULT_TIME_SHARE,
        burst_s: float = DEFAULT_BURST_S,
        ahead_time_s: float | None = DEFAULT_AHEAD_TIME_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lifetimes = lifetimes
        self.metrics = metrics
        self.samples = samples
        self.max_series = max_series
        self.min_interval_s = min_interval_s
        self.time_share = time_share
        self.burst_s = burst_s
        self.ahead_time_s = ahead_time_s
        self.clock = clock
        # Seconds of forecasting still allowed (a token bucket over the monotonic clock).
        self._budget_s = burst_s
        self._budget_at = time.monotonic()
        self.last: dict[str, Predicted] = {}
        self._series: set[str] = set()
        self._capped_said = False

    def predict(
        self,
        pod: Pod,
        state: ClusterState,
        filters: Sequence[FilterPlugin],
        ahead: Callable[[], Sequence[Pod]] = tuple,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Predicted | None:
        """The pod's forecast (None without a lifetime model). ``ahead`` gives the pods
        ahead of it in the queue; it is asked only when a forecast is made, and its time
        counts in the forecasts' share: an attempt that reports the last forecast does
        not read the queue (on a queue of 1,000 pods, reading it on every failed
        attempt took a quarter of the event loop's time)."""
        if self.lifetimes.model is None:
            return None
        now = self.clock()
        last = self.last.get(pod.key)
        if (last is not None and now - last.at < self.min_interval_s) or not self._affordable():
            if last is None:
                return None
            if pod.key not in self._series:  # capped out before: there may be room now
                self._publish(pod, last)
            return last.from_now(now)
        started = time.perf_counter()
        forecast = forecast_start(
            state,
            pod,
            filters,
            self.lifetimes.remaining_quantiles,
            ahead=ahead(),
            ahead_time_s=self.ahead_time_s,
            samples=self.samples,
            seed=zlib.crc32(pod.key.encode()),
            namespace_labels=namespace_labels,
        )
        spent = time.perf_counter() - started
        self._budget_s -= spent
        if self.metrics is not None:
            self.metrics.start_forecast_duration.observe(spent)
        predicted = Predicted(now, forecast.p50_s, forecast.p90_s)
        self.last[pod.key] = predicted
        self._publish(pod, predicted)
        return predicted

    def _affordable(self) -> bool:
        """Whether the time budget allows a forecast now."""
        at = time.monotonic()
        self._budget_s = min(self.burst_s, self._budget_s + (at - self._budget_at) * self.time_share)
        self._budget_at = at
        return self._budget_s > 0

    def _publish(self, pod: Pod, predicted: Predicted) -> None:
        if self.metrics is None:
            return
        if pod.key not in self._series and len(self._series) >= self.max_series:
            if not self._capped_said:
                log.info(
                    "%d pending pods have a predicted-start series: no more are added until some start",
                    self.max_series,
                )
                self._capped_said = True
            return
        self._series.add(pod.key)
        for quantile, name in QUANTILES:
            gauge = self.metrics.pending_start.labels(pod.namespace, pod.name, quantile)
            gauge.set(getattr(predicted, name))

    def forget(self, key: str) -> None:
        """The pod bound or went away: its forecast and series go."""
        self.last.pop(key, None)
        if key in self._series and self.metrics is not None:
            self._series.discard(key)
            namespace, _, name = key.partition("/")
            for quantile, _ in QUANTILES:
                with contextlib.suppress(KeyError):
                    self.metrics.pending_start.remove(namespace, name, quantile)
        if len(self._series) < self.max_series:
            self._capped_said = False
