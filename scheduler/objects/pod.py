"""The scheduler's view of a pod: what it requests and which constraints bind it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scheduler.objects.selectors import (
    NodeSelector,
    PodAffinity,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
)
from scheduler.objects.taints import Toleration
from scheduler.objects.volumes import InlineDisk, PodVolume
from scheduler.resources.gpu import NO_GPU, GpuRequest

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

# kube-scheduler scores a container without requests as if it asked for these
# (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
PREEMPTION_POLICIES: tuple[PreemptionPolicy, ...] = ("PreemptLowerPriority", "Never")


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        """NodePorts: same port and protocol, and the same or a wildcard host IP."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.host_ip == other.host_ip or "0.0.0.0" in (self.host_ip, other.host_ip)


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod as the filters and scores see it.

    ``requests`` holds canonical integers: CPU in millicores, memory and storage in
    bytes, extended resources in units. It already folds in init containers,
    sidecars, overhead and pod-level resources (``scheduler.resources.pod_request``).
    HAMi's per-GPU amounts (``nvidia.com/gpucores``, ``gpumem``, ``gpumem-percentage``)
    are not requests of the node: they are in ``gpu``, with ``nvidia.com/gpu``, which
    stays here too (the kubelet counts it).
    ``nonzero_cpu_milli``/``nonzero_memory`` are the scoring requests, where a
    container without a request counts as 100m / 200Mi.
    """

    name: str
    namespace: str = "default"
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, int] = field(default_factory=dict)
    nonzero_cpu_milli: int = 0
    nonzero_memory: int = 0
    gpu: GpuRequest = NO_GPU
    node_name: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_affinity: NodeSelector | None = None
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    pod_affinity: PodAffinity = field(default_factory=PodAffinity)
    pod_anti_affinity: PodAffinity = field(default_factory=PodAffinity)
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    priority: int = 0
    scheduler_name: str = "default-scheduler"
    scheduling_gates: tuple[str, ...] = ()
    # ``spec.schedulingGroup.podGroupName``: the Workload API's PodGroup the pod is in.
    scheduling_group: str = ""
    # Volumes through claims (PVCs, generic ephemeral), and inline disks that conflict.
    volumes: tuple[PodVolume, ...] = ()
    inline_disks: tuple[InlineDisk, ...] = ()
    # DRA: the ResourceClaims of ``spec.resourceClaims`` by name, in order; None: a
    # template's claim not created yet (``pod_manifest._resource_claims``).
    resource_claims: tuple[str | None, ...] = ()
    # Reasons we refuse to schedule the pod at all (features we do not support).
    unsupported: tuple[str, ...] = ()
    # What DefaultPreemption reads. ``spec.preemptionPolicy``: Never keeps the pod from
    # evicting others (it still queues by priority).
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    # ``status.nominatedNodeName``: the node a preemption cleared room on for this pod.
    nominated_node_name: str = ""
    # ``status.startTime`` in seconds since the epoch; None until the kubelet starts it.
    start_time: float | None = None
    # ``metadata.deletionTimestamp`` is set: the pod is being deleted.
    terminating: bool = False
    # ``status.conditions`` holds DisruptionTarget=True with reason PreemptionByScheduler:
    # a scheduler preempted it (kube counts only such terminating pods as a preemption
    # still under way).
    preempted_by_scheduler: bool = False
    # Where the pod came from, for trace replays and error messages.
    source: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def cpu_milli(self) -> int:
        return self.requests.get(CPU, 0)

    @property
    def memory(self) -> int:
        return self.requests.get(MEMORY, 0)

    @property
    def asks_for_nothing(self) -> bool:
        """Whether the pod requests no resource, no GPU and no device claim (a
        BestEffort pod without claims): nothing a packing policy could pack."""
        return not any(self.requests.values()) and self.gpu == NO_GPU and not self.resource_claims

    @property
    def has_pod_affinity_terms(self) -> bool:
        """Whether the pod has any pod affinity or anti-affinity term, required or preferred."""
        affinity, anti = self.pod_affinity, self.pod_anti_affinity
        return bool(affinity.required or affinity.preferred or anti.required or anti.preferred)

    @property
    def has_pod_constraints(self) -> bool:
        """Whether inter-pod affinity or topology spread can apply to this pod."""
        return bool(self.pod_affinity.required or self.pod_anti_affinity.required or self.topology_spread)
