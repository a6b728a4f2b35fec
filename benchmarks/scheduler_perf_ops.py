"""The operations of a kube scheduler_perf test case as this benchmark runs them, and
the plan of a test case at one size (``scheduler_perf_plan`` makes them from kube's
configs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NodesOp:
    count: int
    template: dict[str, Any]
    # labelNodePrepareStrategy: the label every node gets, with one of these values.
    label_key: str = ""
    label_values: tuple[str, ...] = ()
    # nodeAllocatableStrategy: more allocatable on each node, and a CSINode per node with
    # these drivers' allocatable ({"count": n}) and migrated in-tree plugins.
    allocatable: dict[str, str] = field(default_factory=dict)
    csi_allocatable: dict[str, dict[str, int]] = field(default_factory=dict)
    migrated_plugins: tuple[str, ...] = ()


@dataclass(frozen=True)
class NamespacesOp:
    names: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)  # from namespaceTemplatePath


@dataclass(frozen=True)
class AnyOp:
    """``createAny``: objects of one of ``ANY_KINDS``, rendered from their template."""

    namespace: str  # "" for a cluster-scoped kind
    resource: str
    manifests: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class PodsOp:
    count: int
    namespace: str
    template: dict[str, Any]
    measured: bool
    # persistentVolume(Claim)TemplatePath: each pod gets its own claim, bound to its own
    # volume, both made before the pod (kube's CreatePodWithPersistentVolume).
    volume: dict[str, Any] | None = None
    claim: dict[str, Any] | None = None
    # skipWaitToCompletion: nobody waits for these pods (gated ones, ones deleted while
    # they are scheduled): made in each run, for the scheduler under test, before its
    # measured pods; they are neither placed beforehand nor measured.
    background: bool = False


@dataclass(frozen=True)
class BarrierOp:
    """``barrier``: the pods made before it were ``Scheduled`` (or ``Attempted``) before
    the pods after it are made."""

    stage: str


@dataclass(frozen=True)
class DeletePodsOp:
    """``deletePods``: the namespace's pods deleted while the measured pods are scheduled,
    ``per_second`` a second (0: all at once)."""

    namespace: str
    per_second: float


@dataclass(frozen=True)
class ChurnOp:
    """``churn`` while the measured pods are scheduled: every interval, one object of each
    template is made (``create``, up to ``number`` rounds, 0: no limit), or made and, a
    round of ``number`` later, deleted (``recreate``)."""

    mode: str
    number: int
    interval_s: float
    namespace: str
    templates: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class ResourceDriverOp:
    """``createResourceDriver``: a ResourceSlice of ``max_claims`` devices of ``driver`` for
    each node whose kube name (its template's ``generateName``, or ``name``) matches
    ``nodes``, a glob (``scheduler_perf_dra``)."""

    driver: str
    max_claims: int
    nodes: str


@dataclass(frozen=True)
class AllocClaimsOp:
    """``allocResourceClaims``: the namespace's claims allocated by the harness itself, one
    at a time, each on a node picked at random among those with a free device."""

    namespace: str


Op = (
    NodesOp
    | NamespacesOp
    | PodsOp
    | AnyOp
    | BarrierOp
    | DeletePodsOp
    | ChurnOp
    | ResourceDriverOp
    | AllocClaimsOp
)


@dataclass
class Plan:
    case: str
    workload: str  # the kube workload it was sized from
    nodes: int
    ops: list[Op] = field(default_factory=list)

    @property
    def measured_pods(self) -> int:
        return sum(op.count for op in self.ops if isinstance(op, PodsOp) and op.measured)

    @property
    def priorities(self) -> set[int]:
        """Every ``spec.priority`` of a pod template (a PriorityClass each, see
        ``scheduler_perf_objects``)."""
        templates = [op.template for op in self.ops if isinstance(op, PodsOp)]
        templates += [t for op in self.ops if isinstance(op, ChurnOp) for t in op.templates]
        return {
            int(t["spec"]["priority"])
            for t in templates
            if t.get("kind", "Pod") == "Pod" and "priority" in (t.get("spec") or {})
        }

    @property
    def replaces_init(self) -> bool:
        """Whether a run may remove init pods (preemption, ``deletePods``, churned pods):
        each run then gets its own, placed anew."""
        return self.preempts or any(isinstance(op, DeletePodsOp | ChurnOp) for op in self.ops)

    @property
    def barrier_stage(self) -> str:
        """The stage of a ``barrier`` after background pods and before measured ones ("":
        none; measured pods are then made before the scheduler under test starts)."""
        seen_background = False
        for op in self.ops:
            if isinstance(op, PodsOp) and op.background:
                seen_background = True
            elif isinstance(op, BarrierOp) and seen_background:
                return op.stage
            elif isinstance(op, PodsOp) and op.measured:
                return ""
        return ""

    @property
    def preempts(self) -> bool:
        """Whether measured pods outrank init pods (they may evict them: a run needs its
        own init pods)."""

        def priority(op: PodsOp) -> int:
            return int((op.template.get("spec") or {}).get("priority", 0))

        pods = [op for op in self.ops if isinstance(op, PodsOp)]
        measured = [priority(op) for op in pods if op.measured]
        init = [priority(op) for op in pods if not op.measured]
        return bool(measured and init) and max(measured) > min(init)
