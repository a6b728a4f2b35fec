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
from dataclasses import dataclass, replace
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
    MetricsOp,
    NamespacesOp,
    NodesOp,
    Op,
    Plan,
    PodsOp,
    ResourceDriverOp,
    UpdateOp,
)
from scheduler_perf_source import load_yaml, scheduler_perf_dir

# Opcodes this benchmark does not perform (any opcode without a parser skips the test case).
REFUSED_OPCODES: dict[str, str] = {}
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
            "steadyState",
            "steadyStateParam",
            "duration",
            "durationParam",
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
    "barrier": frozenset({"opcode", "stageRequirement", "labelSelector", "namespaces"}),
    "deletePods": frozenset(
        {"opcode", "namespace", "deletePodsPerSecond", "skipWaitToCompletion", "labelSelector"}
    ),
    "startCollectingMetrics": frozenset({"opcode", "name", "namespaces", "labelSelector"}),
    "stopCollectingMetrics": frozenset({"opcode"}),
    "updateAny": frozenset(
        {"opcode", "count", "countParam", "templatePath", "updatePerSecond", "namespace", "subresources"}
    ),
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
# and kube's ``DivideInt`` and ``Mod`` of two of ``.Index``, ``.Count`` and a number.
_OPERAND = r"(\.Index|\.Count|\d+)"
TEMPLATE_ACTION = re.compile(
    r"\{\{\s*(?:\.(Index|Count)|(DivideInt|Mod)\s+" + _OPERAND + r"\s+" + _OPERAND + r")\s*\}\}"
)
# The opcodes of a case that makes it run in sequence (``Plan.in_sequence``); the
# operations only such a case may have are refused in any other.
WINDOW_OPCODE = "startCollectingMetrics"
# The kinds ``updateAny`` writes, as (apiVersion, kind).
UPDATE_KINDS = frozenset({("v1", "Pod"), ("v1", "Node")})
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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

    def operand(token: str) -> int:
        return index if token == ".Index" else count if token == ".Count" else int(token)

    def value(match: re.Match[str]) -> str:
        field_, function, left, right = match.groups()
        if field_:
            return str(index if field_ == "Index" else count)
        a, b = operand(left), operand(right)
        if b == 0:  # Go panics; left for the check after it, which refuses the template
            return match.group(0)
        return str(a // b if function == "DivideInt" else a % b)

    return TEMPLATE_ACTION.sub(value, text) if "{{" in text else text


def template_file(path: Path, name: str) -> tuple[dict[str, Any], str] | str:
    """A pod or node template as its first object and, when it has template actions, its
    text (rendered per object, as kube renders it before reading the YAML: an action may
    stand where a number goes); or why not (an action this benchmark does not render)."""
    text = path.read_text()
    if "{{" not in text:
        return yaml.load(text, Loader=_LOADER), ""
    first = fill(text, 0, 1)
    if "{{" in first:
        return f"{name}: a text/template this benchmark does not render"
    return yaml.load(first, Loader=_LOADER), text


def instance(template: dict[str, Any], index: int, count: int, text: str = "") -> dict[str, Any]:
    """Object ``index`` of ``count``: ``text`` rendered and read when given (``template_file``),
    else ``template`` with the actions inside its strings filled in."""
    if text:
        from_text: dict[str, Any] = yaml.load(fill(text, index, count), Loader=_LOADER)
        return from_text
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
    loaded = template_file(source.folder / template_path, template_path)
    if isinstance(loaded, str):
        return loaded
    template, text = loaded
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
        text,
    )


