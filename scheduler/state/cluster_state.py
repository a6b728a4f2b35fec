"""The cluster as arrays: one row per node, one column per resource.

The simulator and the live cache both build a ``ClusterState`` and update it
incrementally: ``place`` and ``remove`` touch one node's row; adding a resource the
state has not seen adds a column; removing a node moves the last row into its place.
Filters and scores read whole columns at once (``requested[:, cpu]``), never loop
over nodes in Python on the hot path.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.dra.catalog import DraCatalog
from scheduler.objects.node import Gpu, Node
from scheduler.objects.pod import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Pod
from scheduler.resources.gpu import MAX_GPUS_PER_NODE, MILLI_PER_GPU
from scheduler.state.pod_groups import PodGroups
from scheduler.volumes.catalog import VolumeCatalog

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

BASE_RESOURCES = (CPU, MEMORY, PODS, EPHEMERAL_STORAGE)
# Columns of the base resources, fixed so hot paths can slice them directly.
CPU_COLUMN, MEMORY_COLUMN, PODS_COLUMN = 0, 1, 2
_MAX_MASKS = 4096
_SERIALS = itertools.count(1)


class StateError(KeyError):
    """A placement the state cannot apply: unknown node, pod already placed, ..."""


@dataclass(frozen=True, slots=True)
class GpuUse:
    """What a placed pod holds of one GPU of its node: cores (milli), memory (MiB) and
    vGPU slots. ``uuid`` keeps it on the same GPU when the node's GPU list changes."""

    index: int
    milli: int
    memory_mib: int = 0
    slots: int = 1
    uuid: str = ""


