"""kube's scheduler_perf test cases as plans this benchmark can run: which operations,
how many nodes and pods, from which templates; or why a test case is skipped.

Sizes: the workload named ``<N>Nodes`` when the test case has one; otherwise its
``500Nodes`` workload with every count but ``measurePods`` (nodes, init pods) scaled by
N / 500, ``measurePods`` kept (kube's 5000-node workloads measure about as many pods as
its 500-node ones). ``labelNodePrepareStrategy`` gives node i value i mod the values
(kube picks one at random).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler_perf_source import load_yaml, scheduler_perf_dir

# Operations this benchmark performs; any other opcode skips the test case with a reason.
SUPPORTED_OPCODES = frozenset({"createNodes", "createNamespaces", "createPods"})
REFUSED_OPCODES = {
    "createResourceDriver": "DRA test driver (ResourceSlices published by kube's in-process driver)",
    "allocResourceClaims": "DRA claims allocated by the harness itself",
    "createAny": "arbitrary objects (DRA classes, claims, PVs) not rendered here yet",
    "churn": "churn operations (create/delete loops) not implemented yet",
    "barrier": "barrier waits on gated or unschedulable pods (not implemented yet)",
    "deletePods": "pod deletion while scheduling (not implemented yet)",
    "createPodSets": "pod sets over many namespaces (not implemented yet)",
    "startCollectingMetrics": "event-handling metric windows (not implemented yet)",
    "stopCollectingMetrics": "event-handling metric windows (not implemented yet)",
    "updateAny": "object updates while scheduling (not implemented yet)",
}
# Fields of a createPods / createNodes operation this benchmark honours.
POD_FIELDS = frozenset({"opcode", "count", "countParam", "namespace", "podTemplatePath", "collectMetrics"})
NODE_FIELDS = frozenset({"opcode", "count", "countParam", "nodeTemplatePath", "labelNodePrepareStrategy"})
NAMESPACE_FIELDS = frozenset({"opcode", "count", "countParam", "prefix"})
BASE_NODES = 500


@dataclass(frozen=True)
class NodesOp:
    count: int
    template: dict[str, Any]
    # labelNodePrepareStrategy: the label every node gets, with one of these values.
    label_key: str = ""
    label_values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NamespacesOp:
    names: tuple[str, ...]


@dataclass(frozen=True)
class PodsOp:
    count: int
    namespace: str
    template: dict[str, Any]
    measured: bool


@dataclass
class Plan:
    case: str
    workload: str  # the kube workload it was sized from
    nodes: int
    ops: list[NodesOp | NamespacesOp | PodsOp] = field(default_factory=list)

    @property
    def measured_pods(self) -> int:
        return sum(op.count for op in self.ops if isinstance(op, PodsOp) and op.measured)


def test_cases() -> list[tuple[Path, dict[str, Any]]]:
    """Every test case of every performance-config.yaml, with the file it is in."""
    root = scheduler_perf_dir()
    found = []
    for path in sorted(root.rglob("performance-config.yaml")):
        for case in load_yaml(path):
            found.append((path, case))
    return found


def sized_params(case: dict[str, Any], nodes: int) -> tuple[str, dict[str, Any]] | str:
    """``(workload name, params)`` for ``nodes``, or why there are none."""
    workloads = {w["name"]: w for w in case.get("workloads", [])}
    exact = workloads.get(f"{nodes}Nodes")
    if exact is not None:
        return exact["name"], dict(exact.get("params", {}))
    base = workloads.get(f"{BASE_NODES}Nodes")
    if base is None:
        return f"no {nodes}Nodes or {BASE_NODES}Nodes workload"
    params = dict(base.get("params", {}))
    scale = nodes / BASE_NODES
    for key, value in params.items():
        if key != "measurePods" and isinstance(value, int):
            params[key] = round(value * scale)
    return base["name"], params


def _count(op: dict[str, Any], params: dict[str, Any]) -> int:
    if "countParam" in op:
        return int(params[op["countParam"].lstrip("$")])
    return int(op.get("count", 0))


def plan(path: Path, case: dict[str, Any], nodes: int) -> Plan | str:
    """The test case at ``nodes`` nodes, or the reason it is skipped."""
    sized = sized_params(case, nodes)
    if isinstance(sized, str):
        return sized
    workload, params = sized
    folder = path.parent
    result = Plan(case["name"], workload, nodes)
    for index, op in enumerate(case["workloadTemplate"]):
        opcode = op["opcode"]
        if opcode not in SUPPORTED_OPCODES:
            return f"{opcode}: {REFUSED_OPCODES.get(opcode, 'not implemented')}"
        allowed = {"createNodes": NODE_FIELDS, "createPods": POD_FIELDS, "createNamespaces": NAMESPACE_FIELDS}
        extra = sorted(set(op) - allowed[opcode])
        if extra:
            return f"{opcode} with {', '.join(extra)} (not implemented)"
        if opcode == "createNodes":
            template = load_yaml(folder / op.get("nodeTemplatePath", "../templates/node-default.yaml"))
            strategy = op.get("labelNodePrepareStrategy") or {}
            result.ops.append(
                NodesOp(
                    _count(op, params),
                    template,
                    strategy.get("labelKey", ""),
                    tuple(strategy.get("labelValues", ())),
                )
            )
        elif opcode == "createNamespaces":
            count = _count(op, params)
            result.ops.append(NamespacesOp(tuple(f"{op['prefix']}-{i}" for i in range(count))))
        else:
            template_path = op.get("podTemplatePath") or case.get("defaultPodTemplatePath")
            if template_path is None:
                return "createPods without a pod template"
            template = load_yaml(folder / template_path)
            if "priority" in (template.get("spec") or {}):
                # kube's test API server runs without Priority admission; ours would refuse
                # the pod (a PriorityClass per value is not made here yet).
                return f"{template_path}: spec.priority without a PriorityClass (not implemented)"
            namespace = op.get("namespace", f"namespace-{index}")
            result.ops.append(PodsOp(_count(op, params), namespace, template, bool(op.get("collectMetrics"))))
    if not result.measured_pods:
        return "no measured pods"
    return result
