"""Writing a decision where HAMi's device plugin reads it, before the bind, as HAMi's
own scheduler does (``pkg/scheduler/scheduler.go`` Bind, ``pkg/util/nodelock``):

1. take the node lock ``hami.io/mutex.lock`` (``<time>,<namespace>,<pod>``, set with
   the node's resourceVersion as precondition). Another pod's lock is honoured while
   it is younger than 5 minutes and its pod exists; the pod waits for it
   (``NodeLocks.changed``) and is retried, it does not fail;
2. write on the pod: ``hami.io/vgpu-node`` (annotation and label), ``hami.io/vgpu-time``,
   ``hami.io/vgpu-devices-to-allocate`` and ``-allocated`` (one entry per init and
   app container), ``hami.io/bind-phase: allocating``, ``hami.io/bind-time``;
3. create the Binding (``KubeApi.bind``); steps 2 and 3 are one request: the Binding
   carries the annotations and the label, and the API server writes them with
   ``nodeName``. The device plugin's Allocate finds the pod
   through the lock, gives the container the GPUs the annotation names, marks the pod
   ``success`` and releases the lock. On a failure before the Binding exists, the
   scheduler releases the lock itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import BindOutcome, BindResult, KubeApi
from scheduler.objects.pod import Pod
from scheduler.resources.gpu import MILLI_PER_CORE_PERCENT
from scheduler.resources.hami import (
    BIND_PHASE,
    BIND_PHASE_ALLOCATING,
    BIND_TIME,
    DEVICES_ALLOCATED,
    DEVICES_TO_ALLOCATE,
    NODE_LOCK_ANNOTATION,
    VGPU_NODE,
    VGPU_TIME,
    ContainerDevice,
    ProtocolError,
    encode_pod_devices,
    lock_value,
    parse_lock,
    unix_seconds,
)
from scheduler.state.cluster_state import GpuUse

log = logging.getLogger(__name__)
# Tries at setting or removing the lock when the node changes in between (409).
LOCK_ATTEMPTS = 5
# How long a bind, once its turn for the node has come, waits for another pod's lock
# (the device plugin releases it after its Allocate) before the pod goes back to the
# queue to be decided again; and how often, meanwhile, the lock is read again (it
# expires, its pod may go).
NODE_LOCK_WAIT_S = 30.0
NODE_LOCK_RECHECK_S = 5.0


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def allocation_text(pod: Pod, usage: Sequence[GpuUse]) -> str:
    """``hami.io/vgpu-devices-to-allocate`` for ``pod`` holding ``usage``: its GPUs in
    order, ``count`` of them to each container that asks, every container an entry."""
    entries: list[list[ContainerDevice]] = [[] for _ in range(pod.gpu.container_count)]
    cursor = 0
    for position, count in pod.gpu.containers:
        for use in usage[cursor : cursor + count]:
            entries[position].append(
                ContainerDevice(use.uuid, use.memory_mib, use.milli // MILLI_PER_CORE_PERCENT)
            )
        cursor += count
    return encode_pod_devices(entries)


def decision_metadata(
    node: str, allocation: str, moment: dt.datetime
) -> tuple[dict[str, str], dict[str, str]]:
    """The pod's annotations and labels that say where it goes."""
    stamp = unix_seconds(moment)
    annotations = {
        VGPU_NODE: node,
        VGPU_TIME: stamp,
        DEVICES_TO_ALLOCATE: allocation,
        DEVICES_ALLOCATED: allocation,
        BIND_PHASE: BIND_PHASE_ALLOCATING,
        BIND_TIME: stamp,
    }
    return annotations, {VGPU_NODE: node}


class LockState(Enum):
    TAKEN = "taken"
    HELD = "held"  # by another pod that exists, for less than 5 minutes
    ERROR = "error"


@dataclass(frozen=True)
class LockResult:
    state: LockState
    detail: str = ""
    value: str = ""  # TAKEN: the lock's value, as set


@dataclass(frozen=True)
class WatchedLock:
    """A node's lock as the node watch last showed it (``value`` None: unlocked), at
    the node's ``version``."""

    value: str | None
    version: str


