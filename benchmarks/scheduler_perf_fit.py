"""Node-level hard constraints of a placement, checked on the objects the API server
returns (plain JSON), independently of both schedulers' code:

- resources: on each node, the bound pods' requests (kube's effective request: the larger
  of the containers' sum and each init container, plus the pod overhead) of every
  resource, and the pod count, are within the node's allocatable (0 where the node does
  not list the resource, as kube counts it);
- taints: no pod sits on a node with a ``NoSchedule`` or ``NoExecute`` taint it does not
  tolerate.

Each broken constraint is one line naming the node or the pod and the rule.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

Json = dict[str, Any]

_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def quantity(text: str | int | float) -> Decimal:
    """A Kubernetes quantity ("100m", "32Gi", "1e3") as a number of base units."""
    match = _QUANTITY.match(str(text).strip())
    if match is None or match.group(2) not in _SUFFIX:
        raise ValueError(f"quantity {text!r}")
    return Decimal(match.group(1)) * _SUFFIX[match.group(2)]


def pod_requests(pod: Json) -> dict[str, Decimal]:
    """kube's effective request of a pod (``resource.PodRequests`` without sidecars)."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = defaultdict(Decimal)
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] += quantity(value)
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total[name], quantity(value))
    for name, value in (spec.get("overhead") or {}).items():
        total[name] += quantity(value)
    return dict(total)


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """``v1.Toleration.ToleratesTaint``."""
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        if key and key != taint.get("key"):
            continue
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def broken_fit(pods: Iterable[Json], nodes: Iterable[Json]) -> list[str]:
    """Every node over its allocatable and every pod on a taint it does not tolerate, among
    the bound ``pods``."""
    node_by_name = {n["metadata"]["name"]: n for n in nodes}
    used: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    broken = []
    for pod in pods:
        node = node_by_name.get((pod.get("spec") or {}).get("nodeName") or "")
        if node is None:
            continue
        name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        on_node = used[node["metadata"]["name"]]
        on_node["pods"] += 1
        for resource, amount in pod_requests(pod).items():
            on_node[resource] += amount
        tolerations = pod["spec"].get("tolerations") or []
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                broken.append(f"{name}: on {node['metadata']['name']} despite taint {taint.get('key')}")
    for node_name, amounts in sorted(used.items()):
        allocatable = (node_by_name[node_name].get("status") or {}).get("allocatable") or {}
        for resource, amount in sorted(amounts.items()):
            limit = allocatable.get(resource, 0)
            if amount > quantity(limit):
                broken.append(f"node {node_name}: {resource} requested {amount} > allocatable {limit}")
    return broken
