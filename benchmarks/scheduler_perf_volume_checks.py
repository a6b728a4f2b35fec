"""Whether a placement keeps the hard constraints of the pods' volumes, checked on the
objects the API server returns (plain JSON), independently of both schedulers' code:

- a bound pod's claims exist and name a volume that exists;
- the volume's required node affinity holds on the pod's node (expressions on labels,
  fields on ``metadata.name``);
- a ``ReadWriteOncePod`` claim is used by one bound pod at most;
- on each node with a CSINode, the distinct volumes of a CSI driver (a migrated in-tree
  AWS EBS volume counts as ``ebs.csi.aws.com``, as kube translates it when the CSINode
  lists ``kubernetes.io/aws-ebs`` as migrated) are at most the driver's allocatable count.

Each broken constraint is one line naming the pod or the node and the rule.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from scheduler_perf_checks import requirement_holds

Json = dict[str, Any]
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
# in-tree plugin -> (its volume source field, the CSI driver kube translates it to, its ID field)
IN_TREE = {"kubernetes.io/aws-ebs": ("awsElasticBlockStore", "ebs.csi.aws.com", "volumeID")}


def _claim_names(pod: Json) -> list[str]:
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in (pod.get("spec") or {}).get("volumes") or []
        if v.get("persistentVolumeClaim")
    ]


def _affinity_holds(volume: Json, node: Json) -> bool:
    required = ((volume["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    if not required:
        return True
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    return any(
        all(requirement_holds(e, labels) for e in term.get("matchExpressions") or [])
        and all(requirement_holds(f, fields) for f in term.get("matchFields") or [])
        for term in required
    )


def _migrated(csi_node: Json | None) -> set[str]:
    annotations = ((csi_node or {}).get("metadata") or {}).get("annotations") or {}
    return {p for p in annotations.get(MIGRATED_PLUGINS_ANNOTATION, "").split(",") if p}


def _csi_handle(volume: Json, migrated: set[str]) -> tuple[str, str] | None:
    """(driver, handle) of a CSI volume, or of an in-tree one the node migrated."""
    spec = volume["spec"]
    if spec.get("csi"):
        return spec["csi"]["driver"], spec["csi"]["volumeHandle"]
    for plugin, (source, driver, id_field) in IN_TREE.items():
        if plugin in migrated and spec.get(source):
            return driver, spec[source][id_field]
    return None


def broken_volume_constraints(
    pods: Iterable[Json],
    nodes: Iterable[Json],
    claims: Iterable[Json],
    volumes: Iterable[Json],
    csi_nodes: Iterable[Json],
) -> list[str]:
    """Every broken volume constraint among the bound ``pods``."""
    node_by_name = {n["metadata"]["name"]: n for n in nodes}
    claim_by_key = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    volume_by_name = {v["metadata"]["name"]: v for v in volumes}
    csi_by_node = {c["metadata"]["name"]: c for c in csi_nodes}
    broken: list[str] = []
    users: dict[tuple[str, str], list[str]] = defaultdict(list)
    attached: dict[tuple[str, str], set[str]] = defaultdict(set)  # (node, driver) -> handles
    for pod in pods:
        node = node_by_name.get((pod.get("spec") or {}).get("nodeName") or "")
        if node is None:
            continue
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        node_name = node["metadata"]["name"]
        migrated = _migrated(csi_by_node.get(node_name))
        for claim_name in _claim_names(pod):
            claim = claim_by_key.get((namespace, claim_name))
            volume = volume_by_name.get(((claim or {}).get("spec") or {}).get("volumeName") or "")
            if claim is None or volume is None:
                broken.append(f"{namespace}/{name}: bound with claim {claim_name} or its volume missing")
                continue
            users[(namespace, claim_name)].append(name)
            if (
                "ReadWriteOncePod" in (claim["spec"].get("accessModes") or [])
                and len(users[(namespace, claim_name)]) == 2
            ):
                broken.append(f"{namespace}/{name}: claim {claim_name} is ReadWriteOncePod and already used")
            if not _affinity_holds(volume, node):
                broken.append(
                    f"{namespace}/{name}: volume {volume['metadata']['name']} not reachable on {node_name}"
                )
            handle = _csi_handle(volume, migrated)
            if handle is not None:
                attached[(node_name, handle[0])].add(handle[1])
    for (node_name, driver), handles in sorted(attached.items()):
        csi = csi_by_node.get(node_name)
        limits = {
            d["name"]: (d.get("allocatable") or {}).get("count")
            for d in (csi or {}).get("spec", {}).get("drivers") or []
        }
        limit = limits.get(driver)
        if limit is not None and len(handles) > int(limit):
            broken.append(f"node {node_name}: {len(handles)} volumes of {driver} > its limit {limit}")
    return broken