class NodeLocks:
    """The node locks the node watch shows, so a pod waiting for one wakes when it
    changes rather than polling the API; and each node's turn among this scheduler's
    own pods, so one of them at a time reads and takes a node's lock (when FGD packs
    twenty pods onto one node, the other nineteen wait here, not in a read of the node
    at every release)."""

    def __init__(self) -> None:
        self._values: dict[str, str | None] = {}
        self._versions: dict[str, str] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._changes: dict[str, int] = {}  # how many lock changes the watch has shown
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}  # the lock, its holder and waiters

    @contextlib.asynccontextmanager
    async def turn(self, node: str) -> AsyncIterator[None]:
        """Hold the node's turn (first come, first served: asyncio's lock is FIFO)."""
        lock, users = self._turns.get(node, (asyncio.Lock(), 0))
        self._turns[node] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            # Forgotten when no pod holds or waits for it (a released lock is not
            # "locked" while its next waiter has yet to run: that is no test of it).
            lock, users = self._turns[node]
            if users == 1:
                del self._turns[node]
            else:
                self._turns[node] = (lock, users - 1)

    def observe(self, node: str, annotations: Mapping[str, str] | None, version: str = "") -> None:
        value = (annotations or {}).get(NODE_LOCK_ANNOTATION)
        if version:
            self._versions[node] = version
        else:
            self._versions.pop(node, None)
        changed = self._values.get(node) != value
        self._values[node] = value
        if changed:
            self._changes[node] = self._changes.get(node, 0) + 1
            event = self._changed.pop(node, None)
            if event is not None:
                event.set()

    def watched(self, node: str) -> WatchedLock | None:
        """The node's lock and resourceVersion as last known (None if never seen, or
        unlocked at an unknown version): a lock can be judged, and set, without reading
        the node first (a 409 if it changed since)."""
        version = self._versions.get(node, "")
        if node not in self._values or (self._values[node] is None and not version):
            return None
        return WatchedLock(self._values[node], version)

    def taken(self, node: str, value: str) -> None:
        """This scheduler set the node's lock to ``value``: known before the watch shows
        it, so the next of its pods for the node waits for the release without asking
        (rather than trying the version from before, and reading the node after a 409)."""
        self.observe(node, {NODE_LOCK_ANNOTATION: value})

    def mark(self, node: str) -> int:
        """How many changes of the node's lock the watch has shown: taken before the
        lock is read, so that a release the watch shows during the read still wakes
        the pod (``changed(..., since=mark)``)."""
        return self._changes.get(node, 0)

    def forget(self, node: str) -> None:
        self._values.pop(node, None)
        self._versions.pop(node, None)
        self._changes[node] = self._changes.get(node, 0) + 1
        event = self._changed.pop(node, None)
        if event is not None:
            event.set()

    async def changed(self, node: str, timeout_s: float, since: int | None = None) -> None:
        """Until the node's lock changes, or ``timeout_s``; at once if it has changed
        since ``since`` (a ``mark``)."""
        if since is not None and self.mark(node) != since:
            return
        event = self._changed.setdefault(node, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)


