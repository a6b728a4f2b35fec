"""The scheduler_perf benchmark's newer operations as plans (namespaces from a template,
pod sets, createAny, priorities, sizing without a 500Nodes workload), and its node-level
check of a placement (resources, taints, a node named in a term's fields)."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from scheduler_perf_checks import broken_constraints
from scheduler_perf_fit import broken_fit, pod_requests, quantity
from scheduler_perf_ops import AnyOp, ChurnOp, DeletePodsOp, NamespacesOp, Plan, PodsOp
from scheduler_perf_plan import instance, plan, sized_params, workload_nodes

SPEC: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}]}
POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "spec": SPEC}
HIGH = {**POD, "spec": {**SPEC, "priority": 10}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"labels": {"team": "devops"}}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"generateName": "service-"}, "spec": {}}
CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c-{{.Index}}"}}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, manifest in [
        ("pod.yaml", POD),
        ("high.yaml", HIGH),
        ("ns.yaml", NAMESPACE),
        ("service.yaml", SERVICE),
        ("claim.yaml", CLAIM),
    ]:
        (tmp_path / name).write_text(yaml.safe_dump(manifest))
    return tmp_path


def case(ops: list[dict[str, Any]], **params: int) -> dict[str, Any]:
    return {
        "name": "Case",
        "defaultPodTemplatePath": "pod.yaml",
        "workloadTemplate": [{"opcode": "createNodes", "countParam": "$initNodes"}, *ops],
        "workloads": [{"name": "5Nodes", "params": {"initNodes": 5, **params}}],
    }


def make_plan(folder: Path, ops: list[dict[str, Any]], **params: int) -> Plan | str:
    (folder / "node.yaml").write_text(yaml.safe_dump({"kind": "Node", "status": {"capacity": {"cpu": "4"}}}))
    spec = case(ops, **params)
    spec["workloadTemplate"][0]["nodeTemplatePath"] = "node.yaml"
    return plan(folder / "performance-config.yaml", spec, 5)


MEASURED = {"opcode": "createPods", "count": 3, "collectMetrics": True, "namespace": "measure-ns-0"}


def test_namespaces_from_a_template_and_pod_sets(folder: Path) -> None:
    planned = make_plan(
        folder,
        [
            {
                "opcode": "createNamespaces",
                "prefix": "init-ns",
                "count": 2,
                "namespaceTemplatePath": "ns.yaml",
            },
            {
                "opcode": "createPodSets",
                "countParam": "$sets",
                "namespacePrefix": "init-ns",
                "createPodsOp": {"opcode": "createPods", "countParam": "$perSet"},
            },
            MEASURED,
        ],
        sets=2,
        perSet=4,
    )
    assert isinstance(planned, Plan)
    assert planned.ops[1] == NamespacesOp(("init-ns-0", "init-ns-1"), {"team": "devops"})
    pods = [op for op in planned.ops if isinstance(op, PodsOp)]
    assert [(op.namespace, op.count, op.measured) for op in pods] == [
        ("init-ns-0", 4, False),
        ("init-ns-1", 4, False),
        ("measure-ns-0", 3, True),
    ]


def test_default_namespace_counts_unrolled_operations(folder: Path) -> None:
    planned = make_plan(
        folder,
        [
            {
                "opcode": "createPodSets",
                "count": 2,
                "namespacePrefix": "ns",
                "createPodsOp": {"opcode": "createPods", "count": 1},
            },
            {"opcode": "createPods", "count": 1, "collectMetrics": True},
        ],
    )
    assert isinstance(planned, Plan)
    # nodes, ns-0, ns-1, then the measured pods: kube's fourth op
    assert [op.namespace for op in planned.ops if isinstance(op, PodsOp)] == ["ns-0", "ns-1", "namespace-3"]


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        pytest.param(
            {"opcode": "createAny", "namespace": "service-ns", "templatePath": "service.yaml"},
            AnyOp(
                "service-ns",
                "services",
                ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "service-0"}, "spec": {}},),
            ),
            id="a service, named from generateName",
        ),
        pytest.param(
            {"opcode": "createAny", "templatePath": "service.yaml"},
            "createAny of Service: namespace None does not fit its scope",
            id="a service without a namespace",
        ),
        pytest.param(
            {"opcode": "createAny", "templatePath": "claim.yaml", "namespace": "x"},
            AnyOp("x", "resourceclaims", ({**CLAIM, "metadata": {"name": "c-0"}},)),
            id="a DRA claim",
        ),
    ],
)
def test_create_any(folder: Path, op: dict[str, Any], expected: AnyOp | str) -> None:
    planned = make_plan(folder, [op, MEASURED])
    assert (planned.ops[1] if isinstance(planned, Plan) else planned) == expected


@pytest.mark.parametrize(
    ("init", "measured", "priorities", "preempts"),
    [
        pytest.param("pod.yaml", "high.yaml", {10}, True, id="measured outrank init"),
        pytest.param("high.yaml", "pod.yaml", {10}, False, id="init outrank measured"),
        pytest.param("pod.yaml", "pod.yaml", set(), False, id="no priorities"),
    ],
)
def test_priorities(folder: Path, init: str, measured: str, priorities: set[int], preempts: bool) -> None:
    planned = make_plan(
        folder,
        [
            {"opcode": "createPods", "count": 4, "podTemplatePath": init},
            {**MEASURED, "podTemplatePath": measured},
        ],
    )
    assert isinstance(planned, Plan)
    assert (planned.priorities, planned.preempts) == (priorities, preempts)


def test_sized_from_the_smallest_large_workload() -> None:
    # PreemptionBasic: 5Nodes and 1000Nodes; at 500 nodes everything halves, measured too
    spec = {
        "workloads": [
            {"name": "5Nodes", "params": {"initNodes": 5, "initPods": 20, "measurePods": 5}},
            {"name": "1000Nodes", "params": {"initNodes": 1000, "initPods": 4000, "measurePods": 1000}},
            {"name": "5000Nodes", "params": {"initNodes": 5000, "initPods": 1, "measurePods": 1}},
        ]
    }
    assert sized_params(spec, 500) == ("1000Nodes", {"initNodes": 500, "initPods": 2000, "measurePods": 500})


@pytest.mark.parametrize(
    ("text", "value"),
    [("100m", Decimal("0.1")), ("4", Decimal(4)), ("500Mi", Decimal(500 * 2**20)), ("1e3", Decimal(1000))],
)
def test_quantity(text: str, value: Decimal) -> None:
    assert quantity(text) == value


def test_pod_requests_take_the_larger_of_containers_and_init() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "500m"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
            "overhead": {"cpu": "100m"},
        }
    }
    # cpu max(1.5, 2) + 0.1; memory max(0, 1Gi)
    assert pod_requests(pod) == {"cpu": Decimal("2.1"), "memory": Decimal(2**30)}


def node(
    name: str, cpu: str = "4", pods: str = "110", taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "pods": pods}},
    }


def pod(name: str, on: str | None, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"nodeName": on, "containers": [{"resources": {"requests": {"cpu": cpu}}}], **spec},
    }


TAINT = {"key": "k", "value": "v", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("pods", "nodes", "broken"),
    [
        # 3 + 1 = 4 of 4 cpu
        pytest.param([pod("a", "n1", "3"), pod("b", "n1", "1")], [node("n1")], 0, id="cpu full"),
        # 3 + 1.5 = 4.5 > 4
        pytest.param([pod("a", "n1", "3"), pod("b", "n1", "1500m")], [node("n1")], 1, id="cpu over"),
        pytest.param([pod("a", "n1"), pod("b", "n1")], [node("n1", pods="1")], 1, id="pods over"),
        pytest.param([pod("a", None, "9")], [node("n1")], 0, id="pending pods do not count"),
        pytest.param([pod("a", "n1")], [node("n1", taints=[TAINT])], 1, id="taint not tolerated"),
        # the node lists no foo.com/bar: kube counts 0 allocatable
        pytest.param(
            [
                {
                    **pod("a", "n1"),
                    "spec": {
                        "nodeName": "n1",
                        "containers": [{"resources": {"requests": {"foo.com/bar": "1"}}}],
                    },
                }
            ],
            [node("n1")],
            1,
            id="extended resource the node lacks",
        ),
        pytest.param(
            [pod("a", "n1", tolerations=[{"key": "k", "operator": "Exists"}])],
            [node("n1", taints=[TAINT])],
            0,
            id="taint tolerated",
        ),
        pytest.param(
            [pod("a", "n1", tolerations=[{"key": "k", "value": "w"}])],
            [node("n1", taints=[TAINT])],
            1,
            id="another value",
        ),
        pytest.param(
            [pod("a", "n1")],
            [node("n1", taints=[{**TAINT, "effect": "PreferNoSchedule"}])],
            0,
            id="soft taint",
        ),
    ],
)
def test_broken_fit(pods: list[dict[str, Any]], nodes: list[dict[str, Any]], broken: int) -> None:
    assert len(broken_fit(pods, nodes)) == broken


@pytest.mark.parametrize(("on", "broken"), [("named", 0), ("other", 1)])
def test_match_fields_name_the_node(on: str, broken: int) -> None:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["named"]}]}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    nodes: list[dict[str, Any]] = [{"metadata": {"name": n, "labels": {}}} for n in ("named", "other")]
    daemon = {
        "metadata": {"name": "d", "namespace": "ns", "labels": {}},
        "spec": {"nodeName": on, "affinity": affinity},
    }
    assert len(broken_constraints([daemon], nodes, {})) == broken


@pytest.mark.parametrize(
    ("name", "nodes"),
    [
        ("500Nodes", 500),
        ("1Node_10GatedPods", 1),
        ("10Node_100DeletingPods", 10),
        ("5Nodes/1Init/10Pods", 5),
        ("5kNodes/100Init/10kPods", 5000),
        ("5000Nodes_10000Pods_QueueingHintsEnabled", 5000),
        ("fast", None),
        ("500pods_500nodes", None),
    ],
)
def test_workload_nodes(name: str, nodes: int | None) -> None:
    assert workload_nodes(name) == nodes


def test_sized_prefers_the_plain_workload_of_a_size() -> None:
    spec = {
        "workloads": [
            {"name": "5Nodes/1Init/10Pods", "params": {"measurePods": 10}},
            {"name": "5Nodes/1Init/10Pods_QueueingHintsEnabled", "params": {"measurePods": 11}},
            {"name": "10Node_Gated", "params": {"measurePods": 12}},
            {"name": "10Nodes", "params": {"measurePods": 13}},
        ]
    }
    assert sized_params(spec, 5) == ("5Nodes/1Init/10Pods", {"measurePods": 10})
    assert sized_params(spec, 10) == ("10Nodes", {"measurePods": 13})


GATED_POD = {**POD, "spec": {**SPEC, "schedulingGates": [{"name": "hold"}]}}


def test_gated_pods_a_barrier_and_deletions(folder: Path) -> None:
    (folder / "gated.yaml").write_text(yaml.safe_dump(GATED_POD))
    planned = make_plan(
        folder,
        [
            {
                "opcode": "createPods",
                "count": 2,
                "podTemplatePath": "gated.yaml",
                "skipWaitToCompletion": True,
            },
            {"opcode": "barrier", "stageRequirement": "Attempted"},
            {"opcode": "createPods", "count": 3},
            {
                "opcode": "deletePods",
                "namespace": "namespace-3",
                "deletePodsPerSecond": 50,
                "skipWaitToCompletion": True,
            },
            {"opcode": "createPods", "count": 4, "collectMetrics": True},
        ],
    )
    assert isinstance(planned, Plan)
    pods = [op for op in planned.ops if isinstance(op, PodsOp)]
    assert [(op.count, op.background, op.measured) for op in pods] == [
        (2, True, False),
        (3, False, False),
        (4, False, True),
    ]
    assert DeletePodsOp("namespace-3", 50.0) in planned.ops
    assert planned.barrier_stage == "Attempted"
    assert planned.replaces_init  # the deletions take init pods


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        pytest.param(
            {"opcode": "deletePods", "namespace": "n"},
            "deletePods waited for or by label outside a case with a metric window (not implemented)",
            id="waited for",
        ),
        pytest.param(
            {"opcode": "churn", "mode": "recreate", "templatePaths": ["pod.yaml"]},
            "churn mode 'recreate' with number None",
            id="recreate without a number",
        ),
        pytest.param(
            {"opcode": "churn", "mode": "create", "templatePaths": ["claim.yaml"]},
            "churn of resource.k8s.io/v1 ResourceClaim (not implemented)",
            id="churn of a kind not made",
        ),
        pytest.param(
            {"opcode": "updateAny"},
            "updateAny outside a case with a metric window (not implemented)",
            id="updates without a window",
        ),
    ],
)
def test_refused_operations(folder: Path, op: dict[str, Any], expected: str) -> None:
    assert make_plan(folder, [op, MEASURED]) == expected


def test_churn(folder: Path) -> None:
    planned = make_plan(
        folder,
        [
            {"opcode": "createPods", "count": 4},
            {
                "opcode": "churn",
                "mode": "create",
                "templatePaths": ["high.yaml", "service.yaml"],
                "intervalMilliseconds": 200,
            },
            MEASURED,
        ],
    )
    assert isinstance(planned, Plan)
    churn = planned.ops[2]
    assert isinstance(churn, ChurnOp)
    assert (churn.mode, churn.number, churn.interval_s, churn.namespace) == ("create", 0, 0.2, "namespace-2")
    assert [t["kind"] for t in churn.templates] == ["Pod", "Service"]
    assert planned.priorities == {10}  # the churned pods' class is made too
    assert planned.replaces_init
    assert planned.barrier_stage == ""


def test_indexed_templates_are_filled_in_per_object() -> None:
    template: dict[str, Any] = {
        "metadata": {"name": "p-{{.Index}}"},
        "status": {"capacity": {"foo.com/bar-{{.Index}}": 1}},
    }
    assert instance(template, 3, 10) == {
        "metadata": {"name": "p-3"},
        "status": {"capacity": {"foo.com/bar-3": 1}},
    }
    assert template["metadata"]["name"] == "p-{{.Index}}"


def test_node_count_of_a_workload_without_one_in_its_name() -> None:
    # SchedulingWithExtendedResource's "fast": 1 plain node and 10 with the resource
    spec = {
        "workloadTemplate": [
            {"opcode": "createNodes", "countParam": "$without"},
            {"opcode": "createNodes", "countParam": "$with"},
            {"opcode": "createPods", "countParam": "$measurePods"},
        ],
        "workloads": [{"name": "fast", "params": {"without": 1, "with": 10, "measurePods": 10}}],
    }
    assert sized_params(spec, 11) == ("fast", {"without": 1, "with": 10, "measurePods": 10})


def test_other_template_actions_are_refused(folder: Path) -> None:
    (folder / "ranged.yaml").write_text(yaml.safe_dump({**POD, "metadata": {"name": "{{range .X}}"}}))
    assert make_plan(folder, [{**MEASURED, "podTemplatePath": "ranged.yaml"}]) == (
        "ranged.yaml: a text/template this benchmark does not render"
    )


SPREAD = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}


@pytest.mark.parametrize(
    ("policy", "min_domains", "placed", "broken"),
    [
        # 2 untainted nodes with a pod each; the tainted n3 has none
        pytest.param({"nodeTaintsPolicy": "Honor"}, None, ["n1", "n2"], 0, id="tainted node not a domain"),
        # kube's default Ignore: n3 is a domain with 0 pods, skew 1 - 0 = 1
        pytest.param({}, None, ["n1", "n2"], 0, id="tainted node a domain, skew 1"),
        # two on n1: Honor 2 - 0 (n2) = 2 > 1
        pytest.param({"nodeTaintsPolicy": "Honor"}, None, ["n1", "n1"], 2, id="skew 2"),
        # one domain of the 3 minDomains asks for: the minimum is 0, 2 - 0 > 1
        pytest.param(
            {"nodeTaintsPolicy": "Honor"}, 3, ["n1", "n1", "n2", "n2"], 4, id="fewer than minDomains"
        ),
    ],
)
def test_spread_honours_the_policies(
    policy: dict[str, str], min_domains: int | None, placed: list[str], broken: int
) -> None:
    host = "kubernetes.io/hostname"
    nodes = [
        {"metadata": {"name": n, "labels": {host: n}}, "spec": {"taints": taints}}
        for n, taints in [("n1", []), ("n2", []), ("n3", [{"key": "foo", "effect": "NoSchedule"}])]
    ]
    constraint = {**SPREAD, **policy, "labelSelector": {"matchLabels": {"foo": "bar"}}}
    if min_domains:
        constraint["minDomains"] = min_domains
    pods = [
        {
            "metadata": {"name": f"p{i}", "namespace": "ns", "labels": {"foo": "bar"}},
            "spec": {"nodeName": on, "topologySpreadConstraints": [constraint]},
        }
        for i, on in enumerate(placed)
    ]
    assert len(broken_constraints(pods, nodes, {})) == broken


def test_spread_fields_as_go_reads_them() -> None:
    pytest.importorskip("kubernetes")  # scheduler_perf_objects talks to the API
    from scheduler_perf_objects import pod_manifest  # noqa: PLC0415

    template = {
        "spec": {"containers": [], "topologySpreadConstraints": [{"MaxSkew": 1, "NodeTaintsPolicy": "Honor"}]}
    }
    pod = pod_manifest(template, "p", "s", "r")
    assert pod["spec"]["topologySpreadConstraints"] == [{"maxSkew": 1, "nodeTaintsPolicy": "Honor"}]