def namespaces_op(op: dict[str, Any], source: Source) -> NamespacesOp:
    count = _count(op, source.params)
    template_path = op.get("namespaceTemplatePath")
    template = load_yaml(source.folder / template_path) if template_path else {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    return NamespacesOp(tuple(f"{op['prefix']}-{i}" for i in range(count)), labels)


def pods_op(op: dict[str, Any], source: Source) -> PodsOp | str:
    template_path = op.get("podTemplatePath") or source.case.get("defaultPodTemplatePath")
    loaded = (
        template_file(source.folder / template_path, template_path) if template_path else (base_pod(), "")
    )
    if isinstance(loaded, str):
        return loaded
    template, text = loaded
    implicit = implicit_extended_resources(template)
    if implicit:
        return f"{template_path}: {implicit[0]}: {DRA_EXTENDED}"
    volume_path = op.get("persistentVolumeTemplatePath")
    claim_path = op.get("persistentVolumeClaimTemplatePath")
    if bool(volume_path) != bool(claim_path):
        return "createPods with only one of a volume and a claim template"
    steady = op.get("steadyState", False)
    if "steadyStateParam" in op:
        steady = source.params[op["steadyStateParam"].lstrip("$")]
    duration = source.params[op["durationParam"].lstrip("$")] if "durationParam" in op else op.get("duration")
    steady_s = go_duration(str(duration)) if steady and duration else 0.0
    if steady and (steady_s <= 0 or not op.get("collectMetrics") or op.get("skipWaitToCompletion")):
        return "createPods in steady state without a duration, unmeasured or not waited for (not implemented)"
    return PodsOp(
        _count(op, source.params),
        op.get("namespace", f"namespace-{source.index}"),
        template,
        bool(op.get("collectMetrics")),
        load_yaml(source.folder / volume_path) if volume_path else None,
        load_yaml(source.folder / claim_path) if claim_path else None,
        background=bool(op.get("skipWaitToCompletion")),
        steady_s=steady_s,
        text=text,
    )


GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def go_duration(text: str) -> float:
    """Seconds in a Go duration (``10s``, ``1m30s``, ``500ms``); 0 for one not read."""
    parts = GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return 0.0
    return sum(float(n) * GO_UNITS[u] for n, u in parts)


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
    return BarrierOp(
        op.get("stageRequirement") or "Scheduled",
        dict(op.get("labelSelector") or {}),
        tuple(op.get("namespaces") or ()),
    )


def delete_pods_op(op: dict[str, Any], _source: Source) -> DeletePodsOp:
    return DeletePodsOp(
        op["namespace"],
        float(op.get("deletePodsPerSecond") or 0),
        dict(op.get("labelSelector") or {}),
        wait=not op.get("skipWaitToCompletion"),
    )


def metrics_op(op: dict[str, Any], _source: Source) -> MetricsOp:
    return MetricsOp(
        op["opcode"] == WINDOW_OPCODE, tuple(op.get("namespaces") or ()), dict(op.get("labelSelector") or {})
    )


def update_op(op: dict[str, Any], source: Source) -> UpdateOp | str:
    count = _count(op, source.params) if ("count" in op or "countParam" in op) else 1
    path = op.get("templatePath")
    if not path:
        return "updateAny without a templatePath"
    loaded = template_file(source.folder / path, path)
    if isinstance(loaded, str):
        return loaded
    first, text = loaded
    kind = (first.get("apiVersion", ""), first.get("kind", ""))
    if kind not in UPDATE_KINDS:
        return f"updateAny of {kind[0]} {kind[1]} (not implemented)"
    namespace = op.get("namespace") or ""
    if bool(namespace) != (kind[1] == "Pod"):
        return f"updateAny of {kind[1]}: namespace {namespace!r} does not fit its scope"
    subresources = list(op.get("subresources") or [])
    if subresources not in ([], ["resize"]) or (subresources and kind[1] != "Pod"):
        return f"updateAny of {kind[1]} through {subresources} (not implemented)"
    return UpdateOp(
        count,
        kind[1],
        namespace,
        text or (source.folder / path).read_text(),
        float(op.get("updatePerSecond") or 0),
        subresources[0] if subresources else "",
    )


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


def _refused(op: dict[str, Any], in_sequence: bool) -> str:
    """Why this benchmark does not perform ``op`` ("" when it does); ``in_sequence``: its
    case has a metric window (only such a case runs updates, waits on deletions and
    selects pods at a barrier)."""
    opcode = op["opcode"]
    if opcode not in PARSERS and opcode != "createPodSets":
        return f"{opcode}: {REFUSED_OPCODES.get(opcode, 'not implemented')}"
    extra = sorted(set(op) - FIELDS[opcode])
    if extra:
        return f"{opcode} with {', '.join(extra)} (not implemented)"
    if not in_sequence:
        if opcode == "updateAny":
            return "updateAny outside a case with a metric window (not implemented)"
        if opcode == "deletePods" and (not op.get("skipWaitToCompletion") or op.get("labelSelector")):
            return "deletePods waited for or by label outside a case with a metric window (not implemented)"
        if opcode == "barrier" and (op.get("labelSelector") or op.get("namespaces")):
            return "barrier on some pods outside a case with a metric window (not implemented)"
    return _refused(op["createPodsOp"], in_sequence) if opcode == "createPodSets" else ""


def performance_workload(case: dict[str, Any]) -> tuple[str, dict[str, Any], int] | None:
    """The case's first workload kube labels ``performance``, with its node count, or None."""
    for workload in case.get("workloads", []):
        if "performance" in (workload.get("labels") or []):
            nodes = workload_nodes(workload["name"]) or counted_nodes(case, workload)
            if nodes:
                return workload["name"], dict(workload.get("params") or {}), nodes
    return None


def matches(labels: dict[str, Any], selector: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def in_window(window: MetricsOp, op: PodsOp) -> bool:
    """Whether ``window`` measures ``op``'s pods: in its namespaces (any, when it names
    none), with its selector's labels."""
    labels = (op.template.get("metadata") or {}).get("labels") or {}
    return (not window.namespaces or op.namespace in window.namespaces) and matches(labels, window.selector)


def windowed(ops: list[Op]) -> list[Op]:
    """``ops`` with the pods a metric window measures (made while it is open, ``in_window``)
    marked ``measured``."""
    marked: list[Op] = []
    window: MetricsOp | None = None
    for op in ops:
        if isinstance(op, MetricsOp):
            window = op if op.collecting else None
        measured = isinstance(op, PodsOp) and window is not None and in_window(window, op)
        marked.append(replace(op, measured=True) if isinstance(op, PodsOp) and measured else op)
    return marked


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
    "startCollectingMetrics": metrics_op,
    "stopCollectingMetrics": metrics_op,
    "updateAny": update_op,
}


def plan(path: Path, case: dict[str, Any], nodes: int) -> Plan | str:
    """The test case at ``nodes`` nodes, or the reason it is skipped (an operation this
    benchmark does not perform before a size it has no workload for). From ``BASE_NODES``
    nodes on, a case whose workloads are all smaller (kube's event-handling and gated-pod
    cases, sized for what they test and not for the cluster) runs its ``performance``
    workload at kube's own size."""
    if case["name"] in GO_SETUP:
        return GO_SETUP[case["name"]]
    feature = refused_feature(case, path.parent)
    if feature:
        return feature
    in_sequence = any(op["opcode"] == WINDOW_OPCODE for op in case["workloadTemplate"])
    for op in case["workloadTemplate"]:
        refused = _refused(op, in_sequence)
        if refused:
            return refused
    sized = sized_params(case, nodes)
    own = performance_workload(case) if isinstance(sized, str) and nodes >= BASE_NODES else None
    if own is not None:
        workload, params, nodes = own
    elif isinstance(sized, str):
        workloads = case.get("workloads", [])
        sizes = sorted({n for w in workloads if (n := workload_nodes(w["name"]) or counted_nodes(case, w))})
        smaller = " and no performance one" if nodes >= BASE_NODES else ""
        return f"{sized}{smaller} (kube's: {', '.join(map(str, sizes)) or 'none'} nodes)"
    else:
        workload, params = sized
    result = Plan(case["name"], workload, nodes)
    for index, op in enumerate(unrolled(case["workloadTemplate"], params)):
        refused = _refused(op, in_sequence)
        if refused:
            return refused
        parsed = PARSERS[op["opcode"]](op, Source(index, params, case, path.parent))
        if isinstance(parsed, str):
            return parsed
        result.ops.append(parsed)
    if result.in_sequence:
        result.ops = windowed(result.ops)
    if not result.measured_pods:
        return "no measured pods"
    return result
