"""An independent check of a cluster's final state: no pod sits on a node that
violates its resources, taints, node affinity, pod (anti-)affinity, topology spread,
or the node affinity and zone of the PersistentVolumes its claims are bound to.

Written apart from the scheduler's core on purpose (plain loops over API objects,
the Kubernetes client's own quantity parser), so a shared bug cannot hide itself.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes.utils import parse_quantity

GPU = "nvidia.com/gpu"
# HAMi's per-GPU amounts: no node advertises them (the kubelet drops them), the GPUs'
# own check below counts them.
PER_GPU = ("nvidia.com/gpucores", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage")
REGISTER = "hami.io/node-nvidia-register"


def _requests(pod: Mapping[str, Any]) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for container in pod["spec"].get("containers", []):
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in merged.items():
            total[name] += float(parse_quantity(quantity))
    return total


def _matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        have = labels.get(key)
        ok = {
            "In": have is not None and have in values,
            "NotIn": have is None or have not in values,
            "Exists": have is not None,
            "DoesNotExist": have is None,
        }[operator]
        if not ok:
            return False
    return True


def _node_term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    for expression in expressions:
        have = labels.get(expression["key"])
        values = expression.get("values") or []
        operator = expression["operator"]
        if operator in ("Gt", "Lt"):
            try:
                ok = (int(have) > int(values[0])) if operator == "Gt" else (int(have) < int(values[0]))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                ok = False
        else:
            ok = _matches({"matchExpressions": [expression]}, labels)
        if not ok:
            return False
    for expression in fields:
        name = node["metadata"]["name"]
        inside = name in (expression.get("values") or [])
        if (expression["operator"] == "In") != inside:
            return False
    return True


def _tolerated(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint["effect"]:
            continue
        if toleration.get("key") and toleration["key"] != taint["key"]:
            continue
        if toleration.get("operator", "Equal") == "Exists" or toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


class Violations(list[str]):
    def add(self, pod: Mapping[str, Any], problem: str) -> None:
        meta = pod["metadata"]
        self.append(f"{meta['namespace']}/{meta['name']} on {pod['spec'].get('nodeName')}: {problem}")


def check(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]] = (),
    volumes: Sequence[Mapping[str, Any]] = (),
    pod_groups: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """Every violation found (empty: the placement is valid). ``claims`` and
    ``volumes`` (PVCs and PVs) let it check the pods' volumes, ``pod_groups``
    (scheduler-plugins' PodGroups) that no gang is bound in part."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    bound = [
        p
        for p in pods
        if p["spec"].get("nodeName") and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    ]
    problems = Violations()
    _check_resources(by_name, bound, problems)
    for pod in bound:
        node = by_name.get(pod["spec"]["nodeName"])
        if node is None:
            problems.add(pod, "node does not exist")
            continue
        _check_node_constraints(pod, node, problems)
    _check_pod_affinity(by_name, bound, problems)
    _check_topology_spread(by_name, bound, problems)
    _check_volumes(by_name, bound, claims, volumes, problems)
    problems.extend(_check_gangs(bound, pod_groups))
    return problems


POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def _check_gangs(bound: Sequence[Mapping[str, Any]], pod_groups: Sequence[Mapping[str, Any]]) -> list[str]:
    """A gang is bound whole or not at all: none of its pods, or at least ``minMember``."""
    counts: dict[tuple[str, str], int] = {}
    for pod in bound:
        group = (pod["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)
        if group:
            key = (pod["metadata"]["namespace"], group)
            counts[key] = counts.get(key, 0) + 1
    problems = []
    for group in pod_groups:
        meta = group["metadata"]
        minimum = int((group.get("spec") or {}).get("minMember") or 1)
        count = counts.get((meta["namespace"], meta["name"]), 0)
        if 0 < count < minimum:
            problems.append(
                f"PodGroup {meta['namespace']}/{meta['name']}: {count} pods bound, minMember {minimum}"
            )
    return problems


def _hami_gpus(node: Mapping[str, Any]) -> dict[str, tuple[int, int]] | None:
    """A HAMi node's GPUs, UUID -> (cores %, memory MiB), from its register annotation
    (JSON); None for a node without one."""
    text = (node["metadata"].get("annotations") or {}).get(REGISTER)
    if text is None:
        return None
    return {d["id"]: (d.get("devcore", 0), d.get("devmem", 0)) for d in json.loads(text)}


def _allocated(annotations: Mapping[str, str]) -> list[tuple[str, int, int]]:
    """(uuid, memory MiB, cores %) of every device in ``hami.io/vgpu-devices-allocated``."""
    out = []
    for container in annotations.get("hami.io/vgpu-devices-allocated", "").split(";"):
        for device in container.split(":"):
            if device:
                uuid, _type, memory, cores = device.split(",")[:4]
                out.append((uuid, int(memory), int(cores)))
    return out


def _check_resources(
    nodes: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], problems: Violations
) -> None:
    """Per node: every requested resource (``nvidia.com/gpu`` too, as the kubelet
    counts it) within allocatable. Per GPU of a HAMi node: the cores and memory of the
    allocations naming it within what it registered, and every GPU pod holding as many
    GPUs as it asked for."""
    used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    per_gpu: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    count: Counter[str] = Counter()
    for pod in pods:
        node = pod["spec"]["nodeName"]
        count[node] += 1
        requests = _requests(pod)
        for name, amount in requests.items():
            if name not in PER_GPU:
                used[node][name] += amount
        gpus = _hami_gpus(nodes[node]) if node in nodes else None
        if gpus is None or not requests.get(GPU):
            continue
        annotations = pod["metadata"].get("annotations") or {}
        devices = _allocated(annotations)
        if annotations.get("hami.io/vgpu-node") != node or len(devices) != int(requests[GPU]):
            problems.add(pod, f"holds GPUs {[d[0] for d in devices]} for a request of {requests[GPU]:.0f}")
        for uuid, memory, cores in devices:
            if uuid not in gpus:
                problems.add(pod, f"holds {uuid}, which the node does not have")
            per_gpu[(node, uuid)][0] += cores
            per_gpu[(node, uuid)][1] += memory
    for name, node in nodes.items():
        allocatable = {k: float(parse_quantity(v)) for k, v in node["status"].get("allocatable", {}).items()}
        if count[name] > allocatable.get("pods", 0):
            problems.append(f"node {name}: {count[name]} pods > {allocatable.get('pods', 0):.0f}")
        for resource, amount in used[name].items():
            if amount > allocatable.get(resource, 0) + 1e-9:
                problems.append(
                    f"node {name}: {resource} {amount} requested > {allocatable.get(resource, 0)}"
                )
    for (node_name, uuid), (cores, memory) in per_gpu.items():
        total_cores, total_memory = (_hami_gpus(nodes[node_name]) or {}).get(uuid, (0, 0))
        if cores > total_cores or memory > total_memory:
            problems.append(
                f"node {node_name}: GPU {uuid} holds {cores}% cores of {total_cores}, "
                f"{memory} MiB of {total_memory}"
            )


def _check_node_constraints(pod: Mapping[str, Any], node: Mapping[str, Any], problems: Violations) -> None:
    spec = pod["spec"]
    labels = node["metadata"].get("labels") or {}
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint["effect"] in ("NoSchedule", "NoExecute") and not _tolerated(
            taint, spec.get("tolerations") or []
        ):
            problems.add(pod, f"untolerated taint {taint['key']}")
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            problems.add(pod, f"nodeSelector {key}={value} not on node")
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required and not any(_node_term_matches(t, node) for t in required.get("nodeSelectorTerms") or []):
        problems.add(pod, "required node affinity not met")


def _domain(nodes: Mapping[str, Any], pod: Mapping[str, Any], key: str) -> str | None:
    labels: Mapping[str, str] = nodes[pod["spec"]["nodeName"]]["metadata"].get("labels") or {}
    return labels.get(key)


def _check_pod_affinity(
    nodes: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], problems: Violations
) -> None:
    for pod in pods:
        if pod["spec"]["nodeName"] not in nodes:
            continue
        affinity = pod["spec"].get("affinity") or {}
        namespace = pod["metadata"]["namespace"]
        others = [p for p in pods if p is not pod and p["spec"]["nodeName"] in nodes]
        for term in (affinity.get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []:
            key = term["topologyKey"]
            mine = _domain(nodes, pod, key)
            for other in others:
                if (
                    other["metadata"]["namespace"] in (term.get("namespaces") or [namespace])
                    and _matches(term.get("labelSelector"), other["metadata"].get("labels") or {})
                    and mine is not None
                    and _domain(nodes, other, key) == mine
                ):
                    problems.add(pod, f"anti-affinity: shares {key}={mine} with {other['metadata']['name']}")
        for term in (affinity.get("podAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []:
            key = term["topologyKey"]
            mine = _domain(nodes, pod, key)
            peers = [
                o
                for o in others
                if o["metadata"]["namespace"] in (term.get("namespaces") or [namespace])
                and _matches(term.get("labelSelector"), o["metadata"].get("labels") or {})
            ]
            if mine is None or not any(_domain(nodes, o, key) == mine for o in peers):
                self_match = _matches(term.get("labelSelector"), pod["metadata"].get("labels") or {})
                if not (self_match and mine is not None):
                    problems.add(pod, f"affinity: no matching pod in {key}={mine}")


def _check_topology_spread(
    nodes: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], problems: Violations
) -> None:
    for pod in pods:
        for constraint in pod["spec"].get("topologySpreadConstraints") or []:
            if constraint.get("whenUnsatisfiable") != "DoNotSchedule":
                continue
            key, selector = constraint["topologyKey"], constraint.get("labelSelector")
            domains = {(n["metadata"].get("labels") or {}).get(key) for n in nodes.values()} - {None}
            counts = dict.fromkeys(domains, 0)
            for other in pods:
                if other["metadata"]["namespace"] == pod["metadata"]["namespace"] and _matches(
                    selector, other["metadata"].get("labels") or {}
                ):
                    domain = _domain(nodes, other, key)
                    if domain is not None:
                        counts[domain] += 1
            skew = max(counts.values()) - min(counts.values()) if counts else 0
            if skew > constraint["maxSkew"]:
                problems.add(
                    pod, f"topology spread over {key}: skew {skew} > {constraint['maxSkew']} ({counts})"
                )


ZONE_LABELS = {
    "topology.kubernetes.io/zone": "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region": "failure-domain.beta.kubernetes.io/region",
}


def _claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The claims of a pod's volumes; a generic ephemeral volume's is <pod>-<volume>."""
    names = []
    for volume in pod["spec"].get("volumes") or []:
        if volume.get("persistentVolumeClaim"):
            names.append(volume["persistentVolumeClaim"]["claimName"])
        elif volume.get("ephemeral"):
            names.append(f"{pod['metadata']['name']}-{volume['name']}")
    return names


def _check_volumes(
    nodes: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    volumes: Sequence[Mapping[str, Any]],
    problems: Violations,
) -> None:
    """Every claim of a placed pod that names a volume: the volume exists, its required
    node affinity holds on the pod's node, and its zone and region labels (zones
    joined by ``__``) hold on the node where the node has such labels."""
    by_key = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    by_name = {v["metadata"]["name"]: v for v in volumes}
    for pod in pods:
        node = nodes.get(pod["spec"]["nodeName"])
        if node is None:
            continue
        labels = node["metadata"].get("labels") or {}
        for name in _claim_names(pod):
            claim = by_key.get((pod["metadata"]["namespace"], name))
            volume_name = ((claim or {}).get("spec") or {}).get("volumeName")
            if not volume_name:
                continue
            volume = by_name.get(volume_name)
            if volume is None:
                problems.add(pod, f"claim {name} is bound to volume {volume_name}, which does not exist")
                continue
            required = ((volume["spec"].get("nodeAffinity") or {}).get("required") or {}).get(
                "nodeSelectorTerms"
            )
            if required is not None and not any(_node_term_matches(t, node) for t in required):
                problems.add(pod, f"volume {volume_name} (claim {name}): node affinity not met")
            volume_labels = volume["metadata"].get("labels") or {}
            for ga, beta in ZONE_LABELS.items():
                wanted = volume_labels.get(ga) or volume_labels.get(beta)
                have = labels.get(ga) or labels.get(beta)
                if wanted and have and have not in [z.strip() for z in wanted.split("__")]:
                    problems.add(pod, f"volume {volume_name} (claim {name}): {ga} {wanted}, node has {have}")
