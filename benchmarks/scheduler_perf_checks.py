"""Whether the placement a scheduler left keeps every pod's hard constraints, checked on
the objects the API server returns (plain JSON), independently of both schedulers' code:

- required node affinity (``nodeSelectorTerms``, ORed; expressions and ``metadata.name``
  fields ANDed) and nodeSelector;
- required pod affinity: each term has a matching pod (other than the pod itself) in the
  pod's domain (a pod of the first of its group, matching its own terms, may be alone);
- required pod anti-affinity: no other matching pod in the pod's domain, either way;
- topology spread ``DoNotSchedule``: over the domains of the nodes the constraint counts
  (``nodeAffinityPolicy``, ``nodeTaintsPolicy``), the matching pods of a domain minus
  the fewest of any domain is at most ``maxSkew`` (with fewer domains than
  ``minDomains`` the fewest is 0, as kube counts it). kube checks the skew when it
  places a pod, so the final state holds it only for the domains whose matching pods
  all carry the constraint, and only while counts have only grown: the last pod placed
  there saw that domain one short and a minimum no higher than the final one. A domain
  holding matching pods without the constraint (EventHandlingPodAdd's unblockers) may
  exceed it, and a run that deleted or relabelled pods or added nodes after placing
  them is not checked for skew (``counts_only_grew``).

Node-level constraints (resources, taints) are ``scheduler_perf_fit``'s. Each broken
constraint is one line naming the pod and the rule.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler_perf_fit import tolerates

Json = dict[str, Any]


def requirement_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        if key not in labels:
            return False
        value, bound = int(labels[key]), int(values[0])
        return value > bound if operator == "Gt" else value < bound
    raise ValueError(f"operator {operator!r}")


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """``metav1.LabelSelector``; a missing selector matches nothing."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(requirement_holds(e, labels) for e in selector.get("matchExpressions") or [])


def _labels(obj: Json) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _term_matches(
    term: Json, owner: Json, other: Json, namespace_labels: Mapping[str, Mapping[str, str]]
) -> bool:
    namespace = other["metadata"]["namespace"]
    namespaces = term.get("namespaces") or []
    ns_selector = term.get("namespaceSelector")
    if not namespaces and ns_selector is None:
        in_namespace = namespace == owner["metadata"]["namespace"]
    else:
        in_namespace = namespace in namespaces or (
            ns_selector is not None and selector_matches(ns_selector, namespace_labels.get(namespace, {}))
        )
    return in_namespace and selector_matches(term.get("labelSelector"), _labels(other))


def _node_affinity_holds(pod: Json, node: Json) -> bool:
    spec = pod["spec"]
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    fields = {"metadata.name": node["metadata"]["name"]}
    return any(
        all(requirement_holds(e, labels) for e in term.get("matchExpressions") or [])
        and all(requirement_holds(f, fields) for f in term.get("matchFields") or [])
        for term in required.get("nodeSelectorTerms") or []
    )