class NodeLocker:
    """Takes and releases ``hami.io/mutex.lock`` for a pod. ``known_pod`` (a pod key)
    answers from the scheduler's pod watch whether the pod a lock names exists; the API
    server is asked only about pods the watch does not know."""

    def __init__(
        self,
        api: KubeApi,
        clock: Callable[[], dt.datetime] = now,
        known_pod: Callable[[str], bool] = lambda key: False,  # noqa: ARG005
    ) -> None:
        self.api = api
        self.clock = clock
        self.known_pod = known_pod

    async def _may_take_over(self, value: str, pod: Pod) -> tuple[bool, str]:
        """Whether the lock ``value`` may be replaced by ``pod``'s (HAMi's ``LockNode``):
        it is ``pod``'s own, older than 5 minutes, or its pod is gone."""
        try:
            lock = parse_lock(value)
        except ProtocolError as error:
            return False, f"unreadable lock: {error}"
        if lock.held_by(pod.namespace, pod.name) or lock.expired(self.clock()):
            return True, ""
        if (
            lock.pod
            and not self.known_pod(f"{lock.namespace}/{lock.pod}")
            and not await self.api.pod_exists(lock.namespace, lock.pod)
        ):
            log.info("node lock %r names a pod that is gone: taking it over", value)
            return True, ""
        return False, f"locked by {lock.namespace}/{lock.pod} since {lock.taken_at:%H:%M:%S}"

    async def _verdict(self, current: str | None, pod: Pod) -> LockResult | None:
        """What the lock ``current`` means for ``pod``: None when ``pod`` may set its
        own, TAKEN when it is already ``pod``'s, HELD when another pod's is honoured."""
        if current is None:
            return None
        allowed, why = await self._may_take_over(current, pod)
        if not allowed:
            return LockResult(LockState.HELD, why)
        if parse_lock(current).held_by(pod.namespace, pod.name):
            return LockResult(LockState.TAKEN, value=current)
        return None

    async def acquire(self, pod: Pod, node: str, watched: WatchedLock | None = None) -> LockResult:
        """Take the node's lock for ``pod``. ``watched``: the lock as the node watch last
        showed it. It is judged as it stands there and, if ``pod`` may take it, set at
        the node's version there: one request instead of a read and a write while the
        watch is current (each GPU pod's bind waits on it), and none while another
        pod's lock is held (the watch wakes the pod when it changes)."""
        try:
            if watched is not None:
                # A lock at an unknown version (this scheduler's own, just set) is judged
                # here too; only setting one needs the version.
                verdict = await self._verdict(watched.value, pod)
                if verdict is not None:
                    return verdict
                value = lock_value(self.clock(), pod.namespace, pod.name)
                if watched.version and await self.api.patch_node_annotation(
                    node, NODE_LOCK_ANNOTATION, value, watched.version
                ):
                    return LockResult(LockState.TAKEN, value=value)
            for _ in range(LOCK_ATTEMPTS):
                manifest = await self.api.read_node(node)
                metadata = manifest.get("metadata") or {}
                current = (metadata.get("annotations") or {}).get(NODE_LOCK_ANNOTATION)
                verdict = await self._verdict(current, pod)
                if verdict is not None:
                    return verdict
                value = lock_value(self.clock(), pod.namespace, pod.name)
                version = str(metadata.get("resourceVersion") or "")
                if await self.api.patch_node_annotation(node, NODE_LOCK_ANNOTATION, value, version):
                    return LockResult(LockState.TAKEN, value=value)
            return LockResult(
                LockState.HELD, f"node {node} changed under {LOCK_ATTEMPTS} attempts to lock it"
            )
        except ApiException as error:
            return LockResult(LockState.ERROR, f"node lock on {node}: {error.status} {error.reason}")
        except Exception as error:
            return LockResult(LockState.ERROR, f"node lock on {node}: {type(error).__name__}: {error}")

    async def release(self, pod: Pod, node: str) -> None:
        """Remove the lock if it is ``pod``'s (what HAMi's ``ReleaseNodeLock`` checks)."""
        try:
            for _ in range(LOCK_ATTEMPTS):
                manifest = await self.api.read_node(node)
                metadata = manifest.get("metadata") or {}
                current = (metadata.get("annotations") or {}).get(NODE_LOCK_ANNOTATION)
                if current is None or not current.endswith(f",{pod.namespace},{pod.name}"):
                    return
                version = str(metadata.get("resourceVersion") or "")
                if await self.api.patch_node_annotation(node, NODE_LOCK_ANNOTATION, None, version):
                    return
        except Exception as error:  # the lock expires after 5 minutes; nothing else to do
            log.warning("node lock of %s on %s not released: %s", pod.key, node, error)


async def bind_under_lock(
    locker: NodeLocker, locks: NodeLocks, pod: Pod, node: str, allocation: str
) -> BindResult | None:
    """Steps 1 to 3: the node lock, then one Binding that carries the decision's
    annotations and label (the API server copies a Binding's annotations and, since
    Kubernetes 1.33, its labels onto the pod as it sets ``nodeName``: one write
    instead of a patch and a bind, and the device plugin never sees the pod bound
    without its devices). On a failure the lock is released. None when another pod's
    lock outlasted ``NODE_LOCK_WAIT_S``: the pod is to be decided again."""
    async with locks.turn(node):
        # Counted from the pod's turn: waiting behind this scheduler's own pods for the
        # node is progress, not a lock that never comes free.
        deadline = time.monotonic() + NODE_LOCK_WAIT_S
        watched = locks.watched(node)
        while True:
            seen = locks.mark(node)
            lock = await locker.acquire(pod, node, watched)
            if lock.state is LockState.TAKEN:
                locks.taken(node, lock.value)
                break
            if lock.state is LockState.ERROR:
                return BindResult(BindOutcome.ERROR, lock.detail)
            left = deadline - time.monotonic()
            if left <= 0:
                log.info("pod %s waited %g s for node %s: %s", pod.key, NODE_LOCK_WAIT_S, node, lock.detail)
                return None
            await locks.changed(node, min(left, NODE_LOCK_RECHECK_S), since=seen)
            # A change the watch showed is judged from the watch; after a quiet recheck
            # the node is read, so a watch that has stalled holds no pod back.
            watched = locks.watched(node) if locks.mark(node) != seen else None
    annotations, labels = decision_metadata(node, allocation, now())
    result = await locker.api.bind(pod, node, annotations, labels)
    if result.outcome is not BindOutcome.BOUND:
        await locker.release(pod, node)
    return result
