"""kube's scheduler_perf test cases as plans this benchmark can run: which operations,
how many nodes and pods, from which templates; or why a test case is skipped.

Sizes: the workload named ``<N>Nodes`` when the test case has one; otherwise its
``500Nodes`` workload with every count but ``measurePods`` (nodes, init pods) scaled by
N / 500, ``measurePods`` kept (kube's 5000-node workloads measure about as many pods as its
500-node ones); without a ``500Nodes`` workload, its smallest ``<M>Nodes`` workload of at
least 500 nodes with every count, ``measurePods`` too, scaled by N / M (PreemptionBasic's
1000Nodes fills every node with init pods and measures one pod a node).
``labelNodePrepareStrategy`` gives node i value i mod the values (kube picks one at
random). ``createPodSets`` unrolls into one ``createPods`` per namespace, as
kube's harness does, and a ``createPods`` without a namespace gets ``namespace-<i>``, i
its place in the unrolled list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from scheduler_perf_dra import DRA_EXTENDED, refused_dra_object
from scheduler_perf_ops import (
    AllocClaimsOp,
    AnyOp,
    BarrierOp,
    ChurnOp,
    DeletePodsOp,
    NamespacesOp,
    NodesOp,
    Op,
    Plan,
    PodsOp,
    ResourceDriverOp,
)
from scheduler_perf_source import load_yaml, scheduler_perf_dir

# Opcodes this benchmark does not perform (any opcode without a parser skips the test case).
REFUSED_OPCODES = {
    "startCollectingMetrics": "event-handling metric windows (not implemented yet)",
    "stopCollectingMetrics": "event-handling metric windows (not implemented yet)",
    "updateAny": "object updates while scheduling (not implemented yet)",
}
# Test cases whose objects kube's Go test code changes beyond what the configs say.
GO_SETUP = {
    "NodeDeclaredFeaturesEnabled": "nodes' declared features added by kube's Go test code "
    "(numNodeDeclaredFeatures), not by the config",
}
# Fields of each operation this benchmark honours; any other skips the test case.
FIELDS = {
    "createPods": frozenset(
        {
            "opcode",
            "count",
            "countParam",
            "namespace",
            "podTemplatePath",
            "collectMetrics",
            "persistentVolumeTemplatePath",
            "persistentVolumeClaimTemplatePath",
            "skipWaitToCompletion",
        }
    ),
    "createNodes": frozenset(
        {
            "opcode",
            "count",
            "countParam",
            "nodeTemplatePath",
            "labelNodePrepareStrategy",
            "nodeAllocatableStrategy",
        }
    ),
    "createNamespaces": frozenset({"opcode", "count", "countParam", "prefix", "namespaceTemplatePath"}),
    "createPodSets": frozenset({"opcode", "count", "countParam", "namespacePrefix", "createPodsOp"}),
    "createAny": frozenset({"opcode", "count", "countParam", "namespace", "templatePath"}),
    "barrier": frozenset({"opcode", "stageRequirement"}),
    "deletePods": frozenset({"opcode", "namespace", "deletePodsPerSecond", "skipWaitToCompletion"}),
    "churn": frozenset({"opcode", "mode", "number", "intervalMilliseconds", "namespace", "templatePaths"}),
    "createResourceDriver": frozenset(
        {"opcode", "driverName", "nodes", "maxClaimsPerNode", "maxClaimsPerNodeParam"}
    ),
    "allocResourceClaims": frozenset({"opcode", "namespace"}),
}
# churn: the kinds it creates and deletes.
CHURN_KINDS = frozenset({("v1", "Pod"), ("v1", "Service"), ("v1", "Node")})
# createAny: the kinds this benchmark creates, as (apiVersion, kind) -> (resource, namespaced).
ANY_KINDS = {
    ("v1", "Service"): ("services", True),
    ("resource.k8s.io/v1", "DeviceClass"): ("deviceclasses", False),
    ("resource.k8s.io/v1", "ResourceClaim"): ("resourceclaims", True),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ("resourceclaimtemplates", True),
}
# Parameters of a DRA case that are per node, not scaled with the node count.
PER_NODE_PARAMS = frozenset({"maxClaimsPerNode"})
# kube's text/template actions this benchmark fills in: ``{{.Index}}``, ``{{.Count}}``,
# ``{{DivideInt .Index N}}`` and ``{{Mod .Index N}}`` (kube's template functions).
TEMPLATE_ACTION = re.compile(r"\{\{\s*(?:\.(Index|Count)|(DivideInt|Mod)\s+\.Index\s+(\d+))\s*\}\}")
BASE_NODES = 500


def test_cases() -> list[tuple[Path, dict[str, Any]]]:
    """Every test case of every performance-config.yaml, with the file it is in."""
    root = scheduler_perf_dir()
    found = []
    for path in sorted(root.rglob("performance-config.yaml")):
        for case in load_yaml(path):
            found.append((path, case))
    return found


def workload_nodes(name: str) -> int | None:
    """The node count a workload's name gives (``500Nodes``, ``1Node_10GatedPods``,
    ``5kNodes/100Init/1kPods``), or None."""
    match = re.match(r"(\d+)(k?)Nodes?(?:$|[_/])", name)
    if match is None:
        return None
    return int(match.group(1)) * (1000 if match.group(2) else 1)


def counted_nodes(case: dict[str, Any], workload: dict[str, Any]) -> int | None:
    """The node count of a workload whose name gives none (``fast``, ``500pods_500nodes``):
    what its ``createNodes`` operations make."""
    params = workload.get("params") or {}
    try:
        counts = [
            _count(op, params) for op in case.get("workloadTemplate") or [] if op["opcode"] == "createNodes"
        ]
    except KeyError:  # a count parameter the workload does not set
        return None
    return sum(counts) or None


def sized_params(case: dict[str, Any], nodes: int) -> tuple[str, dict[str, Any]] | str:
    """``(workload name, params)`` for ``nodes``, or why there are none."""
    by_nodes: dict[int, dict[str, Any]] = {}
    for workload in case.get("workloads", []):
        count = workload_nodes(workload["name"]) or counted_nodes(case, workload)
        # kube's plain ``<N>Nodes`` first, else the first listed (feature-gate variants follow it)
        if count is not None and (count not in by_nodes or workload["name"] == f"{count}Nodes"):
            by_nodes[count] = workload
    exact = by_nodes.get(nodes)
    if exact is not None:
        return exact["name"], dict(exact.get("params", {}))
    sizes = sorted(by_nodes)
    base_nodes = BASE_NODES if BASE_NODES in sizes else next((n for n in sizes if n >= BASE_NODES), None)
    if base_nodes is None:
        return f"no {nodes}Nodes or {BASE_NODES}Nodes workload"
    base = by_nodes[base_nodes]
    params = dict(base.get("params", {}))
    scale = nodes / base_nodes
    # kube sizes its DRA cases so that init and measured pods use the nodes' devices up
    # (maxClaimsPerNode a node): their measured pods scale with the nodes too
    devices = any(op["opcode"] == "createResourceDriver" for op in case.get("workloadTemplate") or [])
    for key, value in params.items():
        if key in PER_NODE_PARAMS or not isinstance(value, int) or isinstance(value, bool):
            continue
        if key != "measurePods" or base_nodes != BASE_NODES or devices:
            params[key] = round(value * scale)
    return base["name"], params


def base_pod() -> dict[str, Any]:
    """kube's pod for a ``createPods`` without a template (``makeBasePod``)."""
    resources = {"cpu": "100m", "memory": "500Mi"}
    container = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.10.1",
        "ports": [{"containerPort": 80}],
        "resources": {"limits": dict(resources), "requests": dict(resources)},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "pod-"},
        "spec": {"containers": [container]},
    }


