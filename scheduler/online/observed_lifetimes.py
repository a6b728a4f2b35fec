"""The lifetimes of the cluster's own pods, read from the experience log.

A pod of ours starts when the scheduler binds it (its ``decision`` record: the time,
and the requests the lifetime features are made from) and ends when it leaves its node
(its ``departure`` record). A pod that has not left is censored at the observation
time: it is known to have run that long and no more. After each listing of the API the
scheduler logs our pods on nodes (``residents``); a pod seen bound that is not among
them left while no scheduler watched (a restart), and is censored at the last listing
that had it (else at its bind), so a missed departure never makes a pod look immortal.
Pods are kept in the order they started, at most ``max_pods`` of them; past that the
earliest started go, ended or not. Which pods are kept then depends on when they
started only, never on how long they ran, so the sample is not biased toward short or
long pods (keeping the last pods to *end* would favour short ones).

What the log cannot say is skipped and counted by reason: a record without a readable
time, pod or requests (``bad_record``); a departure of a pod the log never saw start
(``unknown_departure``: another scheduler's pod, or one bound before the oldest
segment the log still holds: leaving those out selects by start time again); a
departure before its own start (``clock``). Pods left unseen are counted (``lost``).
A pod bound again (a failed bind retried)
starts at its last bind.

Older logs lack the ``qos`` field: such a pod has no QoS class, as a live pod without
Koordinator's label.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.errors import SchedulerInputError
from scheduler.lifetimes.features import FEATURE_COUNT, pod_features
from scheduler.lifetimes.model import FloatArray
from scheduler.lifetimes.trace_lifetimes import PodLifetimes
from scheduler.online.twin import Shape

DEFAULT_MAX_PODS = 20_000


@dataclass
class _Seen:
    started: float
    features: FloatArray
    ended: float | None = None
    confirmed: float = 0.0  # the last listing that had it running
    lost: bool = False  # left unseen: censored at ``confirmed``


def _time(record: Mapping[str, Any]) -> float:
    t = record.get("t")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ValueError("no finite time")
    return float(t)


def record_features(record: Mapping[str, Any]) -> FloatArray:
    """The lifetime features of the pod a decision record describes."""
    pod = Shape.from_record(record).pod("experience")
    qos = record.get("qos", "")
    return pod_features(pod, qos if isinstance(qos, str) else "")


class ObservedLifetimes:
    """Pods' starts and ends as the experience log tells them, bounded."""

    def __init__(self, max_pods: int = DEFAULT_MAX_PODS) -> None:
        if max_pods < 1:
            raise ValueError("max_pods must be at least 1")
        self.max_pods = max_pods
        self._pods: OrderedDict[str, _Seen] = OrderedDict()
        self.skipped: Counter[str] = Counter()
        self.evicted = 0
        self.lost = 0
        self.newest_t = 0.0

    def __len__(self) -> int:
        return len(self._pods)

    @property
    def ended(self) -> int:
        return sum(1 for seen in self._pods.values() if seen.ended is not None)

    def observe(self, records: Iterable[Mapping[str, Any]]) -> None:
        for record in records:
            kind = record.get("kind")
            if kind == "decision":
                self._started(record)
            elif kind == "departure":
                self._departed(record)
            elif kind == "residents":
                self._listed(record)

    def _started(self, record: Mapping[str, Any]) -> None:
        try:
            t = _time(record)
            key = record["pod"]
            if not isinstance(key, str) or not record.get("node"):
                raise ValueError("no pod or node")
            features = record_features(record)
        except (KeyError, TypeError, ValueError, SchedulerInputError):
            self.skipped["bad_record"] += 1
            return
        self.newest_t = max(self.newest_t, t)
        self._pods.pop(key, None)
        self._pods[key] = _Seen(t, features, confirmed=t)
        while len(self._pods) > self.max_pods:
            self._pods.popitem(last=False)
            self.evicted += 1

    def _departed(self, record: Mapping[str, Any]) -> None:
        try:
            t = _time(record)
            key = record["pod"]
        except (KeyError, ValueError):
            self.skipped["bad_record"] += 1
            return
        self.newest_t = max(self.newest_t, t)
        seen = self._pods.get(key) if isinstance(key, str) else None
        if seen is None:
            self.skipped["unknown_departure"] += 1
        elif t < seen.started:
            self.skipped["clock"] += 1
        elif seen.ended is None and not seen.lost:
            seen.ended = t

    def _listed(self, record: Mapping[str, Any]) -> None:
        try:
            t = _time(record)
            listed = record["pods"]
            if not isinstance(listed, list):
                raise ValueError("no pod list")
        except (KeyError, ValueError):
            self.skipped["bad_record"] += 1
            return
        self.newest_t = max(self.newest_t, t)
        running = {k for k in listed if isinstance(k, str)}
        for key, seen in self._pods.items():
            if seen.ended is not None or seen.lost or seen.started > t:
                continue
            if key in running:
                seen.confirmed = t
            else:
                seen.lost = True
                self.lost += 1

    def lifetimes(self, now: float) -> PodLifetimes:
        """The pods as lifetime data at ``now`` (at least the newest record's time): each
        ended pod's lifetime, each running pod's age, censored. ``creation_s`` is the
        start (the bind)."""
        at = max(now, self.newest_t)
        seen = list(self._pods.values())
        started = np.array([s.started for s in seen], np.float64)
        end = np.array(
            [s.ended if s.ended is not None else s.confirmed if s.lost else at for s in seen], np.float64
        )
        features = np.array([s.features for s in seen], np.float64).reshape(len(seen), FEATURE_COUNT)
        return PodLifetimes(
            name="cluster",
            features=features,
            creation_s=started,
            observed_s=np.maximum(end - started, 0.0),
            ended=np.array([s.ended is not None for s in seen], np.bool_),
            entry_s=np.zeros(len(seen)),
        )
