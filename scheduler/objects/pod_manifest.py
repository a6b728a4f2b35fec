"""Build a ``Pod`` from a Kubernetes pod manifest (the API's camelCase JSON).

Every error names the pod (``namespace/name``) and the field path, e.g.
``default/web-1: spec.containers[0].resources.requests.cpu: quantity '1x' does not parse``.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime
from typing import Any

from scheduler.errors import SchedulerInputError
from scheduler.objects.fields import FieldReader, Manifest
from scheduler.objects.gpu_request import ContainerGpus, gpu_request
from scheduler.objects.pod import (
    CPU,
    PREEMPTION_POLICIES,
    HostPort,
    Pod,
    PreemptionPolicy,
)
from scheduler.objects.selectors import (
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from scheduler.objects.taints import Toleration
from scheduler.objects.volume_manifest import pod_volumes
from scheduler.resources.gpu import (
    GPU_CORES_RESOURCE,
    GPU_MEMORY_PERCENT_RESOURCE,
    GPU_MEMORY_RESOURCE,
    GPU_RESOURCE,
    PER_GPU_RESOURCES,
)
from scheduler.resources.pod_request import ContainerRequest, pod_requests
from scheduler.resources.quantity import ceil_int, ceil_milli, parse_quantity

# Larger than any node; keeps int64 arithmetic safe for absurd requests, which then
# fail NodeResourcesFit with "Insufficient ..." as they would in kube-scheduler.
MAX_AMOUNT = 1 << 60
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
# Go's time.RFC3339 as metav1.Time reads it: seconds, optional fraction, Z or an offset.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def resource_amounts(reader: FieldReader, raw: Any, path: str) -> dict[str, int]:
    """A ``ResourceList``: CPU in millicores, everything else in whole units, rounded up."""
    amounts: dict[str, int] = {}
    for name, text in reader.mapping(raw, path).items():
        amount = _known_amount(name, text) if type(text) is str else None
        if amount is None:
            value = parse_quantity(text, obj=reader.obj, field=f"{path}.{name}")
            if value < 0:
                raise reader.fail(f"{path}.{name}", f"must not be negative, got {text!r}")
            amount = min(ceil_milli(value) if name == CPU else ceil_int(value), MAX_AMOUNT)
        amounts[str(name)] = amount
    return amounts


@functools.lru_cache(maxsize=4096)
def _known_amount(name: str, text: str) -> int | None:
    """``resource_amounts``' canonical amount of a valid quantity string, None for one
    that is not (read again there, for its error): nodes and pods repeat a few pairs
    (``cpu: 500m``, ``memory: 256Gi``) thousands of times."""
    try:
        value = parse_quantity(text)
    except SchedulerInputError:
        return None
    if value < 0:
        return None
    return min(ceil_milli(value) if name == CPU else ceil_int(value), MAX_AMOUNT)


def _container(
    reader: FieldReader, raw: Any, path: str, *, init: bool
) -> tuple[ContainerRequest, ContainerGpus]:
    """The container's requests (without HAMi's per-GPU amounts, which no node
    advertises and the kubelet drops) and its GPU amounts."""
    item = reader.mapping(raw, path)
    resources = reader.mapping(item.get("resources"), f"{path}.resources")
    requests = resource_amounts(reader, resources.get("requests"), f"{path}.resources.requests")
    limits = resource_amounts(reader, resources.get("limits"), f"{path}.resources.limits")
    # API defaulting: a limit without a request makes the request equal to the limit.
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    per_gpu = {name: requests.pop(name) for name in PER_GPU_RESOURCES if name in requests}
    gpus = ContainerGpus(
        path=path,
        init=init,
        count=requests.get(GPU_RESOURCE, 0),
        cores=per_gpu.get(GPU_CORES_RESOURCE),
        memory_mib=per_gpu.get(GPU_MEMORY_RESOURCE),
        memory_percent=per_gpu.get(GPU_MEMORY_PERCENT_RESOURCE),
    )
    sidecar = init and reader.string(item.get("restartPolicy"), f"{path}.restartPolicy") == "Always"
    return ContainerRequest(requests, sidecar), gpus


def _host_ports(reader: FieldReader, spec: Manifest) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    for kind in ("initContainers", "containers"):
        for ci, container in enumerate(reader.sequence(spec.get(kind), f"spec.{kind}")):
            path = f"spec.{kind}[{ci}].ports"
            # Of the init containers only sidecars keep their ports (util.GetHostPorts).
            if kind == "initContainers" and reader.mapping(container, path).get("restartPolicy") != "Always":
                continue
            for pi, raw in enumerate(reader.sequence(reader.mapping(container, path).get("ports"), path)):
                port = reader.mapping(raw, f"{path}[{pi}]")
                host_port = reader.integer(port.get("hostPort"), f"{path}[{pi}].hostPort")
                if host_port <= 0:
                    continue
                protocol = reader.string(port.get("protocol"), f"{path}[{pi}].protocol", "TCP")
                if protocol not in _PROTOCOLS:
                    raise reader.fail(f"{path}[{pi}].protocol", f"unknown protocol {protocol!r}")
                host_ip = reader.string(port.get("hostIP"), f"{path}[{pi}].hostIP", "0.0.0.0")
                ports.append(HostPort(host_port, protocol, host_ip or "0.0.0.0"))  # type: ignore[arg-type]
    return tuple(ports)


def _tolerations(reader: FieldReader, raw: Any) -> tuple[Toleration, ...]:
    out: list[Toleration] = []
    for i, item in enumerate(reader.sequence(raw, "spec.tolerations")):
        path = f"spec.tolerations[{i}]"
        tol = reader.mapping(item, path)
        operator = reader.string(tol.get("operator"), f"{path}.operator", "Equal") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise reader.fail(f"{path}.operator", f"unknown operator {operator!r} (Equal or Exists)")
        effect = reader.string(tol.get("effect"), f"{path}.effect")
        if effect and effect not in _TAINT_EFFECTS:
            raise reader.fail(f"{path}.effect", f"unknown effect {effect!r}")
        out.append(
            Toleration(
                key=reader.string(tol.get("key"), f"{path}.key"),
                operator=operator,  # type: ignore[arg-type]
                value=reader.string(tol.get("value"), f"{path}.value"),
                effect=effect,  # type: ignore[arg-type]
            )
        )
    return tuple(out)


def _pod_affinity_term(reader: FieldReader, raw: Any, path: str) -> PodAffinityTerm:
    term = reader.mapping(raw, path)
    topology_key = reader.string(term.get("topologyKey"), f"{path}.topologyKey")
    if not topology_key:
        raise reader.fail(f"{path}.topologyKey", "must not be empty")
    namespaces = tuple(
        reader.string(n, f"{path}.namespaces[{i}]")
        for i, n in enumerate(reader.sequence(term.get("namespaces"), f"{path}.namespaces"))
    )
    keys = {
        name: tuple(
            reader.string(k, f"{path}.{name}[{i}]")
            for i, k in enumerate(reader.sequence(term.get(name), f"{path}.{name}"))
        )
        for name in ("matchLabelKeys", "mismatchLabelKeys")
    }
    return PodAffinityTerm(
        topology_key=topology_key,
        label_selector=reader.label_selector(term.get("labelSelector"), f"{path}.labelSelector"),
        namespaces=namespaces,
        namespace_selector=reader.label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector"),
        match_label_keys=keys["matchLabelKeys"],
        mismatch_label_keys=keys["mismatchLabelKeys"],
    )


def _pod_affinity(reader: FieldReader, raw: Any, path: str) -> PodAffinity:
    item = reader.mapping(raw, path)
    required_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    required = tuple(
        _pod_affinity_term(reader, t, f"{required_path}[{i}]")
        for i, t in enumerate(
            reader.sequence(item.get("requiredDuringSchedulingIgnoredDuringExecution"), required_path)
        )
    )
    preferred: list[WeightedPodAffinityTerm] = []
    for i, raw_term in enumerate(
        reader.sequence(item.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path)
    ):
        weighted = reader.mapping(raw_term, f"{preferred_path}[{i}]")
        weight = reader.integer(weighted.get("weight"), f"{preferred_path}[{i}].weight")
        if not 1 <= weight <= 100:
            raise reader.fail(f"{preferred_path}[{i}].weight", f"must be in 1..100, got {weight}")
        preferred.append(
            WeightedPodAffinityTerm(
                weight,
                _pod_affinity_term(
                    reader, weighted.get("podAffinityTerm"), f"{preferred_path}[{i}].podAffinityTerm"
                ),
            )
        )
    return PodAffinity(required, tuple(preferred))


def _node_affinity(reader: FieldReader, raw: Any) -> tuple[Any, tuple[PreferredSchedulingTerm, ...]]:
    path = "spec.affinity.nodeAffinity"
    item = reader.mapping(raw, path)
    required = reader.node_selector(
        item.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{path}.requiredDuringSchedulingIgnoredDuringExecution",
    )
    preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred: list[PreferredSchedulingTerm] = []
    for i, raw_term in enumerate(
        reader.sequence(item.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path)
    ):
        term = reader.mapping(raw_term, f"{preferred_path}[{i}]")
        weight = reader.integer(term.get("weight"), f"{preferred_path}[{i}].weight")
        if not 1 <= weight <= 100:
            raise reader.fail(f"{preferred_path}[{i}].weight", f"must be in 1..100, got {weight}")
        preference = reader.node_selector_term(term.get("preference"), f"{preferred_path}[{i}].preference")
        preferred.append(PreferredSchedulingTerm(weight, preference))
    return required, tuple(preferred)


def _topology_spread(reader: FieldReader, raw: Any) -> tuple[TopologySpreadConstraint, ...]:
    out: list[TopologySpreadConstraint] = []
    for i, item in enumerate(reader.sequence(raw, "spec.topologySpreadConstraints")):
        path = f"spec.topologySpreadConstraints[{i}]"
        c = reader.mapping(item, path)
        max_skew = reader.integer(c.get("maxSkew"), f"{path}.maxSkew")
        if max_skew < 1:
            raise reader.fail(f"{path}.maxSkew", f"must be at least 1, got {max_skew}")
        topology_key = reader.string(c.get("topologyKey"), f"{path}.topologyKey")
        if not topology_key:
            raise reader.fail(f"{path}.topologyKey", "must not be empty")
        when = reader.string(c.get("whenUnsatisfiable"), f"{path}.whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise reader.fail(
                f"{path}.whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway, got {when!r}"
            )
        min_domains = c.get("minDomains")
        if min_domains is not None:
            min_domains = reader.integer(min_domains, f"{path}.minDomains")
            if min_domains < 1:
                raise reader.fail(f"{path}.minDomains", f"must be at least 1, got {min_domains}")
            if when != "DoNotSchedule":
                raise reader.fail(
                    f"{path}.minDomains", "is only allowed with whenUnsatisfiable: DoNotSchedule"
                )
        policies = {}
        for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            value = reader.string(c.get(name), f"{path}.{name}", default) or default
            if value not in ("Honor", "Ignore"):
                raise reader.fail(f"{path}.{name}", f"must be Honor or Ignore, got {value!r}")
            policies[name] = value
        out.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=topology_key,
                when_unsatisfiable=when,  # type: ignore[arg-type]
                label_selector=reader.label_selector(c.get("labelSelector"), f"{path}.labelSelector"),
                min_domains=min_domains,
                node_affinity_policy=policies["nodeAffinityPolicy"],  # type: ignore[arg-type]
                node_taints_policy=policies["nodeTaintsPolicy"],  # type: ignore[arg-type]
                match_label_keys=tuple(
                    reader.string(k, f"{path}.matchLabelKeys[{j}]")
                    for j, k in enumerate(reader.sequence(c.get("matchLabelKeys"), f"{path}.matchLabelKeys"))
                ),
            )
        )
    return tuple(out)


def _resource_claims(reader: FieldReader, spec: Manifest, status: Manifest) -> tuple[str | None, ...]:
    """The claims of ``spec.resourceClaims`` by name, as kube's ``resourceclaim.Name``
    names them: ``resourceClaimName``, or for a template the claim that
    ``status.resourceClaimStatuses`` names (None: not created yet; an entry whose status
    names no claim needs none and is left out)."""
    created: dict[str, str] = {}
    for i, raw in enumerate(
        reader.sequence(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses")
    ):
        where = f"status.resourceClaimStatuses[{i}]"
        entry = reader.mapping(raw, where)
        created[reader.string(entry.get("name"), f"{where}.name")] = reader.string(
            entry.get("resourceClaimName"), f"{where}.resourceClaimName"
        )
    names: list[str | None] = []
    for i, raw in enumerate(reader.sequence(spec.get("resourceClaims"), "spec.resourceClaims")):
        where = f"spec.resourceClaims[{i}]"
        entry = reader.mapping(raw, where)
        claim = reader.string(entry.get("resourceClaimName"), f"{where}.resourceClaimName")
        template = reader.string(entry.get("resourceClaimTemplateName"), f"{where}.resourceClaimTemplateName")
        if claim:
            names.append(claim)
        elif not template:
            raise reader.fail(where, "none of the supported fields are set")
        else:
            name = reader.string(entry.get("name"), f"{where}.name")
            if name not in created:
                names.append(None)
            elif created[name]:
                names.append(created[name])
    return tuple(names)


def _timestamp(reader: FieldReader, raw: Any, path: str) -> float | None:
    """An RFC 3339 time (``metav1.Time``) as seconds since the epoch; None when absent."""
    text = reader.string(raw, path)
    if not text:
        return None
    if not _RFC3339.fullmatch(text):
        raise reader.fail(path, f"expected an RFC 3339 time such as 2024-05-01T12:00:00Z, got {text!r}")
    try:
        return datetime.fromisoformat(text.upper().replace("Z", "+00:00")).timestamp()
    except ValueError as error:
        raise reader.fail(path, f"{text!r} is not a valid time: {error}") from None


def _preemption_policy(reader: FieldReader, spec: Manifest) -> PreemptionPolicy:
    path = "spec.preemptionPolicy"
    policy = reader.string(spec.get("preemptionPolicy"), path) or "PreemptLowerPriority"
    if policy not in PREEMPTION_POLICIES:
        raise reader.fail(path, f"must be {' or '.join(PREEMPTION_POLICIES)}, got {policy!r}")
    return policy


def _preempted_by_scheduler(reader: FieldReader, status: Manifest) -> bool:
    """The first DisruptionTarget condition is True with reason PreemptionByScheduler
    (``podTerminatingByPreemption`` reads only the first)."""
    for i, raw in enumerate(reader.sequence(status.get("conditions"), "status.conditions")):
        path = f"status.conditions[{i}]"
        condition = reader.mapping(raw, path)
        if reader.string(condition.get("type"), f"{path}.type") == "DisruptionTarget":
            return (
                reader.string(condition.get("status"), f"{path}.status") == "True"
                and reader.string(condition.get("reason"), f"{path}.reason") == "PreemptionByScheduler"
            )
    return False


def lifecycle(manifest: Manifest) -> dict[str, Any]:
    """The fields of a placed pod that change after its bind and that preemption reads
    (``start_time``, ``terminating``, ``preempted_by_scheduler``), as ``Pod`` fields."""
    metadata = manifest.get("metadata") or {}
    reader = FieldReader(f"pod {metadata.get('namespace') or 'default'}/{metadata.get('name')}")
    status = reader.mapping(manifest.get("status"), "status")
    return {
        "start_time": _timestamp(reader, status.get("startTime"), "status.startTime"),
        "terminating": metadata.get("deletionTimestamp") is not None,
        "preempted_by_scheduler": _preempted_by_scheduler(reader, status),
    }


def pod_from_manifest(manifest: Manifest) -> Pod:
    """Parse a pod manifest; raises ``PodSpecError`` naming the pod and the field."""
    metadata = manifest.get("metadata") or {}
    name = str(metadata.get("name") or metadata.get("generateName") or "<unnamed>")
    namespace = str(metadata.get("namespace") or "default")
    reader = FieldReader(f"pod {namespace}/{name}")
    metadata = reader.mapping(metadata, "metadata")
    spec = reader.mapping(manifest.get("spec"), "spec")
    status = reader.mapping(manifest.get("status"), "status")
    annotations = reader.string_map(metadata.get("annotations"), "metadata.annotations")

    init_parsed = [
        _container(reader, c, f"spec.initContainers[{i}]", init=True)
        for i, c in enumerate(reader.sequence(spec.get("initContainers"), "spec.initContainers"))
    ]
    parsed = [
        _container(reader, c, f"spec.containers[{i}]", init=False)
        for i, c in enumerate(reader.sequence(spec.get("containers"), "spec.containers"))
    ]
    containers = [request for request, _ in parsed]
    init_containers = [request for request, _ in init_parsed]
    # HAMi numbers containers init first (the order of its allocation annotations).
    gpu, gpu_reasons = gpu_request(reader, [gpus for _, gpus in init_parsed + parsed], annotations)
    overhead = resource_amounts(reader, spec.get("overhead"), "spec.overhead")
    pod_level = resource_amounts(
        reader,
        reader.mapping(spec.get("resources"), "spec.resources").get("requests"),
        "spec.resources.requests",
    )
    requests = pod_requests(containers, init_containers, overhead, pod_level)
    nonzero = pod_requests(containers, init_containers, overhead, pod_level, non_missing=True)

    affinity = reader.mapping(spec.get("affinity"), "spec.affinity")
    required_node, preferred_node = _node_affinity(reader, affinity.get("nodeAffinity"))
    gates = tuple(
        reader.string(
            reader.mapping(g, f"spec.schedulingGates[{i}]").get("name"), f"spec.schedulingGates[{i}].name"
        )
        for i, g in enumerate(reader.sequence(spec.get("schedulingGates"), "spec.schedulingGates"))
    )
    volumes, inline_disks = pod_volumes(reader, spec, name)
    return Pod(
        name=name,
        namespace=namespace,
        uid=reader.string(metadata.get("uid"), "metadata.uid"),
        labels=reader.string_map(metadata.get("labels"), "metadata.labels"),
        requests=requests,
        nonzero_cpu_milli=nonzero.get(CPU, 0),
        nonzero_memory=nonzero.get("memory", 0),
        gpu=gpu,
        node_name=reader.string(spec.get("nodeName"), "spec.nodeName"),
        node_selector=reader.string_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        required_node_affinity=required_node,
        preferred_node_affinity=preferred_node,
        tolerations=_tolerations(reader, spec.get("tolerations")),
        host_ports=_host_ports(reader, spec),
        pod_affinity=_pod_affinity(reader, affinity.get("podAffinity"), "spec.affinity.podAffinity"),
        pod_anti_affinity=_pod_affinity(
            reader, affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity"
        ),
        topology_spread=_topology_spread(reader, spec.get("topologySpreadConstraints")),
        priority=reader.integer(spec.get("priority"), "spec.priority"),
        scheduler_name=reader.string(spec.get("schedulerName"), "spec.schedulerName", "default-scheduler"),
        scheduling_gates=gates,
        scheduling_group=reader.string(
            reader.mapping(spec.get("schedulingGroup"), "spec.schedulingGroup").get("podGroupName"),
            "spec.schedulingGroup.podGroupName",
        ),
        unsupported=tuple(gpu_reasons),
        resource_claims=_resource_claims(reader, spec, status),
        volumes=volumes,
        inline_disks=inline_disks,
        preemption_policy=_preemption_policy(reader, spec),
        nominated_node_name=reader.string(status.get("nominatedNodeName"), "status.nominatedNodeName"),
        start_time=_timestamp(reader, status.get("startTime"), "status.startTime"),
        terminating=metadata.get("deletionTimestamp") is not None,
        preempted_by_scheduler=_preempted_by_scheduler(reader, status),
    )