@dataclass(frozen=True, slots=True)
class Placement:
    pod: Pod
    node: str
    gpu_indices: tuple[int, ...]
    gpu_use: tuple[GpuUse, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelDomains:
    """One label key over all nodes: ``ids[i]`` names node ``i``'s value (its position in
    ``index``), -1 where the node lacks the label."""

    ids: IntArray
    index: Mapping[str, int]

    @property
    def count(self) -> int:
        return len(self.index)


class ClusterState:
    """Nodes, their allocatable and requested resources, and the pods placed on them."""

    def __init__(self, nodes: Iterable[Node] = (), resources: Iterable[str] = ()) -> None:
        # Tells caches keyed on node versions which state they belong to.
        self.serial = next(_SERIALS)
        self.resource_names: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(self.resource_names)}
        self.nodes: list[Node] = []
        self.node_index: dict[str, int] = {}
        self._allocatable: IntArray = np.zeros((0, len(self.resource_names)), np.int64)
        self._requested: IntArray = np.zeros_like(self._allocatable)
        # Scoring requests (containers without requests count as 100m / 200Mi).
        self._nonzero_requested: IntArray = np.zeros((0, 2), np.int64)
        self._gpu_count: IntArray = np.zeros(0, np.int64)
        # Per GPU (slots past gpu_count stay 0): free cores in milli, memory and free
        # memory in MiB (0 on GPUs given whole, whose memory is unknown), vGPU slots.
        self._gpu_free_milli: IntArray = np.zeros((0, MAX_GPUS_PER_NODE), np.int64)
        self._gpu_memory: IntArray = np.zeros_like(self._gpu_free_milli)
        self._gpu_free_memory: IntArray = np.zeros_like(self._gpu_free_milli)
        self._gpu_slots: IntArray = np.zeros_like(self._gpu_free_milli)
        self._gpu_free_slots: IntArray = np.zeros_like(self._gpu_free_milli)
        # HAMi nodes share GPUs; the others give them whole.
        self._gpu_sharing: BoolArray = np.zeros(0, np.bool_)
        self._gpu_model_id: IntArray = np.zeros(0, np.int64)
        self.gpu_models: list[str] = []
        # Set from a state-wide clock on every change to a node's row, so a cache that
        # remembers a row's version can tell it is stale (versions are never reused).
        self._node_version: IntArray = np.zeros(0, np.int64)
        self._clock = 0
        self.placements: dict[str, Placement] = {}
        self.pods_on_node: list[dict[str, Pod]] = []
        # Keys of placed pods with required pod anti-affinity: InterPodAffinity must check
        # them against every incoming pod, and skips when there are none.
        self.anti_affinity_pod_keys: set[str] = set()
        # Keys of placed pods with any pod affinity or anti-affinity term, required or
        # preferred (kube's ``PodsWithAffinity``): the InterPodAffinity score reads their
        # terms for every incoming pod.
        self.affinity_pod_keys: set[str] = set()
        # The placed pods being deleted (``deletionTimestamp`` set), grouped alike:
        # PodTopologySpread does not count them (kube's countPodsMatchSelector, #87621).
        self.terminating = PodGroups()
        # The placed pods grouped by namespace, labels and affinity terms, per node row.
        self.pod_groups = PodGroups()
        # Claims, volumes, classes and CSI limits (empty in trace replays).
        self.volumes = VolumeCatalog()
        # DRA's DeviceClasses, ResourceSlices and ResourceClaims (empty in trace replays).
        self.dra = DraCatalog()
        # DeviceClasses whose devices are whole GPUs (``scheduler.dra.gpu_view``): a node
        # without device-plugin GPUs shows its devices of these classes as its GPU rows.
        # Empty: DRA devices are no GPUs to the scores.
        self.dra_gpu_classes: frozenset[str] = frozenset()
        # Per node name, the DRA GPUs its rows show: (model, free per GPU).
        self.dra_gpus: dict[str, tuple[str, tuple[bool, ...]]] = {}
        # Bumped when nodes are added or removed or their labels/taints change.
        self.topology_version = 0
        self._size = 0
        self._masks: dict[Hashable, BoolArray] = {}
        self._gpu_masks: dict[Hashable, BoolArray] = {}
        self._domains: dict[str, LabelDomains] = {}
        self._masks_version = -1
        for name in resources:
            self._column(name)
        for node in nodes:
            self.add_node(node)

    # ---- nodes -------------------------------------------------------------------

    def __len__(self) -> int:
        return self._size

    def _column(self, name: str) -> int:
        index = self.resource_index.get(name)
        if index is None:
            index = len(self.resource_names)
            self.resource_names.append(name)
            self.resource_index[name] = index
            pad = np.zeros((self._allocatable.shape[0], 1), np.int64)
            self._allocatable = np.hstack([self._allocatable, pad])
            self._requested = np.hstack([self._requested, pad])
        return index

    def _grow(self) -> None:
        capacity = max(16, 2 * self._allocatable.shape[0])

        def grown(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
            out = np.zeros((capacity, *array.shape[1:]), array.dtype)
            out[: array.shape[0]] = array
            return out

        self._allocatable = grown(self._allocatable)
        self._requested = grown(self._requested)
        self._nonzero_requested = grown(self._nonzero_requested)
        self._gpu_count = grown(self._gpu_count)
        self._gpu_free_milli = grown(self._gpu_free_milli)
        self._gpu_memory = grown(self._gpu_memory)
        self._gpu_free_memory = grown(self._gpu_free_memory)
        self._gpu_slots = grown(self._gpu_slots)
        self._gpu_free_slots = grown(self._gpu_free_slots)
        self._gpu_sharing = grown(self._gpu_sharing)
        self._gpu_model_id = grown(self._gpu_model_id)
        self._node_version = grown(self._node_version)

    def _model_id(self, model: str) -> int:
        if not model:
            return -1
        if model not in self.gpu_models:
            self.gpu_models.append(model)
        return self.gpu_models.index(model)

    def add_node(self, node: Node) -> int:
        """Add ``node`` (or update it in place when its name is known)."""
        if node.name in self.node_index:
            return self.update_node(node)
        for name in node.allocatable:
            self._column(name)
        if self._size == self._allocatable.shape[0]:
            self._grow()
        i = self._size  # its rows are all zero (``remove_node`` leaves them so)
        self._size += 1
        self.nodes.append(node)
        self.node_index[node.name] = i
        self.pods_on_node.append({})
        self._write_node_row(i, node, zeroed=True)
        self._free_gpus(i)
        self.topology_version += 1
        return i

    def _write_node_row(self, i: int, node: Node, zeroed: bool = False) -> None:
        allocatable = self._allocatable[i]
        if not zeroed:
            allocatable[:] = 0
        for name, amount in node.allocatable.items():
            allocatable[self.resource_index[name]] = amount
        self._gpu_count[i] = node.gpu_count
        self._gpu_sharing[i] = node.gpu_sharing
        self._gpu_model_id[i] = self._model_id(node.gpu_model)
        self._touch(i)

    def _zero_gpu_rows(self, i: int) -> None:
        for array in (
            self._gpu_free_milli,
            self._gpu_memory,
            self._gpu_free_memory,
            self._gpu_slots,
            self._gpu_free_slots,
        ):
            array[i] = 0

    def _reset_gpus(self, i: int) -> None:
        """Node ``i``'s GPUs all free."""
        self._zero_gpu_rows(i)
        self._free_gpus(i)

    def _free_gpus(self, i: int) -> None:
        """Node ``i``'s GPUs all free, its GPU rows zero before."""
        gpus = self.nodes[i].gpus
        count = len(gpus)
        if not count:
            return
        self._gpu_free_milli[i, :count] = MILLI_PER_GPU
        self._gpu_memory[i, :count] = [g.memory_mib for g in gpus]
        self._gpu_free_memory[i, :count] = self._gpu_memory[i, :count]
        self._gpu_slots[i, :count] = [g.slots for g in gpus]
        self._gpu_free_slots[i, :count] = self._gpu_slots[i, :count]

    def update_node(self, node: Node) -> int:
        """New allocatable, labels or taints for a known node; its pods stay."""
        i = self.node_index[node.name]
        for name in node.allocatable:
            self._column(name)
        old = self.nodes[i]
        self.nodes[i] = node
        self._write_node_row(i, node)
        gpus_changed = node.gpus != old.gpus or node.gpu_sharing != old.gpu_sharing
        if gpus_changed:
            self._rebuild_gpus(i, old.gpus)
        if node.name in self.dra_gpus:
            if node.gpus:
                del self.dra_gpus[node.name]  # device-plugin GPUs come first
            else:
                self._write_dra_gpus(i)
        if (
            gpus_changed
            or node.labels != old.labels
            or node.taints != old.taints
            or node.unschedulable != old.unschedulable
        ):
            self.topology_version += 1
        return i

    def _touch(self, i: int) -> None:
        self._clock += 1
        self._node_version[i] = self._clock

    def _rebuild_gpus(self, i: int, old_gpus: tuple[Gpu, ...]) -> None:
        """The node's GPUs changed: its pods keep the GPUs they hold, found by UUID (by
        index where the GPUs have none); what no longer exists is let go."""
        self._reset_gpus(i)
        gpus = self.nodes[i].gpus
        by_uuid = {g.uuid: k for k, g in enumerate(gpus) if g.uuid}
        for key in list(self.pods_on_node[i]):
            placement = self.placements[key]
            kept = []
            for use in placement.gpu_use:
                uuid = use.uuid or (old_gpus[use.index].uuid if use.index < len(old_gpus) else "")
                index = by_uuid.get(uuid, -1) if uuid else (use.index if use.index < len(gpus) else -1)
                if index >= 0:
                    kept.append(replace(use, index=index, uuid=uuid))
            self.placements[key] = replace(
                placement, gpu_indices=tuple(u.index for u in kept), gpu_use=tuple(kept)
            )
            self._take(i, kept, 1)

    def _node_rows(self) -> tuple[npt.NDArray[Any], ...]:
        """The arrays with a row per node."""
        return (
            self._allocatable,
            self._requested,
            self._nonzero_requested,
            self._gpu_count,
            self._gpu_free_milli,
            self._gpu_memory,
            self._gpu_free_memory,
            self._gpu_slots,
            self._gpu_free_slots,
            self._gpu_sharing,
            self._gpu_model_id,
        )

    def remove_node(self, name: str) -> list[Pod]:
        """Drop a node; returns the pods that were on it (they are no longer placed)."""
        i = self.node_index.pop(name)
        self.dra_gpus.pop(name, None)
        orphans = list(self.pods_on_node[i].values())
        for pod in orphans:
            del self.placements[pod.key]
            self.pod_groups.remove(pod.key)
            self.anti_affinity_pod_keys.discard(pod.key)
            self.affinity_pod_keys.discard(pod.key)
            if pod.key in self.terminating:
                self.terminating.remove(pod.key)
        last = self._size - 1
        if i != last:
            moved = self.nodes[last]
            self.nodes[i] = moved
            self.node_index[moved.name] = i
            self.pods_on_node[i] = self.pods_on_node[last]
            for pod in self.pods_on_node[i].values():
                self.pod_groups.move(pod, i)
                if pod.key in self.terminating:
                    self.terminating.move(pod, i)
            for array in self._node_rows():
                array[i] = array[last]
            self._touch(i)
        for array in self._node_rows():
            array[last] = 0  # the rows past the last node stay zero (``add_node``)
        self.nodes.pop()
        self.pods_on_node.pop()
        self._size -= 1
        self.topology_version += 1
        return orphans

    def set_dra_gpus(self, name: str, model: str, free: tuple[bool, ...]) -> bool:
        """Node ``name``'s GPUs from DRA: ``free[k]`` whether its k-th is free (none: it
        has none), all of type ``model``. Ignored on a node with device-plugin GPUs.
        True when its rows changed (its version moves, so cached scores are redone)."""
        i = self.node_index.get(name)
        if i is None or self.nodes[i].gpus:
            return False
        view = (model, free[:MAX_GPUS_PER_NODE])
        if self.dra_gpus.get(name, ("", ())) == view:
            return False
        if view[1]:
            self.dra_gpus[name] = view
        else:
            self.dra_gpus.pop(name, None)
        self._write_dra_gpus(i)
        return True

    def _write_dra_gpus(self, i: int) -> None:
        """Node ``i``'s GPU rows from ``dra_gpus``: whole GPUs, free or taken."""
        model, free = self.dra_gpus.get(self.nodes[i].name, ("", ()))
        self._zero_gpu_rows(i)
        count = len(free)
        self._gpu_count[i] = count
        self._gpu_sharing[i] = False
        self._gpu_model_id[i] = self._model_id(model) if count else -1
        self._gpu_free_milli[i, :count] = [MILLI_PER_GPU if f else 0 for f in free]
        self._gpu_slots[i, :count] = 1
        self._gpu_free_slots[i, :count] = [int(f) for f in free]
        self._touch(i)

    # ---- pods --------------------------------------------------------------------

    def request_vector(self, pod: Pod) -> IntArray:
        """The pod's request as a row over ``resource_names`` (``pods`` counts 1)."""
        row = np.zeros(len(self.resource_names), np.int64)
        for name, amount in pod.requests.items():
            index = self.resource_index.get(name)
            if index is not None:
                row[index] = amount
        row[self.resource_index[PODS]] = 1
        return row

    def gpu_use(self, pod: Pod, node: int, gpu_indices: tuple[int, ...]) -> tuple[GpuUse, ...]:
        """What ``pod`` takes of each of ``gpu_indices`` on node row ``node``."""
        gpus = self.nodes[node].gpus
        return tuple(
            GpuUse(
                g,
                pod.gpu.milli_per_gpu,
                pod.gpu.memory_on(int(self._gpu_memory[node, g])),
                1,
                gpus[g].uuid if g < len(gpus) else "",
            )
            for g in gpu_indices
        )

    def _take(self, i: int, usage: Iterable[GpuUse], sign: int) -> None:
        for use in usage:
            self._gpu_free_milli[i, use.index] -= sign * use.milli
            self._gpu_free_memory[i, use.index] -= sign * use.memory_mib
            self._gpu_free_slots[i, use.index] -= sign * use.slots

    def place(
        self,
        pod: Pod,
        node: str,
        gpu_indices: tuple[int, ...] = (),
        usage: tuple[GpuUse, ...] | None = None,
    ) -> None:
        """Account for ``pod`` on ``node`` using the GPUs ``gpu_indices`` (each giving
        the pod's request), or holding ``usage`` when given (what its allocation
        annotation says, whoever placed it)."""
        if pod.key in self.placements:
            raise StateError(f"pod {pod.key} is already placed on {self.placements[pod.key].node}")
        i = self.node_index.get(node)
        if i is None:
            raise StateError(f"pod {pod.key}: node {node!r} is not in the cluster state")
        if usage is None:
            if len(gpu_indices) != pod.gpu.count or len(set(gpu_indices)) != len(gpu_indices):
                raise StateError(
                    f"pod {pod.key}: needs {pod.gpu.count} distinct GPU indices, got {gpu_indices}"
                )
            usage = self.gpu_use(pod, i, gpu_indices)
        count = int(self._gpu_count[i])
        if any(not 0 <= use.index < count for use in usage):
            raise StateError(f"pod {pod.key}: GPU indices {[u.index for u in usage]} on a node with {count}")
        for name in pod.requests:
            self._column(name)
        self._requested[i] += self.request_vector(pod)
        self._nonzero_requested[i, 0] += pod.nonzero_cpu_milli
        self._nonzero_requested[i, 1] += pod.nonzero_memory
        self._take(i, usage, 1)
        self._touch(i)
        self.placements[pod.key] = Placement(pod, node, tuple(u.index for u in usage), usage)
        self.pods_on_node[i][pod.key] = pod
        self.pod_groups.add(pod, i)
        if pod.pod_anti_affinity.required:
            self.anti_affinity_pod_keys.add(pod.key)
        if pod.has_pod_affinity_terms:
            self.affinity_pod_keys.add(pod.key)
        if pod.terminating:
            self.terminating.add(pod, i)

    def relabel(self, pod_key: str, labels: Mapping[str, str]) -> Pod:
        """New labels for a placed pod (the API server of Kubernetes 1.36 copies the
        node's topology labels onto a pod it binds: PodTopologyLabelsAdmission); its
        resources and GPUs stay. No node version moves: what is cached by version
        depends on resources, and the plugins that read pod labels (affinity, spread)
        read ``pods_on_node`` each cycle."""
        return self.amend(pod_key, labels=dict(labels))

    def amend(self, pod_key: str, **changes: Any) -> Pod:
        """A placed pod with some fields changed that no resource depends on (labels;
        the lifecycle preemption reads: start time, terminating); nothing is re-counted."""
        placement = self.placements[pod_key]
        pod = replace(placement.pod, **changes)
        self.placements[pod_key] = replace(placement, pod=pod)
        i = self.node_index[placement.node]
        self.pods_on_node[i][pod_key] = pod
        self.pod_groups.move(pod, i)
        if pod_key in self.terminating:
            self.terminating.remove(pod_key)
        if pod.terminating:
            self.terminating.add(pod, i)
        return pod

    def remove(self, pod_key: str) -> Placement:
        """Release a placed pod's resources; returns where it was."""
        placement = self.placements.pop(pod_key)
        i = self.node_index[placement.node]
        pod = placement.pod
        self._requested[i] -= self.request_vector(pod)
        self._nonzero_requested[i, 0] -= pod.nonzero_cpu_milli
        self._nonzero_requested[i, 1] -= pod.nonzero_memory
        self._take(i, placement.gpu_use, -1)
        self._touch(i)
        del self.pods_on_node[i][pod_key]
        self.pod_groups.remove(pod_key)
        self.anti_affinity_pod_keys.discard(pod_key)
        self.affinity_pod_keys.discard(pod_key)
        if pod_key in self.terminating:
            self.terminating.remove(pod_key)
        return placement

    # ---- views -------------------------------------------------------------------

    # Views of the live rows (the arrays keep spare capacity for added nodes).
    @property
    def allocatable(self) -> IntArray:
        """``[N, R]`` allocatable per node and resource."""
        return self._allocatable[: self._size]

    @property
    def requested(self) -> IntArray:
        """``[N, R]`` sum of placed pods' requests (``pods`` counts pods)."""
        return self._requested[: self._size]

    @property
    def nonzero_requested(self) -> IntArray:
        """``[N, 2]`` CPU milli and memory bytes with the scoring defaults."""
        return self._nonzero_requested[: self._size]

    @property
    def gpu_count(self) -> IntArray:
        return self._gpu_count[: self._size]

    @property
    def gpu_free_milli(self) -> IntArray:
        """``[N, MAX_GPUS]`` free share of each GPU; slots past ``gpu_count`` are 0."""
        return self._gpu_free_milli[: self._size]

    @property
    def gpu_memory(self) -> IntArray:
        """``[N, MAX_GPUS]`` memory of each GPU, MiB (0: a GPU given whole)."""
        return self._gpu_memory[: self._size]

    @property
    def gpu_free_memory(self) -> IntArray:
        return self._gpu_free_memory[: self._size]

    @property
    def gpu_slots(self) -> IntArray:
        """``[N, MAX_GPUS]`` vGPU slots of each GPU (1 on a GPU given whole)."""
        return self._gpu_slots[: self._size]

    @property
    def gpu_free_slots(self) -> IntArray:
        return self._gpu_free_slots[: self._size]

    @property
    def gpu_sharing(self) -> BoolArray:
        """``[N]`` whether the node's GPUs are HAMi's, which take shares."""
        return self._gpu_sharing[: self._size]

    @property
    def gpu_model_id(self) -> IntArray:
        """Index into ``gpu_models``; -1 where the node has no known model."""
        return self._gpu_model_id[: self._size]

    @property
    def node_version(self) -> IntArray:
        return self._node_version[: self._size]

    @property
    def clock(self) -> int:
        """The newest ``node_version`` given: it moves whenever any node changes."""
        return self._clock

    def column(self, name: str) -> int | None:
        return self.resource_index.get(name)

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def gpu_exists(self) -> BoolArray:
        """``[N, MAX_GPUS]`` mask of GPU slots that exist on each node."""
        return np.arange(MAX_GPUS_PER_NODE)[None, :] < self.gpu_count[:, None]

    def node_mask(self, key: Hashable, predicate: Callable[[Node], bool]) -> BoolArray:
        """``predicate`` over all nodes, memoised under ``key`` until labels, taints or
        the node set change. Filters use it for label and taint matching."""
        self._expire_node_caches()
        mask = self._masks.get(key)
        if mask is None:
            mask = np.fromiter((predicate(n) for n in self.nodes), np.bool_, self._size)
            self._masks[key] = mask
        return mask

    def gpu_mask(self, key: Hashable, predicate: Callable[[Gpu], bool]) -> BoolArray:
        """``[N, MAX_GPUS]``: ``predicate`` over every GPU (False past ``gpu_count``),
        memoised under ``key`` like ``node_mask``. The GPU filter matches types, UUIDs
        and modes with it."""
        self._expire_node_caches()
        mask = self._gpu_masks.get(key)
        if mask is None:
            mask = np.zeros((self._size, MAX_GPUS_PER_NODE), np.bool_)
            for i, node in enumerate(self.nodes):
                for g, gpu in enumerate(node.gpus):
                    mask[i, g] = predicate(gpu)
            mask.flags.writeable = False
            self._gpu_masks[key] = mask
        return mask

    def label_domains(self, key: str) -> LabelDomains:
        """The nodes' values of label ``key`` as small integers, memoised like
        ``node_mask``. Topology filters count pods per domain with ``np.bincount``."""
        self._expire_node_caches()
        domains = self._domains.get(key)
        if domains is None:
            index: dict[str, int] = {}
            values = (n.labels.get(key) for n in self.nodes)
            ids = np.fromiter(
                (-1 if v is None else index.setdefault(v, len(index)) for v in values),
                np.int64,
                self._size,
            )
            ids.flags.writeable = False  # shared by every caller until the topology changes
            domains = self._domains[key] = LabelDomains(ids, index)
        return domains

    def _expire_node_caches(self) -> None:
        stale = self._masks_version != self.topology_version
        if stale or len(self._masks) + len(self._domains) + len(self._gpu_masks) > _MAX_MASKS:
            self._masks.clear()
            self._domains.clear()
            self._gpu_masks.clear()
            self._masks_version = self.topology_version

    def pods(self) -> Iterator[Placement]:
        return iter(self.placements.values())

    def allocated_gpu_milli(self) -> int:
        exists = self.gpu_exists()
        free = np.where(exists, self.gpu_free_milli, 0)
        return int(self.gpu_count.sum() * MILLI_PER_GPU - free.sum())

    def totals(self) -> Mapping[str, tuple[int, int]]:
        """Per resource: (requested, allocatable) summed over nodes."""
        return {
            name: (int(self.requested[:, j].sum()), int(self.allocatable[:, j].sum()))
            for j, name in enumerate(self.resource_names)
        }