def _count(op: dict[str, Any], params: dict[str, Any]) -> int:
    if "countParam" in op:
        return int(params[op["countParam"].lstrip("$")])
    return int(op.get("count", 0))


def unrolled(ops: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
    """``createPodSets`` as one ``createPods`` per namespace ``<namespacePrefix>-<i>``."""
    flat = []
    for op in ops:
        if op["opcode"] != "createPodSets":
            flat.append(op)
            continue
        extra = sorted(set(op) - FIELDS["createPodSets"])
        if extra:
            flat.append(op)  # refused below with its fields
            continue
        for i in range(_count(op, params)):
            flat.append({**op["createPodsOp"], "namespace": f"{op['namespacePrefix']}-{i}"})
    return flat


def fill(text: str, index: int, count: int) -> str:
    """``text`` with kube's template actions (``TEMPLATE_ACTION``) filled in for object
    ``index`` of ``count``; other actions are left as they are."""

    def value(match: re.Match[str]) -> str:
        field_, function, operand = match.groups()
        if field_:
            return str(index if field_ == "Index" else count)
        return str(index // int(operand) if function == "DivideInt" else index % int(operand))

    return TEMPLATE_ACTION.sub(value, text) if "{{" in text else text


def indexed(template: dict[str, Any], path: str) -> dict[str, Any] | str:
    """A node or pod template, or why not: kube renders them with text/template
    (``scheduler_perf_objects.instance`` fills in ``TEMPLATE_ACTION``); any other template
    action is refused."""
    if "{{" in TEMPLATE_ACTION.sub("", json.dumps(template)):
        return f"{path}: a text/template this benchmark does not render"
    return template


def instance(template: dict[str, Any], index: int, count: int) -> dict[str, Any]:
    """The template of object ``index`` of ``count``."""
    rendered: dict[str, Any] = json.loads(fill(json.dumps(template), index, count))
    return rendered


def render(path: Path, index: int, count: int) -> dict[str, Any] | str:
    """A ``createAny`` template filled in for object ``index`` of ``count``, or why not."""
    text = fill(path.read_text(), index, count)
    if "{{" in text:
        return f"{path.name}: a text/template this benchmark does not render"
    manifest: dict[str, Any] = yaml.safe_load(text)
    return manifest


@dataclass(frozen=True)
class Source:
    """Where one operation comes from: its place in the unrolled list, the sized
    parameters, the test case and the folder of its config."""

    index: int
    params: dict[str, Any]
    case: dict[str, Any]
    folder: Path


def nodes_op(op: dict[str, Any], source: Source) -> NodesOp | str:
    # kube's base node (``makeBaseNode``) is templates/node-default.yaml, from any folder
    default = scheduler_perf_dir() / "templates" / "node-default.yaml"
    template_path = op.get("nodeTemplatePath", str(default))
    template = indexed(load_yaml(source.folder / template_path), template_path)
    if isinstance(template, str):
        return template
    strategy = op.get("labelNodePrepareStrategy") or {}
    allocatable = op.get("nodeAllocatableStrategy") or {}
    return NodesOp(
        _count(op, source.params),
        template,
        strategy.get("labelKey", ""),
        tuple(strategy.get("labelValues", ())),
        dict(allocatable.get("nodeAllocatable") or {}),
        dict(allocatable.get("csiNodeAllocatable") or {}),
        tuple(allocatable.get("migratedPlugins") or ()),
    )


def namespaces_op(op: dict[str, Any], source: Source) -> NamespacesOp:
    count = _count(op, source.params)
    template_path = op.get("namespaceTemplatePath")
    template = load_yaml(source.folder / template_path) if template_path else {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    return NamespacesOp(tuple(f"{op['prefix']}-{i}" for i in range(count)), labels)


def pods_op(op: dict[str, Any], source: Source) -> PodsOp | str:
    template_path = op.get("podTemplatePath") or source.case.get("defaultPodTemplatePath")
    template = (
        indexed(load_yaml(source.folder / template_path), template_path) if template_path else base_pod()
    )
    if isinstance(template, str):
        return template
    implicit = implicit_extended_resources(template)
    if implicit:
        return f"{template_path}: {implicit[0]}: {DRA_EXTENDED}"
    volume_path = op.get("persistentVolumeTemplatePath")
    claim_path = op.get("persistentVolumeClaimTemplatePath")
    if bool(volume_path) != bool(claim_path):
        return "createPods with only one of a volume and a claim template"
    return PodsOp(
        _count(op, source.params),
        op.get("namespace", f"namespace-{source.index}"),
        template,
        bool(op.get("collectMetrics")),
        load_yaml(source.folder / volume_path) if volume_path else None,
        load_yaml(source.folder / claim_path) if claim_path else None,
        background=bool(op.get("skipWaitToCompletion")),
    )


def any_op(op: dict[str, Any], source: Source) -> AnyOp | str:
    count = _count(op, source.params) if ("count" in op or "countParam" in op) else 1
    manifests = []
    kind = ("", "")
    for index in range(max(count, 1)):  # the first one read even for none, for its kind
        manifest = render(source.folder / op["templatePath"], index, count)
        if isinstance(manifest, str):
            return manifest
        kind = (manifest.get("apiVersion", ""), manifest.get("kind", ""))
        if kind[0].startswith("resource.k8s.io/"):
            refused = refused_dra_object(manifest)
            if refused:
                return f"createAny of {kind[1]} {op['templatePath']}: {refused}"
        if kind not in ANY_KINDS:
            return f"createAny of {kind[0]} {kind[1]} (not implemented)"
        if index >= count:
            break
        metadata = manifest.setdefault("metadata", {})
        if "name" not in metadata:  # a fixed name: a rerun finds it there
            metadata["name"] = f"{metadata.pop('generateName', 'perf-')}{index}"
        manifests.append(manifest)
    resource, namespaced = ANY_KINDS[kind]
    if namespaced != bool(op.get("namespace")):
        return f"createAny of {kind[1]}: namespace {op.get('namespace')!r} does not fit its scope"
    return AnyOp(op.get("namespace", ""), resource, tuple(manifests))


def barrier_op(op: dict[str, Any], _source: Source) -> BarrierOp:
    return BarrierOp(op.get("stageRequirement") or "Scheduled")


def delete_pods_op(op: dict[str, Any], _source: Source) -> DeletePodsOp | str:
    if not op.get("skipWaitToCompletion"):
        return "deletePods waited for (not implemented)"
    return DeletePodsOp(op["namespace"], float(op.get("deletePodsPerSecond") or 0))


def churn_op(op: dict[str, Any], source: Source) -> ChurnOp | str:
    templates = tuple(load_yaml(source.folder / path) for path in op.get("templatePaths") or [])
    for template in templates:
        if (template.get("apiVersion"), template.get("kind")) not in CHURN_KINDS:
            return f"churn of {template.get('apiVersion')} {template.get('kind')} (not implemented)"
    if op.get("mode") not in ("create", "recreate") or (op["mode"] == "recreate" and not op.get("number")):
        return f"churn mode {op.get('mode')!r} with number {op.get('number')!r}"
    return ChurnOp(
        op["mode"],
        int(op.get("number") or 0),
        int(op.get("intervalMilliseconds") or 500) / 1000,
        op.get("namespace") or f"namespace-{source.index}",
        templates,
    )


def resource_driver_op(op: dict[str, Any], source: Source) -> ResourceDriverOp:
    if "maxClaimsPerNodeParam" in op:
        max_claims = int(source.params[op["maxClaimsPerNodeParam"].lstrip("$")])
    else:
        max_claims = int(op.get("maxClaimsPerNode", 0))
    return ResourceDriverOp(op["driverName"], max_claims, op["nodes"])


def alloc_claims_op(op: dict[str, Any], _source: Source) -> AllocClaimsOp:
    return AllocClaimsOp(op.get("namespace") or "")


def implicit_extended_resources(template: dict[str, Any]) -> list[str]:
    """The DeviceClass extended resources (``deviceclass.resource.kubernetes.io/<class>``)
    a pod template asks for."""
    return sorted(
        str(name)
        for container in (template.get("spec") or {}).get("containers") or []
        for name in ((container.get("resources") or {}).get("requests") or {})
        if str(name).startswith("deviceclass.resource.kubernetes.io/")
    )


def refused_feature(case: dict[str, Any], folder: Path) -> str:
    """A DRA feature the case uses that rl-scheduler does not implement ("" if none),
    named before any operation this benchmark does not perform."""
    for op in case["workloadTemplate"]:
        if op["opcode"] == "createAny":
            manifest = render(folder / op["templatePath"], 0, 1)
            if isinstance(manifest, dict) and str(manifest.get("apiVersion", "")).startswith(
                "resource.k8s.io/"
            ):
                refused = refused_dra_object(manifest, versions=False)
                if refused:
                    return f"createAny of {manifest.get('kind')} {op['templatePath']}: {refused}"
        if op["opcode"] == "createPods" and op.get("podTemplatePath"):
            pod = render(folder / op["podTemplatePath"], 0, 1)
            implicit = implicit_extended_resources(pod) if isinstance(pod, dict) else []
            if implicit:
                return f"{op['podTemplatePath']}: {implicit[0]}: {DRA_EXTENDED}"
    return ""


def _refused(op: dict[str, Any]) -> str:
    """Why this benchmark does not perform ``op`` ("" when it does)."""
    opcode = op["opcode"]
    if opcode not in PARSERS and opcode != "createPodSets":
        return f"{opcode}: {REFUSED_OPCODES.get(opcode, 'not implemented')}"
    extra = sorted(set(op) - FIELDS[opcode])
    if extra:
        return f"{opcode} with {', '.join(extra)} (not implemented)"
    return _refused(op["createPodsOp"]) if opcode == "createPodSets" else ""


PARSERS: dict[str, Callable[[dict[str, Any], Source], Op | str]] = {
    "createNodes": nodes_op,
    "createNamespaces": namespaces_op,
    "createPods": pods_op,
    "createAny": any_op,
    "barrier": barrier_op,
    "deletePods": delete_pods_op,
    "churn": churn_op,
    "createResourceDriver": resource_driver_op,
    "allocResourceClaims": alloc_claims_op,
}


def plan(path: Path, case: dict[str, Any], nodes: int) -> Plan | str:
    """The test case at ``nodes`` nodes, or the reason it is skipped (an operation this
    benchmark does not perform before a size it has no workload for)."""
    if case["name"] in GO_SETUP:
        return GO_SETUP[case["name"]]
    feature = refused_feature(case, path.parent)
    if feature:
        return feature
    for op in case["workloadTemplate"]:
        refused = _refused(op)
        if refused:
            return refused
    sized = sized_params(case, nodes)
    if isinstance(sized, str):
        workloads = case.get("workloads", [])
        sizes = sorted({n for w in workloads if (n := workload_nodes(w["name"]) or counted_nodes(case, w))})
        return f"{sized} (kube's: {', '.join(map(str, sizes)) or 'none'} nodes)"
    workload, params = sized
    result = Plan(case["name"], workload, nodes)
    for index, op in enumerate(unrolled(case["workloadTemplate"], params)):
        refused = _refused(op)
        if refused:
            return refused
        parsed = PARSERS[op["opcode"]](op, Source(index, params, case, path.parent))
        if isinstance(parsed, str):
            return parsed
        result.ops.append(parsed)
    if not result.measured_pods:
        return "no measured pods"
    return result
