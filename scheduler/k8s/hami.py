"""Writing a decision where HAMi's device plugin reads it, before the bind, as HAMi's
own scheduler does (``pkg/scheduler/scheduler.go`` Bind, ``pkg/util/nodelock``):

1. take the node lock ``hami.io/mutex.lock`` (``<time>,<namespace>,<pod>``, set with
   the node's resourceVersion as precondition). Another pod's lock is honoured while
   it is younger than 5 minutes and its pod exists; the pod waits for it
   (``NodeLocks.changed``) and is retried, it does not fail;
2. patch the pod: ``hami.io/vgpu-node`` (annotation and label), ``hami.io/vgpu-time``,
   ``hami.io/vgpu-devices-to-allocate`` and ``-allocated`` (one entry per init and
   app container), ``hami.io/bind-phase: allocating``, ``hami.io/bind-time``;
3. create the Binding (``KubeApi.bind``). The device plugin's Allocate finds the pod
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

from scheduler.k8s.api import BindOutcome, BindResult, KubeApi
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
            event = self._changed.pop(node, None)
            if event is not None:
                event.set()

    def unlocked_version(self, node: str) -> str | None:
        """The node's resourceVersion in the last event the watch showed, if that event
        showed it unlocked: a lock can be set on it without reading the node first (a
        409 if it changed since)."""
        if node in self._values and self._values[node] is None:
            return self._versions.get(node)
        return None

    def forget(self, node: str) -> None:
        self._values.pop(node, None)
        self._versions.pop(node, None)
        event = self._changed.pop(node, None)
        if event is not None:
            event.set()

    async def changed(self, node: str, timeout_s: float) -> None:
        """Until the node's lock changes, or ``timeout_s``."""
        event = self._changed.setdefault(node, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)


class NodeLocker:
    """Takes and releases ``hami.io/mutex.lock`` for a pod."""

    def __init__(self, api: KubeApi, clock: Callable[[], dt.datetime] = now) -> None:
        self.api = api
        self.clock = clock

    async def _may_take_over(self, value: str, pod: Pod) -> tuple[bool, str]:
        """Whether the lock ``value`` may be replaced by ``pod``'s (HAMi's ``LockNode``):
        it is ``pod``'s own, older than 5 minutes, or its pod is gone."""
        try:
            lock = parse_lock(value)
        except ProtocolError as error:
            return False, f"unreadable lock: {error}"
        if lock.held_by(pod.namespace, pod.name) or lock.expired(self.clock()):
            return True, ""
        if lock.pod and not await self.api.pod_exists(lock.namespace, lock.pod):
            log.info("node lock %r names a pod that is gone: taking it over", value)
            return True, ""
        return False, f"locked by {lock.namespace}/{lock.pod} since {lock.taken_at:%H:%M:%S}"

    async def acquire(self, pod: Pod, node: str, unlocked_version: str | None = None) -> LockResult:
        """Take the node's lock for ``pod``. ``unlocked_version``: the node's version
        when the watch last showed it unlocked; the lock is first set at that version
        (one request instead of a read and a write: each GPU pod's bind waits on it)."""
        try:
            if unlocked_version:
                value = lock_value(self.clock(), pod.namespace, pod.name)
                if await self.api.patch_node_annotation(node, NODE_LOCK_ANNOTATION, value, unlocked_version):
                    return LockResult(LockState.TAKEN)
            for _ in range(LOCK_ATTEMPTS):
                manifest = await self.api.read_node(node)
                metadata = manifest.get("metadata") or {}
                current = (metadata.get("annotations") or {}).get(NODE_LOCK_ANNOTATION)
                if current is not None:
                    allowed, why = await self._may_take_over(current, pod)
                    if not allowed:
                        return LockResult(LockState.HELD, why)
                    if parse_lock(current).held_by(pod.namespace, pod.name):
                        return LockResult(LockState.TAKEN)
                value = lock_value(self.clock(), pod.namespace, pod.name)
                version = str(metadata.get("resourceVersion") or "")
                if await self.api.patch_node_annotation(node, NODE_LOCK_ANNOTATION, value, version):
                    return LockResult(LockState.TAKEN)
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


async def write_decision(
    locker: NodeLocker, locks: NodeLocks, pod: Pod, node: str, allocation: str
) -> BindResult | None:
    """Steps 1 and 2: the node lock, then the pod's annotations (``BOUND``: written; on
    a failure the lock is released). None when another pod's lock outlasted
    ``NODE_LOCK_WAIT_S``: the pod is to be decided again."""
    async with locks.turn(node):
        # Counted from the pod's turn: waiting behind this scheduler's own pods for the
        # node is progress, not a lock that never comes free.
        deadline = time.monotonic() + NODE_LOCK_WAIT_S
        while True:
            lock = await locker.acquire(pod, node, locks.unlocked_version(node))
            if lock.state is LockState.TAKEN:
                break
            if lock.state is LockState.ERROR:
                return BindResult(BindOutcome.ERROR, lock.detail)
            left = deadline - time.monotonic()
            if left <= 0:
                log.info("pod %s waited %g s for node %s: %s", pod.key, NODE_LOCK_WAIT_S, node, lock.detail)
                return None
            await locks.changed(node, min(left, NODE_LOCK_RECHECK_S))
        annotations, labels = decision_metadata(node, allocation, now())
        result = await locker.api.patch_pod_metadata(pod, annotations, labels)
    if result.outcome is not BindOutcome.BOUND:
        await locker.release(pod, node)
    return result
