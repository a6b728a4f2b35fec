"""The scheduler's in-memory view of the cluster, fed by watch events.

It keeps the core's ``ClusterState`` current, incrementally: a node event touches one
row, a bound pod is placed once, an assumed pod (bound by us, the bind not yet seen
in a watch event) is already in the state so the next decision sees it. It never
lists the API per decision.

Each event handler returns what happened, so the operator can update the queue:
a pending pod of ours, a pod bound or gone, or a cluster change that may let
unschedulable pods fit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from scheduler.dra.catalog import CLAIMS, object_key
from scheduler.dra.gpu_view import sync_dra_gpus
from scheduler.errors import SchedulerInputError
from scheduler.k8s.client.unreadable import Skipped, log_unreadable
from scheduler.objects.node import Node
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import lifecycle, pod_from_manifest
from scheduler.resources.gpu import MILLI_PER_CORE_PERCENT, MILLI_PER_GPU
from scheduler.resources.hami import (
    DEVICE_CORDON_ANNOTATION,
    DEVICES_ALLOCATED,
    REGISTER_ANNOTATION,
    VGPU_NODE,
    ProtocolError,
    decode_pod_devices,
    pod_device_usage,
)
from scheduler.state.cluster_state import ClusterState, GpuUse

log = logging.getLogger(__name__)
TERMINAL_PHASES = ("Succeeded", "Failed")
# The kubelet's admission refuses a pod that does not fit with reason OutOf<resource>
# (lifecycle.InsufficientResourceError): what two schedulers of one node run into.
ADMISSION_SHORTAGE = "OutOf"


class PodChange(Enum):
    IGNORED = "ignored"
    PENDING = "pending"  # ours, waiting for a node: (re)queue it
    BOUND = "bound"  # on a node now: leaves the queue
    GONE = "gone"  # deleted or finished: leaves the queue; its resources are free
    INVALID = "invalid"  # ours, but its spec cannot be scheduled as written


@dataclass(frozen=True, slots=True)
class NodeChange:
    """A node added (``before`` None) or changed in what the scheduler reads."""

    before: Node | None
    after: Node


@dataclass(frozen=True, slots=True)
class DraChange:
    """What a DeviceClass, ResourceSlice or ResourceClaim event changed, for the
    queueing hints: ``claim`` names the claim when only that claim's status or spec
    changed and no device came free (the pods using it may go now); None when devices
    may have come free or appeared (a class or slice changed, an allocation was dropped
    or replaced, an allocated claim deleted), which may help any pod."""

    claim: str | None = None


@dataclass(frozen=True)
class PodEvent:
    change: PodChange
    key: str
    pod: Pod | None = None
    error: SchedulerInputError | None = None
    frees_resources: bool = False
    # The kubelet's admission refused a pod this process placed (``OutOfcpu``, ...):
    # the room it counted on was taken by a pod it did not know of yet.
    rejected_by_node: str = ""
    # BOUND: the pod just landed on its node as this cache sees it (a bind of ours
    # answered, or another's pod first seen there) ...
    landed: bool = False
    # ... or, already there, it changed its labels: the pod before (``hints``).
    relabeled_from: Pod | None = None


def pod_key(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata") or {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"


def init_containers_done(manifest: Mapping[str, Any]) -> bool:
    """Every init container has exited 0 (HAMi then counts the app containers only)."""
    spec, status = manifest.get("spec") or {}, manifest.get("status") or {}
    if not spec.get("initContainers"):
        return False
    statuses = status.get("initContainerStatuses") or []
    if len(statuses) < len(spec["initContainers"]):
        return False
    return all(((s.get("state") or {}).get("terminated") or {}).get("exitCode") == 0 for s in statuses)


def hami_usage(manifest: Mapping[str, Any], node: str) -> tuple[str, bool, dict[str, tuple[int, int, int]]]:
    """What the pod holds of each GPU of ``node`` by its ``hami.io/vgpu-devices-allocated``,
    as HAMi's scheduler counts it: ``(annotation, init done, {uuid: (milli, MiB, slots)})``.
    Nothing when the pod is HAMi's on another node (``hami.io/vgpu-node``) or has no
    readable allocation."""
    metadata, spec = manifest.get("metadata") or {}, manifest.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    text = str(annotations.get(DEVICES_ALLOCATED) or "")
    if not text or annotations.get(VGPU_NODE) != node:
        return text, False, {}
    try:
        devices = decode_pod_devices(text)
    except ProtocolError as error:
        log.warning("pod %s: %s: %s", pod_key(manifest), DEVICES_ALLOCATED, error)
        return text, False, {}
    done = init_containers_done(manifest)
    usage = pod_device_usage(devices, len(spec.get("initContainers") or []), done)
    return (
        text,
        done,
        {u: (d.cores * MILLI_PER_CORE_PERCENT, d.memory_mib, d.slots) for u, d in usage.items()},
    )


class SchedulerCache:
    def __init__(
        self,
        scheduler_names: str | Iterable[str],
        clock: Callable[[], float] = time.monotonic,
        unreadable: Skipped = log_unreadable,
    ) -> None:
        # The schedulerNames of this process's profiles: their pending pods are ours.
        names = [scheduler_names] if isinstance(scheduler_names, str) else scheduler_names
        self.scheduler_names = frozenset(names)
        self.clock = clock
        # Where objects go that the API server accepted but the cache cannot account
        # for (a node it ignores, a bound pod it cannot count).
        self.unreadable = unreadable
        # When each pod and node was last seen in an event or a listing (for resync),
        # and when each was seen deleted (while a listing asked for before may need it).
        self.seen_pods: dict[str, float] = {}
        self.seen_nodes: dict[str, float] = {}
        self._deleted: dict[tuple[str, str], float] = {}
        self.state = ClusterState()
        self.namespace_labels: dict[str, dict[str, str]] = {}
        # Pods we bound (or are binding) whose bound state no watch event has shown yet.
        self.assumed: set[str] = set()
        # A placed pod's containers' ``resources`` as last seen (``_resized``).
        self._container_resources: dict[str, list[Any]] = {}
        self._node_fingerprints: dict[str, tuple[Any, ...]] = {}
        # Bound pods whose node we have not seen yet (watch events arrive in any order).
        self._waiting_for_node: dict[str, dict[str, tuple[Pod, Mapping[str, Any]]]] = {}
        # Placed pods whose GPU usage came from their HAMi allocation annotation, with
        # what it was read from: init containers ending shrinks it (HAMi's rule).
        self._usage_source: dict[str, tuple[str, bool]] = {}
        # Pending pods of ours as last parsed, by resourceVersion: the same version comes
        # again from listings (ours, kopf's) and parsing costs more than the rest of an event.
        self._pending: dict[str, tuple[str, Pod]] = {}
        # Pending pods of any scheduler that a preemption nominated to a node
        # (``status.nominatedNodeName``): the room cleared for them is theirs (kube's
        # nominator), so filters count them there for pods of no higher priority.
        self.nominated: dict[str, Pod] = {}
        # Pods of ours the kubelet refused, already reported (until they are deleted).
        self._rejected: set[str] = set()

    # ---- nodes ----------------------------------------------------------------

    def on_node(self, event_type: str, manifest: Mapping[str, Any]) -> NodeChange | None:
        """Apply a node event; the change when it may let pending pods fit (a node
        added, or changed in what the scheduler reads), else None."""
        name = str((manifest.get("metadata") or {}).get("name"))
        if event_type == "DELETED":
            self.seen_nodes.pop(name, None)
            self._deleted["nodes", name] = self.clock()
            if name in self.state.node_index:
                orphans = self.state.remove_node(name)
                for pod in orphans:
                    self.assumed.discard(pod.key)
                self._node_fingerprints.pop(name, None)
                sync_dra_gpus(self.state, (name,))
            return None
        self.seen_nodes[name] = self.clock()
        spec, status = manifest.get("spec") or {}, manifest.get("status") or {}
        metadata = manifest.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        # What the scheduler reads of a node, compared by value: the event's own dicts,
        # which nothing changes after (a repr of each cost more than the comparison).
        fingerprint = (
            status.get("allocatable"),
            metadata.get("labels"),
            spec.get("taints"),
            bool(spec.get("unschedulable")),
            annotations.get(REGISTER_ANNOTATION),
            annotations.get(DEVICE_CORDON_ANNOTATION),
        )
        if self._node_fingerprints.get(name) == fingerprint:
            return None  # a heartbeat or status change the scheduler does not look at
        try:
            node = node_from_manifest(manifest)
        except SchedulerInputError as error:
            self.unreadable("node", manifest, error)
            return None
        if node.gpu_problem and (
            name not in self.state.node_index or self._gpu_problem(name) != node.gpu_problem
        ):
            log.warning("node %s: GPUs not used: %s", name, node.gpu_problem)
        self._node_fingerprints[name] = fingerprint
        row = self.state.node_index.get(name)
        before = None if row is None else self.state.nodes[row]
        self.state.add_node(node)
        sync_dra_gpus(self.state, (name,))  # its GPUs from ResourceSlices, if it has no others
        for pod, bound in self._waiting_for_node.pop(name, {}).values():
            self._place(pod, name, bound)
        return NodeChange(before, node)

    # ---- DRA ------------------------------------------------------------------

    def on_dra(self, plural: str, event_type: str, manifest: Mapping[str, Any]) -> DraChange | None:
        """Apply a DeviceClass, ResourceSlice or ResourceClaim event to the catalog (raises
        as ``DraCatalog.apply`` does); nodes' GPUs from DRA follow. What changed, or None
        when nothing the scheduler reads did (a claim written again with the same spec
        and status: a finalizer added, a resync)."""
        catalog = self.state.dra
        key = object_key(manifest, namespaced=True) if plural == CLAIMS else ""
        stored = catalog.claims.get(key) if key else None
        before = None if stored is None else stored.claim
        try:
            if not catalog.apply(plural, event_type, manifest):
                return None
        finally:
            sync_dra_gpus(self.state)
        if not key:
            return DraChange()
        stored = catalog.claims.get(key)
        after = None if stored is None else stored.claim
        held = None if before is None else before.allocation
        if held is not None and (after is None or after.allocation != held):
            return DraChange()  # its devices are free, or others are held instead
        return None if after == before else DraChange(claim=key)

    def _gpu_problem(self, name: str) -> str:
        return self.state.nodes[self.state.node_index[name]].gpu_problem

    # ---- namespaces -----------------------------------------------------------

    def on_namespace(self, event_type: str, manifest: Mapping[str, Any]) -> None:
        metadata = manifest.get("metadata") or {}
        name = str(metadata.get("name"))
        if event_type == "DELETED":
            self.namespace_labels.pop(name, None)
        else:
            self.namespace_labels[name] = dict(metadata.get("labels") or {})

    # ---- pods -----------------------------------------------------------------

    def on_pod(self, event_type: str, manifest: Mapping[str, Any]) -> PodEvent:
        key = pod_key(manifest)
        spec, status = manifest.get("spec") or {}, manifest.get("status") or {}
        node_name = spec.get("nodeName") or ""
        if event_type == "DELETED":
            self.seen_pods.pop(key, None)
            self._deleted["pods", key] = self.clock()
        else:
            self.seen_pods[key] = self.clock()
        if event_type == "DELETED" or status.get("phase") in TERMINAL_PHASES:
            self._pending.pop(key, None)
            self.nominated.pop(key, None)
            placement = self.state.placements.get(key)
            freed = self._release(key)
            rejected = self._rejected_by_node(key, event_type, manifest)
            left = placement.pod if placement is not None else None  # what it held (``hints``)
            return PodEvent(PodChange.GONE, key, left, frees_resources=freed, rejected_by_node=rejected)
        if node_name:
            self._pending.pop(key, None)
            self.nominated.pop(key, None)
            return self._on_bound(key, node_name, manifest)
        if not self.is_ours(spec):
            self._note_nomination(key, manifest)
            return PodEvent(PodChange.IGNORED, key)
        if self._is_assumed(key, manifest):
            # A view from before our bind (a late watch event, a listing): the pod is
            # placed already, and queueing it again would schedule it twice
            # (kube-scheduler skips assumed pods too).
            return PodEvent(PodChange.IGNORED, key)
        metadata = manifest.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            self._pending.pop(key, None)
            self.nominated.pop(key, None)
            return PodEvent(PodChange.GONE, key)
        version = str(metadata.get("resourceVersion") or "")
        known = self._pending.get(key)
        if version and known is not None and known[0] == version:
            return PodEvent(PodChange.PENDING, key, known[1])
        try:
            pod = pod_from_manifest(manifest)
        except SchedulerInputError as error:
            self.nominated.pop(key, None)
            return PodEvent(PodChange.INVALID, key, error=error)
        if version:
            self._pending[key] = (version, pod)
        self.nominate(pod)
        return PodEvent(PodChange.PENDING, key, pod)

    def _rejected_by_node(self, key: str, event_type: str, manifest: Mapping[str, Any]) -> str:
        """The kubelet's reason, the first time a pod of ours is seen refused at
        admission for want of a resource (``OutOf<resource>``); "" otherwise."""
        if event_type == "DELETED":
            self._rejected.discard(key)
            return ""
        spec, status = manifest.get("spec") or {}, manifest.get("status") or {}
        reason = str(status.get("reason") or "")
        if (
            not self.is_ours(spec)
            or status.get("phase") != "Failed"
            or not reason.startswith(ADMISSION_SHORTAGE)
        ):
            return ""
        if key in self._rejected:
            return ""
        self._rejected.add(key)
        return reason

    def is_ours(self, spec: Mapping[str, Any]) -> bool:
        """The pod ``spec`` names one of this process's profiles (none: kube's default)."""
        return (spec.get("schedulerName") or "default-scheduler") in self.scheduler_names

    def still_placed(self, pod: Pod) -> bool:
        """This very pod (not one recreated under its name) is still on its node in the
        cache: its deletion has not been seen."""
        placement = self.state.placements.get(pod.key)
        return placement is not None and placement.pod.uid == pod.uid

    def nominate(self, pod: Pod) -> None:
        """Remember (or, without a nominated node, forget) the pod's nomination."""
        if pod.nominated_node_name:
            self.nominated[pod.key] = pod
        else:
            self.nominated.pop(pod.key, None)

    def _note_nomination(self, key: str, manifest: Mapping[str, Any]) -> None:
        """Another scheduler's pending pod: parsed only while it is nominated (rare)."""
        nominated = (manifest.get("status") or {}).get("nominatedNodeName")
        if not nominated or (manifest.get("metadata") or {}).get("deletionTimestamp"):
            self.nominated.pop(key, None)
            return
        try:
            self.nominate(pod_from_manifest(manifest))
        except SchedulerInputError as error:
            self.unreadable("pod", manifest, error)
            self.nominated.pop(key, None)

    def _on_bound(self, key: str, node_name: str, manifest: Mapping[str, Any]) -> PodEvent:
        placement = self.state.placements.get(key)
        labels = (manifest.get("metadata") or {}).get("labels") or {}
        resized = self._resized(key, manifest)
        if (
            placement is not None
            and placement.node == node_name
            and not resized
            and not self._usage_changed(key, manifest)
        ):
            landed = key in self.assumed  # our bind, answered
            self.assumed.discard(key)
            pod = before = placement.pod
            if dict(pod.labels) != labels:
                # The API server added the node's topology labels at bind: take them without
                # parsing the pod again (that cost more CPU than scheduling it).
                pod = self.state.relabel(key, labels)
            relabeled_from = before if pod is not before and not landed else None
            try:
                now = lifecycle(manifest)
            except SchedulerInputError as error:
                log.warning("bound pod %s: %s", key, error)
                return PodEvent(PodChange.BOUND, key, pod, landed=landed, relabeled_from=relabeled_from)
            if any(getattr(pod, name) != value for name, value in now.items()):
                # Started, or being deleted (a preemption's victim): preemption reads these.
                pod = self.state.amend(key, **now)
            return PodEvent(PodChange.BOUND, key, pod, landed=landed, relabeled_from=relabeled_from)
        try:
            pod = pod_from_manifest(manifest)
        except SchedulerInputError as error:
            # The API server accepted it, so this is a field we are stricter on.
            self.unreadable("pod", manifest, error)
            return PodEvent(PodChange.BOUND, key)
        if placement is not None:
            self.state.remove(key)
        self.assumed.discard(key)
        if node_name not in self.state.node_index:
            self._waiting_for_node.setdefault(node_name, {})[key] = (pod, manifest)
        else:
            self._place(pod, node_name, manifest)
        if placement is None:
            return PodEvent(PodChange.BOUND, key, pod, landed=True)
        # placed anew (resized in place, HAMi's allocation seen, bound anew under its
        # name); a resize may have freed room
        relabeled_from = placement.pod if dict(placement.pod.labels) != dict(pod.labels) else None
        return PodEvent(PodChange.BOUND, key, pod, frees_resources=resized, relabeled_from=relabeled_from)

    def _resized(self, key: str, manifest: Mapping[str, Any]) -> bool:
        """The containers' resources of a placed pod changed since the last event (an
        in-place resize, ``pods/resize``): it must be counted anew. Remembers them."""
        containers = (manifest.get("spec") or {}).get("containers") or []
        now = [c.get("resources") for c in containers]
        seen = self._container_resources.get(key)
        self._container_resources[key] = now
        return seen is not None and seen != now

    def _usage_changed(self, key: str, manifest: Mapping[str, Any]) -> bool:
        """A pod placed from its allocation annotation whose annotation or init
        containers changed since (HAMi then counts its app containers only)."""
        source = self._usage_source.get(key)
        if source is None:
            return False
        text = str(((manifest.get("metadata") or {}).get("annotations") or {}).get(DEVICES_ALLOCATED) or "")
        return source != (text, init_containers_done(manifest))

    def _is_assumed(self, key: str, manifest: Mapping[str, Any]) -> bool:
        """We are binding (or bound) this very pod: same key, and the same UID when
        both are known (a pod recreated under the same name is a new pod)."""
        if key not in self.assumed or key not in self.state.placements:
            return False
        uid = (manifest.get("metadata") or {}).get("uid") or ""
        assumed_uid = self.state.placements[key].pod.uid
        return not uid or not assumed_uid or uid == assumed_uid

    def _place(self, pod: Pod, node_name: str, manifest: Mapping[str, Any]) -> None:
        """A bound pod, whoever placed it. On a HAMi node it holds what its
        ``hami.io/vgpu-devices-allocated`` says (as HAMi's scheduler counts it: nothing
        without one); elsewhere its GPUs are whole, and which ones the device plugin
        chose is not written anywhere: the freest are taken."""
        i = self.state.node_index[node_name]
        node = self.state.nodes[i]
        self._usage_source.pop(pod.key, None)
        if node.gpu_sharing:
            text, done, held = hami_usage(manifest, node_name)
            index = {gpu.uuid: g for g, gpu in enumerate(node.gpus)}
            usage = tuple(
                GpuUse(index[uuid], milli, memory, slots, uuid)
                for uuid, (milli, memory, slots) in held.items()
                if uuid in index
            )
            if held:
                self._usage_source[pod.key] = (text, done)
            self.state.place(pod, node_name, usage=usage)
            return
        count = int(self.state.gpu_count[i])
        free = self.state.gpu_free_milli[i, :count]
        order = np.argsort(-free, kind="stable")[: pod.gpu.count]
        if len(order) < pod.gpu.count:
            log.warning("pod %s on %s: node has fewer GPUs than the pod holds", pod.key, node_name)
        usage = tuple(GpuUse(int(g), MILLI_PER_GPU) for g in order)
        self.state.place(pod, node_name, usage=usage)

    def _release(self, key: str) -> bool:
        self.assumed.discard(key)
        self._container_resources.pop(key, None)
        self._usage_source.pop(key, None)
        for waiting in self._waiting_for_node.values():
            waiting.pop(key, None)
        if key in self.state.placements:
            self.state.remove(key)
            return True
        return False

    # ---- resync -----------------------------------------------------------------

    def newer_than_listing(self, kind: str, key: str, listed_at: float) -> bool:
        """An event about this pod or node (``kind``: ``pods``, ``nodes``) came after a
        listing asked for at ``listed_at``: what the watch showed is newer than the
        listing's item, which must not be applied over it. A relist runs beside the
        watches, so its items can be older than what they showed: a pod bound since
        would be queued again, a pod deleted since would come back."""
        seen = (self.seen_pods if kind == "pods" else self.seen_nodes).get(key)
        deleted = self._deleted.get((kind, key))
        return (seen is not None and seen >= listed_at) or (deleted is not None and deleted >= listed_at)

    def resync(self, pods: set[str], nodes: set[str], listed_at: float) -> list[str]:
        """Drop what a full listing (started at ``listed_at``) no longer has and no
        event has shown since: deletions a restarted watch never reported. Returns the
        pod keys that were released."""
        gone_nodes = [n for n, seen in self.seen_nodes.items() if n not in nodes and seen < listed_at]
        for name in gone_nodes:
            self.on_node("DELETED", {"metadata": {"name": name}})
        gone_pods = [k for k, seen in self.seen_pods.items() if k not in pods and seen < listed_at]
        for key in gone_pods:
            namespace, _, name = key.partition("/")
            self.on_pod("DELETED", {"metadata": {"namespace": namespace, "name": name}})
        sync_dra_gpus(self.state)  # after the listings of DRA objects
        return gone_pods

    def forget_deletions_before(self, asked_at: float) -> None:
        """Deletions seen before ``asked_at`` (when the oldest listing under way was
        asked for) matter to no listing."""
        self._deleted = {k: t for k, t in self._deleted.items() if t >= asked_at}

    # ---- our own decisions ----------------------------------------------------

    def assume(self, pod: Pod, node: str, gpu_indices: tuple[int, ...]) -> None:
        """Account for a pod we are binding, before the API confirms it."""
        self.state.place(pod, node, gpu_indices)
        self.assumed.add(pod.key)
        self._pending.pop(pod.key, None)
        self.nominated.pop(pod.key, None)

    def forget(self, key: str) -> None:
        """The bind failed: release what ``assume`` took."""
        if key in self.assumed:
            self.assumed.discard(key)
            if key in self.state.placements:
                self.state.remove(key)
