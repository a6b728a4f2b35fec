"""GPUs that come from DRA, as the GPU profiles see them (FGD, fgd-reserve, the learned
policy's features): whole GPUs in the cluster state's GPU rows, and a DRA pod's claims
as a whole-GPU request.

Which devices are GPUs: those of the DeviceClasses named in ``ClusterState.
dra_gpu_classes`` (the setting ``RL_SCHEDULER_DRA_GPU_CLASSES``; by default
``gpu.nvidia.com``, the class NVIDIA's DRA driver installs for its full GPUs). A class
names what a driver means by a device better than guessing from attributes would, and
an operator can name other vendors' classes. MIG partitions (``mig.nvidia.com``) and
shares are not whole GPUs and are not shown.

The node side (``sync_dra_gpus``): a node without device-plugin GPUs (no HAMi devices,
no ``nvidia.com/gpu``) shows its devices of those classes as its GPUs, one whole GPU
each, of the model their ``productName`` attribute names (the first device's; empty if
none), free unless the catalog's ``in_use`` set (allocated claims and this scheduler's
in-flight allocations) holds it. The catalog stays the one owner of DRA occupancy:
pods placed in the state never hold these rows, so no pod holds a DRA GPU twice, and a
claim allocated by anyone (kube-scheduler, another replica) shows as taken. Call it
after every change of the catalog or of the nodes: it recomputes which devices each
node has only when the slices, the GPU classes or the nodes changed, and rewrites only
the rows that changed (their node versions move, so cached scores are redone).

The pod side (``scoring_pod``): a pod without a GPU request of its own whose
unallocated claims ask for devices of those classes is scored as a pod asking for as
many whole GPUs: ``ExactCount`` requests their count, a ``firstAvailable`` request its
first alternative (the one the DynamicResources score prefers). Only the score plugins
read this view; filters (the DynamicResources filter decides fit), GPU choice and
``ClusterState.place`` keep the pod as written, so nothing is demanded or taken twice.
Not covered: ``All`` requests and ``adminAccess`` ones (no count to score; they add
nothing), GPU shares through DRA, a claim already allocated (its devices are taken
already: it adds nothing).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from scheduler.dra.catalog import ClaimLookupError
from scheduler.dra.constraints import DeviceId
from scheduler.dra.free_devices import node_devices
from scheduler.dra.objects import Attribute, DeviceClass, DeviceRequestSpec, ResourceSlice
from scheduler.objects.pod import Pod
from scheduler.resources.gpu import MAX_GPUS_PER_NODE, MILLI_PER_GPU, GpuRequest
from scheduler.state.cluster_state import ClusterState

# deployments/helm/.../deviceclass-gpu.yaml of NVIDIA's k8s-dra-driver-gpu.
DEFAULT_GPU_CLASSES: Final = ("gpu.nvidia.com",)
MODEL_ATTRIBUTE: Final = "productName"


@dataclass(slots=True)
class _Listing:
    """Which GPU devices each node has (name -> model, devices), and the slices (and
    the catalog's ``slices_generation`` then) and classes that was computed from."""

    slices: dict[str, ResourceSlice]
    generation: int
    classes: tuple[DeviceClass, ...]
    nodes: dict[str, tuple[str, tuple[DeviceId, ...]]] = field(default_factory=dict)


_LISTINGS: weakref.WeakKeyDictionary[ClusterState, _Listing] = weakref.WeakKeyDictionary()


def _model(attributes: Mapping[str, Attribute], driver: str) -> str:
    for key in (MODEL_ATTRIBUTE, f"{driver}/{MODEL_ATTRIBUTE}"):
        attribute = attributes.get(key)
        if attribute is not None and attribute.kind == "string":
            return str(attribute.value)
    return ""


def _concerned(old: Mapping[str, ResourceSlice], new: Mapping[str, ResourceSlice]) -> set[str] | None:
    """The nodes whose devices may differ between two sets of slices; None: any node
    (a changed slice selects its nodes by selector, or all of them)."""
    nodes: set[str] = set()
    for key in old.keys() | new.keys():
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        for s in (before, after):
            if s is None:
                continue
            if not s.node_name:
                return None
            nodes.add(s.node_name)
    return nodes


def _list_nodes(state: ClusterState, listing: _Listing, names: Iterable[str]) -> None:
    """Recompute ``listing.nodes`` for ``names`` (absent ones and nodes with
    device-plugin GPUs are dropped)."""
    labels: dict[str, Mapping[str, str]] = {}
    for name in names:
        i = state.node_index.get(name)
        listing.nodes.pop(name, None)
        if i is not None and not state.nodes[i].gpus:
            labels[name] = state.nodes[i].labels
    if not labels or not listing.slices or not listing.classes:
        return
    found: dict[str, dict[DeviceId, str]] = {}
    for cls in listing.classes:
        for name, of_class in node_devices(cls, listing.slices.values(), labels).items():
            for d in of_class:
                found.setdefault(name, {}).setdefault(d.id, _model(d.device.attributes, d.id[0]))
    for name, devices in found.items():
        ids = tuple(devices)[:MAX_GPUS_PER_NODE]
        listing.nodes[name] = (devices[ids[0]], ids)


def _listing(state: ClusterState, names: Iterable[str]) -> _Listing:
    catalog = state.dra
    classes = tuple(catalog.classes[n] for n in sorted(state.dra_gpu_classes) if n in catalog.classes)
    old = _LISTINGS.get(state)
    if old is None or old.classes != classes:
        listing = _LISTINGS[state] = _Listing(dict(catalog.slices), catalog.slices_generation, classes)
        _list_nodes(state, listing, state.node_index)
        return listing
    if old.generation != catalog.slices_generation:
        # Slice by slice once per change, not at every call: comparing every slice
        # with its copy at every call cost 11.8 ms of CPU a call at 1,000 nodes once a
        # relist had replaced the slices with equal copies (benchmarks/dra_gpu_view.py).
        concerned = _concerned(old.slices, catalog.slices)
        old.slices = dict(catalog.slices)
        old.generation = catalog.slices_generation
        _list_nodes(state, old, state.node_index if concerned is None else concerned | set(names))
    else:
        _list_nodes(state, old, names)
    return old


def sync_dra_gpus(state: ClusterState, nodes: Iterable[str] = ()) -> list[str]:
    """Rewrite the GPU rows of the nodes whose DRA GPUs changed; returns their names.
    Call it after the catalog changed, and with ``nodes`` after those nodes were added,
    changed or removed."""
    if not state.dra_gpu_classes and not state.dra_gpus:
        return []
    listing = _listing(state, nodes)
    in_use = state.dra.in_use() if listing.nodes else set()
    changed = []
    for name in sorted(set(listing.nodes) | set(state.dra_gpus)):
        model, ids = listing.nodes.get(name, ("", ()))
        if state.set_dra_gpus(name, model, tuple(i not in in_use for i in ids)):
            changed.append(name)
    return changed


def _whole_gpus(spec: DeviceRequestSpec | None, classes: frozenset[str]) -> int:
    if spec is None or spec.device_class_name not in classes or spec.admin_access:
        return 0
    return spec.count if spec.allocation_mode == "ExactCount" else 0


def dra_gpu_count(state: ClusterState, pod: Pod) -> int:
    """Whole GPUs the pod's unallocated claims ask for (0 when its claims are unknown)."""
    classes = state.dra_gpu_classes
    if not pod.resource_claims or not classes:
        return 0
    try:
        claims = state.dra.pod_claims(pod.namespace, pod.name, pod.resource_claims)
    except ClaimLookupError:
        return 0
    count = 0
    for claim in claims:
        if claim.allocation is not None:
            continue
        for request in claim.spec.requests:
            first = request.first_available[0] if request.first_available else None
            count += _whole_gpus(request.exactly or first, classes)
    return min(count, MAX_GPUS_PER_NODE)


def scoring_pod(state: ClusterState, pod: Pod) -> Pod:
    """``pod`` as the GPU scores see it: a DRA GPU pod asks for its whole GPUs."""
    if pod.gpu.count or not pod.resource_claims:
        return pod
    count = dra_gpu_count(state, pod)
    if not count:
        return pod
    return replace(pod, gpu=GpuRequest(count=count, milli_per_gpu=MILLI_PER_GPU, memory_percent=100))