def broken_constraints(
    pods: Iterable[Json],
    nodes: Iterable[Json],
    namespace_labels: Mapping[str, Mapping[str, str]],
    counts_only_grew: bool = True,
) -> list[str]:
    """Every broken hard constraint among the bound ``pods`` (unbound pods are skipped);
    ``nodes``: every node of the cluster (a domain's count includes pods on any)."""
    node_by_name = {n["metadata"]["name"]: n for n in nodes}
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") in node_by_name]
    broken: list[str] = []

    def domain(pod: Json, key: str) -> str | None:
        return _labels(node_by_name[pod["spec"]["nodeName"]]).get(key)

    by_domain: dict[str, dict[str | None, list[Json]]] = {}

    def in_domain(key: str, value: str | None) -> list[Json]:
        if key not in by_domain:
            grouped: dict[str | None, list[Json]] = defaultdict(list)
            for other in bound:
                grouped[domain(other, key)].append(other)
            by_domain[key] = grouped
        return by_domain[key].get(value, []) if value is not None else []

    spread_cache: dict[str, list[tuple[int, bool]]] = {}

    for pod in bound:
        name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        node = node_by_name[pod["spec"]["nodeName"]]
        if not _node_affinity_holds(pod, node):
            broken.append(f"{name}: node {node['metadata']['name']} breaks its node affinity")
        affinity = pod["spec"].get("affinity") or {}
        for term in (affinity.get("podAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []:
            key = term["topologyKey"]
            here = domain(pod, key)
            peers = any(
                o is not pod and _term_matches(term, pod, o, namespace_labels) for o in in_domain(key, here)
            )
            if here is None or (
                not peers
                and any(_term_matches(term, pod, o, namespace_labels) for o in bound if o is not pod)
            ):
                broken.append(f"{name}: no pod matching its affinity term in {key}={here}")
        for term in (affinity.get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []:
            key = term["topologyKey"]
            here = domain(pod, key)
            if here is None:
                continue
            for other in in_domain(key, here):
                if other is not pod and _term_matches(term, pod, other, namespace_labels):
                    broken.append(
                        f"{name}: anti-affinity broken by {other['metadata']['name']} in {key}={here}"
                    )
        if counts_only_grew:
            broken += _spread_broken(pod, name, bound, node_by_name, spread_cache)
    return broken


def _spread_broken(
    pod: Json,
    name: str,
    bound: list[Json],
    node_by_name: Mapping[str, Json],
    cache: dict[str, list[tuple[int, bool]]],
) -> list[str]:
    broken = []
    for constraint in pod["spec"].get("topologySpreadConstraints") or []:
        if constraint.get("whenUnsatisfiable") != "DoNotSchedule":
            continue
        key = constraint["topologyKey"]
        spec = pod["spec"]
        # what decides the domains and the matching pods
        decides = [spec.get(field) for field in ("affinity", "nodeSelector", "tolerations")]
        cache_key = json.dumps([pod["metadata"]["namespace"], constraint, *decides], sort_keys=True)
        if cache_key in cache:
            per_domain = cache[cache_key]
        else:
            per_domain = cache[cache_key] = _per_domain(pod, constraint, bound, node_by_name)
        counts = [count for count, _ in per_domain]
        # fewer domains than minDomains: the global minimum is 0 (kube's PodTopologySpread)
        low = min(counts, default=0) if len(counts) >= int(constraint.get("minDomains") or 1) else 0
        high = max((count for count, constrained in per_domain if constrained), default=0)
        if high - low > int(constraint["maxSkew"]):
            broken.append(f"{name}: skew {high - low} over {key} > {constraint['maxSkew']}")
    return broken


def _per_domain(
    pod: Json, constraint: Json, bound: list[Json], node_by_name: Mapping[str, Json]
) -> list[tuple[int, bool]]:
    """Per domain of the nodes the constraint counts, its matching pods and whether they
    all carry the constraint themselves. The nodes counted are those with the key,
    where the pod's node affinity holds (``nodeAffinityPolicy`` Honor, kube's default) and
    whose ``NoSchedule``/``NoExecute`` taints it tolerates (``nodeTaintsPolicy`` Honor;
    kube's default Ignore counts tainted nodes)."""
    key = constraint["topologyKey"]
    tolerations = pod["spec"].get("tolerations") or []
    eligible = {
        name
        for name, n in node_by_name.items()
        if key in _labels(n)
        and (constraint.get("nodeAffinityPolicy") == "Ignore" or _node_affinity_holds(pod, n))
        and (
            constraint.get("nodeTaintsPolicy") != "Honor"
            or all(
                tolerates(tolerations, t)
                for t in (n.get("spec") or {}).get("taints") or []
                if t.get("effect") in ("NoSchedule", "NoExecute")
            )
        )
    }
    domains = {_labels(node_by_name[name])[key] for name in eligible}
    counts: Counter[str] = Counter()
    namespace = pod["metadata"]["namespace"]
    unconstrained: set[str] = set()
    for other in bound:
        if (
            other["spec"]["nodeName"] in eligible
            and other["metadata"]["namespace"] == namespace
            and selector_matches(constraint.get("labelSelector"), _labels(other))
        ):
            here = _labels(node_by_name[other["spec"]["nodeName"]])[key]
            counts[here] += 1
            if constraint not in (other["spec"].get("topologySpreadConstraints") or []):
                unconstrained.add(here)
    return [(counts.get(d, 0), d not in unconstrained) for d in domains]
