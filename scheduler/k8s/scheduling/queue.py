"""The scheduling queue, with kube-scheduler's three pools.

- active: pods ready to be tried, highest priority first, then first come;
- backoff: pods that failed recently and wait ``1 s * 2**(attempts-1)``, at most 10 s;
  when no pod is active, the one whose backoff ends first is tried at once, unless it
  failed with an error (kube's SchedulerPopFromBackoffQ, on by default since 1.33);
- unschedulable: pods no node could take; they move back when the cluster changes
  in a way that could help (a node added or changed, a pod deleted), when the pod
  itself changes in what the scheduler reads (its spec, labels, or the claims
  ``status.resourceClaimStatuses`` names: kube's ``isPodUpdated``), and at the latest
  after 5 minutes. A pod that changes while it is being tried backs off instead of
  waiting as unschedulable (kube's in-flight events).

Pods that kube's PreEnqueue plugins hold back wait aside ("gated"), never tried and
never reported, until an update of the pod lets them in: pods with scheduling gates
(SchedulingGates) and pods whose ResourceClaimTemplate's claim is not created yet
(DynamicResources: the resourceclaim controller names it in the pod's
``status.resourceClaimStatuses``). A pod whose preemption is being carried out waits
aside too, until its victims' deletions are answered (``hold`` and ``release``: kube's
DefaultPreemption PreEnqueue under async preemption, ``IsPodRunningPreemption``); no
cluster change moves it meanwhile, so it is not tried again while its victims are still
there. A pod that cannot be tried until one of this scheduler's own writes is answered
(a claim it shares whose allocation is being written) waits aside the same way
(``wait_for`` and ``resume``), and that hand-out is not counted as an attempt: kube
tries it, fails it with ``resource claim ... is in the process of being allocated``,
reports that and requeues it when the claim changes. Pure logic with an injected
clock: the operator drives it from watch events and its loop.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.objects.pod import Pod

INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 10.0
MAX_UNSCHEDULABLE_S = 300.0
# pop() runs once per pod and flushes first; looking through every queued pod for
# expired unschedulable ones each time made a burst of N pods cost O(N^2). Once a
# second is plenty for a 5-minute limit (kube-scheduler looks every 30 s).
UNSCHEDULABLE_SCAN_S = 1.0
# Cluster changes kept per pod being tried, to be judged when it fails; past this many
# (a flood of deletions during one long cycle) it backs off whatever they were.
MAX_IN_FLIGHT_HINTS = 256
# Whether a change may help a pod its nodes rejected for these reasons (None: any).
Hint = Callable[[Pod, frozenset[str] | None], bool]


class QueueName(StrEnum):
    ACTIVE = "active"
    BACKOFF = "backoff"
    UNSCHEDULABLE = "unschedulable"
    GATED = "gated"


def held_before_queue(pod: Pod) -> bool:
    """kube's PreEnqueue: scheduling gates, or a template's claim not created yet."""
    return bool(pod.scheduling_gates) or None in pod.resource_claims


@dataclass
class QueuedPod:
    pod: Pod
    # When the pod first entered the queue (for the scheduling SLI).
    first_seen: float
    attempts: int = 0
    # When it last failed, and why: the filters' reasons (for requeue decisions) and the
    # plugins that gave them (for ``scheduler_unschedulable_pods``).
    failed_at: float = 0.0
    rejected_by: frozenset[str] = frozenset()
    plugins: frozenset[str] = frozenset()
    where: QueueName = QueueName.ACTIVE
    sequence: int = 0
    # The queue's move cycle when the pod was handed out (see SchedulingQueue).
    move_cycle: int = 0
    # The pod changed while it was being tried: a failure backs off, not parks.
    changed_in_flight: bool = False
    # The hints of the cluster changes while it was being tried (``move_helped``), read
    # once its failure says what rejected it (kube's in-flight events).
    in_flight_hints: list[Hint] = field(default_factory=list)
    # Its last attempt ended in an error (kube's podErrorBackoffQ): it waits out its
    # backoff even when nothing else is ready.
    errored: bool = False
    # Gated while its preemption is carried out (``SchedulingQueue.hold``).
    preempting: bool = False
    # Gated until this write is answered (``SchedulingQueue.wait_for``), and since when.
    waiting_for: str | None = None
    waiting_since: float = 0.0

    def backoff_s(self) -> float:
        if self.attempts <= 0:
            return 0.0
        return float(min(MAX_BACKOFF_S, INITIAL_BACKOFF_S * 2.0 ** (self.attempts - 1)))

    def backoff_until(self) -> float:
        return self.failed_at + self.backoff_s()


@dataclass
class SchedulingQueue:
    clock: Callable[[], float] = time.monotonic
    _pods: dict[str, QueuedPod] = field(default_factory=dict)
    _active: list[tuple[int, int, str]] = field(default_factory=list)
    _backoff: list[tuple[float, int, str]] = field(default_factory=list)
    _counter: Iterator[int] = field(default_factory=itertools.count)
    # Pods handed out by pop() and not yet done (scheduled, failed or forgotten).
    _in_flight: dict[str, QueuedPod] = field(default_factory=dict)
    # Bumped when the cluster changes, so a pod that failed during such a change
    # is retried instead of parked (kube's moveRequestCycle).
    _move_cycle: int = 0
    _scanned_at: float = -math.inf
    # What pods wait aside for (``wait_for``) -> their keys, in the order they began.
    _waiting: dict[str, dict[str, None]] = field(default_factory=dict)
    # The reasons a hint may lift (``move_helped``), and the keys of the pods that became
    # unschedulable for one of them (some since moved: checked when read), so that a
    # hint looks at those only, not at every queued pod on every bind.
    hinted: frozenset[str] = frozenset()
    _unschedulable: dict[str, None] = field(default_factory=dict)
    # The keys of every unschedulable pod, in the order they were parked: what a change
    # that may help any of them reads, not every queued pod (with kube's
    # SchedulingWhileGated, 10,000 gated pods were read at each of 20,000 deletions).
    _parked: dict[str, None] = field(default_factory=dict)

    # ---- adding and removing --------------------------------------------------

    def add(self, pod: Pod) -> QueueName:
        """A new pending pod, or a new version of one already queued."""
        known = self._pods.get(pod.key) or self._in_flight.get(pod.key)
        if known is not None:
            changed = pod != known.pod
            known.pod = pod
            if pod.key in self._in_flight:
                known.changed_in_flight = known.changed_in_flight or changed
            elif (
                known.where is QueueName.GATED and not self._held_aside(known) and not held_before_queue(pod)
            ):
                self._activate(known)
            elif known.where is QueueName.UNSCHEDULABLE and changed:
                self._to_backoff(known)
            return known.where
        entry = QueuedPod(pod, self.clock(), sequence=next(self._counter))
        self._pods[pod.key] = entry
        if held_before_queue(pod):
            entry.where = QueueName.GATED
        else:
            self._activate(entry)
        return entry.where

    def forget(self, key: str) -> bool:
        """The pod was deleted or bound elsewhere: drop it wherever it is."""
        entry = self._pods.pop(key, None)
        in_flight = self._in_flight.pop(key, None)
        self._parked.pop(key, None)
        if entry is not None and entry.waiting_for is not None:
            self._stop_waiting(entry)
        return entry is not None or in_flight is not None

    def __contains__(self, key: str) -> bool:
        return key in self._pods or key in self._in_flight

    # ---- scheduling loop ------------------------------------------------------

    def pop(self) -> QueuedPod | None:
        """The next pod to try, or None when none is ready: the first active pod, else
        the unschedulable-and-moved pod whose backoff ends first (kube's
        SchedulerPopFromBackoffQ)."""
        self.flush()
        while self._active:
            _, sequence, key = heapq.heappop(self._active)
            entry = self._pods.get(key)
            if entry is None or entry.where is not QueueName.ACTIVE or entry.sequence != sequence:
                continue  # stale heap entry
            return self._hand_out(entry)
        early = self._first_in_backoff()
        return None if early is None else self._hand_out(early)

    def _hand_out(self, entry: QueuedPod) -> QueuedPod:
        del self._pods[entry.pod.key]  # its heap entries go stale
        self._parked.pop(entry.pod.key, None)
        entry.attempts += 1
        self._in_flight[entry.pod.key] = entry
        entry.move_cycle = self._move_cycle
        return entry

    def _first_in_backoff(self) -> QueuedPod | None:
        """The backoff pod, not one that errored, whose backoff ends first (then by
        priority and arrival, as the active pool orders them)."""
        best: tuple[float, int, int] | None = None
        chosen = None
        for until, sequence, key in self._backoff:
            entry = self._pods.get(key)
            if entry is None or entry.where is not QueueName.BACKOFF or entry.sequence != sequence:
                continue
            if entry.errored:
                continue
            rank = (until, -entry.pod.priority, sequence)
            if best is None or rank < best:
                best, chosen = rank, entry
        return chosen

    def take(self, key: str) -> QueuedPod | None:
        """Hand out this pod now, from whichever pool it waits in (a gang's members are
        tried together); None when it is not queued, already handed out, or gated."""
        entry = self._pods.get(key)
        if entry is None or entry.where is QueueName.GATED:
            return None
        return self._hand_out(entry)

    def done(self, key: str) -> QueuedPod | None:
        """The pod was bound: it leaves the queue for good."""
        return self._in_flight.pop(key, None)

    def failed(
        self,
        key: str,
        rejected_by: frozenset[str],
        *,
        unschedulable: bool,
        plugins: frozenset[str] = frozenset(),
    ) -> QueueName | None:
        """A failed attempt: unschedulable pods wait for a cluster change (or, if the
        cluster changed while they were tried, back off); errors back off."""
        entry = self._in_flight.pop(key, None)
        if entry is None:
            return None  # deleted meanwhile
        entry.failed_at = self.clock()
        entry.rejected_by = rejected_by
        entry.plugins = plugins
        entry.errored = not unschedulable
        changed_meanwhile = (
            entry.move_cycle != self._move_cycle
            or entry.changed_in_flight
            or any(hint(entry.pod, rejected_by) for hint in entry.in_flight_hints)
        )
        entry.changed_in_flight = False
        entry.in_flight_hints.clear()
        if unschedulable and not changed_meanwhile:
            self._park(entry)
        else:
            self._to_backoff(entry)
        self._pods[key] = entry
        return entry.where

    # ---- preemption ------------------------------------------------------------

    def hold(self, key: str) -> bool:
        """The pod's preemption is being carried out: it waits aside, tried by nothing
        and moved by no cluster change, until ``release``. False when it is not queued
        (bound, deleted, or handed out again)."""
        entry = self._pods.get(key)
        if entry is None:
            return False
        entry.where = QueueName.GATED
        self._parked.pop(key, None)
        entry.preempting = True
        return True

    def release(self, key: str, *, retry: bool) -> QueueName | None:
        """Its victims' deletions are answered. ``retry``: the room is free already (the
        victims' deletions were seen while it waited aside) or the preemption failed:
        back to backoff, or active once its backoff is over. Otherwise it waits as
        unschedulable for the cluster change that frees the room (a victim's deletion).
        None when it was not held."""
        entry = self._pods.get(key)
        if entry is None or not entry.preempting:
            return None
        entry.preempting = False
        if retry:
            self._to_backoff(entry)
        else:
            self._park(entry)
        return entry.where

    # ---- waiting for this scheduler's own writes -----------------------------------

    def wait_for(self, key: str, cause: str) -> bool:
        """The handed-out pod cannot be tried until ``cause`` (a write this scheduler
        has under way) is answered: it waits aside, tried by nothing and moved by no
        cluster change, until ``resume(cause)``; this hand-out is not an attempt. False
        when it is not handed out."""
        entry = self._in_flight.pop(key, None)
        if entry is None:
            return False
        entry.attempts -= 1
        entry.changed_in_flight = False
        entry.in_flight_hints.clear()
        entry.where = QueueName.GATED
        entry.waiting_for = cause
        entry.waiting_since = self.clock()
        self._pods[key] = entry
        self._waiting.setdefault(cause, {})[key] = None
        return True

    def resume(self, cause: str) -> int:
        """``cause`` was answered: the pods waiting for it go active, in the order they
        began to wait. How many did."""
        moved = 0
        for key in self._waiting.pop(cause, ()):
            entry = self._pods.get(key)
            if entry is not None and entry.waiting_for == cause:
                entry.waiting_for = None
                self._activate(entry)
                moved += 1
        return moved

    def waited_for(self) -> list[str]:
        """The writes pods wait for."""
        return list(self._waiting)

    def _stop_waiting(self, entry: QueuedPod) -> None:
        cause = entry.waiting_for
        entry.waiting_for = None
        keys = self._waiting.get(cause or "")
        if keys is not None:
            keys.pop(entry.pod.key, None)
            if not keys:
                del self._waiting[cause or ""]

    def _held_aside(self, entry: QueuedPod) -> bool:
        return entry.preempting or entry.waiting_for is not None

    # ---- cluster events -------------------------------------------------------

    def move_all_to_active_or_backoff(self) -> int:
        """Something in the cluster changed that may help unschedulable pods."""
        self._move_cycle += 1
        moved = 0
        for key in list(self._parked):
            self._to_backoff(self._pods[key])
            moved += 1
        return moved

    def move_helped(self, helps: Hint, *, every: bool = False) -> int:
        """A change that helps only some pods (kube's queueing hints, ``hints``):
        the unschedulable pods for which ``helps(pod, why its nodes rejected it)`` move to
        backoff or active, among those rejected for a reason in ``hinted`` (``every``:
        among all). A pod being tried keeps the hint: if it fails for reasons the change
        may lift, it backs off instead of waiting (past ``MAX_IN_FLIGHT_HINTS`` changes
        during one attempt it backs off whatever they were). How many moved."""
        moved = 0
        keys = list(self._parked) if every else list(self._unschedulable)
        for key in keys:
            entry = self._pods.get(key)
            if entry is None or entry.where is not QueueName.UNSCHEDULABLE:
                self._unschedulable.pop(key, None)
            elif helps(entry.pod, entry.rejected_by):
                self._unschedulable.pop(key, None)
                self._to_backoff(entry)
                moved += 1
        for entry in self._in_flight.values():
            if entry.changed_in_flight:
                continue
            if len(entry.in_flight_hints) >= MAX_IN_FLIGHT_HINTS:
                entry.changed_in_flight = True
                entry.in_flight_hints.clear()
            else:
                entry.in_flight_hints.append(helps)
        return moved

    def move_to_active_or_backoff(self, keys: Iterable[str]) -> int:
        """Something changed that may help these pods (a PodGroup, a new member)."""
        moved = 0
        for key in keys:
            entry = self._pods.get(key)
            if entry is not None and entry.where is QueueName.UNSCHEDULABLE:
                self._to_backoff(entry)
                moved += 1
        return moved

    def flush(self) -> None:
        """Backoff pods whose time is up go active; pods unschedulable for 5 minutes
        go back to backoff/active (checked at most every ``UNSCHEDULABLE_SCAN_S``)."""
        now = self.clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, sequence, key = heapq.heappop(self._backoff)
            entry = self._pods.get(key)
            if entry is not None and entry.where is QueueName.BACKOFF and entry.sequence == sequence:
                self._activate(entry)
        if now - self._scanned_at < UNSCHEDULABLE_SCAN_S:
            return
        self._scanned_at = now
        for entry in list(self._pods.values()):
            if entry.where is QueueName.UNSCHEDULABLE and now - entry.failed_at >= MAX_UNSCHEDULABLE_S:
                self._to_backoff(entry)
            elif entry.waiting_for is not None and now - entry.waiting_since >= MAX_UNSCHEDULABLE_S:
                # A write never answered must not keep its pods aside for good.
                self._stop_waiting(entry)
                self._activate(entry)

    def next_ready_in(self) -> float | None:
        """Seconds until a backoff pod becomes active (None if none waits); 0 while
        one that did not error waits in backoff (``pop`` takes it)."""
        if self._active or self._first_in_backoff() is not None:
            return 0.0
        while self._backoff:
            until, sequence, key = self._backoff[0]
            entry = self._pods.get(key)
            if entry is not None and entry.where is QueueName.BACKOFF and entry.sequence == sequence:
                return max(0.0, until - self.clock())
            heapq.heappop(self._backoff)
        return None

    # ---- internals ------------------------------------------------------------

    def _activate(self, entry: QueuedPod) -> None:
        self._parked.pop(entry.pod.key, None)
        entry.where = QueueName.ACTIVE
        entry.sequence = next(self._counter)
        heapq.heappush(self._active, (-entry.pod.priority, entry.sequence, entry.pod.key))

    def _park(self, entry: QueuedPod) -> None:
        entry.where = QueueName.UNSCHEDULABLE
        self._parked[entry.pod.key] = None
        if not entry.rejected_by.isdisjoint(self.hinted):
            self._unschedulable[entry.pod.key] = None

    def _to_backoff(self, entry: QueuedPod) -> None:
        until = entry.backoff_until()
        if until <= self.clock():
            self._activate(entry)
            return
        self._parked.pop(entry.pod.key, None)
        entry.where = QueueName.BACKOFF
        entry.sequence = next(self._counter)
        heapq.heappush(self._backoff, (until, entry.sequence, entry.pod.key))

    def waiting(self) -> list[tuple[Pod, float]]:
        """The queued pods not handed out, each with when it first entered the queue."""
        return [(entry.pod, entry.first_seen) for entry in self._pods.values()]

    def sizes(self) -> dict[QueueName, int]:
        counts = dict.fromkeys(QueueName, 0)
        for entry in self._pods.values():
            counts[entry.where] += 1
        return counts

    def unschedulable_by_plugin(self) -> dict[tuple[str, str], int]:
        """Unschedulable pods by (plugin that rejected them, their profile's schedulerName)."""
        counts: dict[tuple[str, str], int] = {}
        for entry in self._pods.values():
            if entry.where is QueueName.UNSCHEDULABLE:
                for plugin in entry.plugins:
                    key = (plugin, entry.pod.scheduler_name)
                    counts[key] = counts.get(key, 0) + 1
        return counts
