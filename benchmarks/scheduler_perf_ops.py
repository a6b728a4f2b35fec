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
    text: str = ""  # as PodsOp.text


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
    # ``steadyState``: for this many seconds, the batch of ``count`` pods deleted once
    # bound and made anew (``scheduler_perf_steady``); 0: made once
    steady_s: float = 0.0
    # kube's text/template of the pod when its actions are not only inside strings
    # (``memory: {{DivideInt 30000 .Count}}Mi``): rendered per pod, then read as YAML
    text: str = ""


@dataclass(frozen=True)
class BarrierOp:
    """``barrier``: the pods made before it (those of ``namespaces`` with the labels of
    ``selector``, when given) were ``Scheduled`` (or ``Attempted``) before the operations
    after it run."""

    stage: str
    selector: dict[str, str] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeletePodsOp:
    """``deletePods``: the namespace's pods (those with the labels of ``selector``, when
    given) deleted while the measured pods are scheduled, ``per_second`` a second (0: all
    at once); with ``wait``, the operations after it wait until they are gone."""

    namespace: str
    per_second: float
    selector: dict[str, str] = field(default_factory=dict)
    wait: bool = False


@dataclass(frozen=True)
class MetricsOp:
    """``startCollectingMetrics`` (``collecting``) or ``stopCollectingMetrics``: the
    window over which the binds of the pods of ``namespaces`` (any, when empty) with the
    labels of ``selector`` are measured."""

    collecting: bool
    namespaces: tuple[str, ...] = ()
    selector: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class UpdateOp:
    """``updateAny``: objects ``0 .. count - 1`` of a pod or node template (``text``, kube's
    text/template, rendered per object) written over the ones there, ``per_second`` a
    second (0: at once); through ``subresource`` (``resize``) when given."""

    count: int
    kind: str  # "Pod" or "Node"
    namespace: str
    text: str
    per_second: float
    subresource: str = ""


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
    | MetricsOp
    | UpdateOp
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
    def in_sequence(self) -> bool:
        """Whether the case measures a metric window (kube's event-handling cases): its
        operations then run in order, each run from an empty cluster, with the scheduler
        under test running throughout (``scheduler_perf_sequence``)."""
        return any(isinstance(op, MetricsOp) for op in self.ops)

    @property
    def steady(self) -> tuple[int, PodsOp] | None:
        """The measured ``createPods`` in steady state, with its place, or None."""
        for index, op in enumerate(self.ops):
            if isinstance(op, PodsOp) and op.measured and op.steady_s > 0:
                return index, op
        return None

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
    def counts_only_grow(self) -> bool:
        """Whether the case only adds pods, and nodes before its first pods: nothing
        deleted (``deletePods``, churn, steady state), updated or added later, so the
        final placement still shows the skew each pod was placed under
        (``scheduler_perf_checks``)."""
        pods_made = False
        for op in self.ops:
            if isinstance(op, DeletePodsOp | ChurnOp | UpdateOp):
                return False
            if isinstance(op, PodsOp) and op.steady_s > 0:
                return False
            if isinstance(op, NodesOp) and pods_made:
                return False
            pods_made = pods_made or isinstance(op, PodsOp)
        return True

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
