"""The scheduler_perf benchmark's cases with a metric window (kube's event-handling
cases) as plans, kube's template actions where numbers go, the size of a case whose
workloads are all small, and how an ``updateAny`` template changes a pod."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scheduler_perf
import scheduler_perf_plan
from scheduler_perf_ops import BarrierOp, DeletePodsOp, MetricsOp, Plan, PodsOp, UpdateOp
from scheduler_perf_plan import fill, go_duration, instance, plan, template_file
from scheduler_perf_sequence import ROLE_LABEL, actuated, updated_pod

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"generateName": "p-"},
    "spec": {"containers": [{"name": "c"}]},
}
UNSCHED = {**POD, "metadata": {"name": "u-{{.Index}}", "labels": {"type": "unsched"}}}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n-{{ .Index }}"},
    "status": {"capacity": {"cpu": "1"}},
}
NODE_UPDATE = {**NODE, "status": {"capacity": {"cpu": "4"}}}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, manifest in [
        ("pod.yaml", POD),
        ("unsched.yaml", UNSCHED),
        ("node.yaml", NODE),
        ("node-update.yaml", NODE_UPDATE),
    ]:
        (tmp_path / name).write_text(yaml.safe_dump(manifest))
    return tmp_path


UNSCHED_LABEL = {"type": "unsched"}


def window_case(workloads: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "EventHandlingCase",
        "workloadTemplate": [
            {"opcode": "startCollectingMetrics", "namespaces": ["a", "b"], "labelSelector": UNSCHED_LABEL},
            {"opcode": "createNodes", "countParam": "$nodes", "nodeTemplatePath": "node.yaml"},
            {"opcode": "createPods", "countParam": "$pods", "podTemplatePath": "unsched.yaml",
             "namespace": "a", "skipWaitToCompletion": True},
            {"opcode": "createPods", "count": 2, "podTemplatePath": "pod.yaml", "namespace": "a"},
            {"opcode": "createPods", "count": 3, "podTemplatePath": "unsched.yaml", "namespace": "c",
             "skipWaitToCompletion": True},
            {"opcode": "barrier", "stageRequirement": "Attempted", "labelSelector": {"type": "unsched"}},
            {"opcode": "updateAny", "countParam": "$nodes", "templatePath": "node-update.yaml",
             "updatePerSecond": 100},
            {"opcode": "deletePods", "namespace": "a", "labelSelector": {"type": "blocker"}},
            {"opcode": "barrier", "namespaces": ["a"]},
            {"opcode": "stopCollectingMetrics"},
        ],
        "workloads": workloads,
    }  # fmt: skip


SMALL = {"name": "2Nodes_20Pods", "labels": ["integration-test"], "params": {"nodes": 2, "pods": 20}}
PERFORMANCE = {"name": "100Nodes_1000Pods", "labels": ["performance"], "params": {"nodes": 100, "pods": 1000}}


def test_a_window_measures_the_pods_it_selects(folder: Path) -> None:
    planned = plan(folder / "performance-config.yaml", window_case([SMALL, PERFORMANCE]), 2)
    assert isinstance(planned, Plan)
    assert planned.in_sequence
    assert (planned.workload, planned.nodes) == ("2Nodes_20Pods", 2)
    pods = [op for op in planned.ops if isinstance(op, PodsOp)]
    # in the window's namespaces with its label: measured; unlabelled, or namespace c: not
    assert [(op.namespace, op.count, op.measured, op.background) for op in pods] == [
        ("a", 20, True, True),
        ("a", 2, False, False),
        ("c", 3, False, True),
    ]
    assert planned.measured_pods == 20
    assert planned.ops[0] == MetricsOp(True, ("a", "b"), {"type": "unsched"})
    assert planned.ops[-1] == MetricsOp(False)
    assert BarrierOp("Attempted", {"type": "unsched"}) in planned.ops
    assert BarrierOp("Scheduled", {}, ("a",)) in planned.ops
    assert DeletePodsOp("a", 0.0, {"type": "blocker"}, wait=True) in planned.ops
    update = next(op for op in planned.ops if isinstance(op, UpdateOp))
    assert (update.count, update.kind, update.namespace, update.per_second) == (2, "Node", "", 100.0)
    assert yaml.safe_load(fill(update.text, 1, 2))["metadata"]["name"] == "n-1"


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        # from 500 nodes on, a case sized for what it tests runs kube's performance workload
        pytest.param(500, ("100Nodes_1000Pods", 100, 1000), id="performance size: kube's own"),
        pytest.param(1000, ("100Nodes_1000Pods", 100, 1000), id="the same at 1,000"),
        pytest.param(5, "no 5Nodes or 500Nodes workload (kube's: 2, 100 nodes)", id="small: skipped"),
    ],
)
def test_a_case_of_small_workloads_runs_at_kubes_size(folder: Path, nodes: int, expected: Any) -> None:
    planned = plan(folder / "performance-config.yaml", window_case([SMALL, PERFORMANCE]), nodes)
    if isinstance(expected, str):
        assert planned == expected
        return
    assert isinstance(planned, Plan)
    assert (planned.workload, planned.nodes, planned.measured_pods) == expected


def test_without_a_performance_workload_the_case_is_skipped(folder: Path) -> None:
    assert plan(folder / "performance-config.yaml", window_case([SMALL]), 500) == (
        "no 500Nodes or 500Nodes workload and no performance one (kube's: 2 nodes)"
    )


@pytest.mark.parametrize(
    ("text", "index", "count", "expected"),
    [
        ("{{ .Index }}", 3, 10, "3"),
        ("{{.Count}}", 3, 10, "10"),
        ("8{{ Mod .Index 12 }}", 13, 20, "81"),
        ("{{ DivideInt .Index 10 }}", 25, 100, "2"),
        ("{{ DivideInt 30000 .Count }}Mi", 0, 1000, "30Mi"),
        ("{{ Mod .Count .Index }}", 3, 10, "1"),
        ("{{ DivideInt 1 0 }}", 0, 1, "{{ DivideInt 1 0 }}"),  # Go panics: left, and refused after
        ("{{ range .X }}", 0, 1, "{{ range .X }}"),
    ],
)
def test_kubes_template_actions(text: str, index: int, count: int, expected: str) -> None:
    assert fill(text, index, count) == expected


def test_an_action_where_a_number_goes_is_rendered_before_the_yaml_is_read(tmp_path: Path) -> None:
    # kube renders the text, then reads the YAML: hostPort 8{{Mod .Index 12}} is a number
    path = tmp_path / "ports.yaml"
    path.write_text(
        "kind: Pod\nspec:\n  containers:\n  - name: c\n    ports:\n    - hostPort: 8{{ Mod .Index 12 }}\n"
        "    resources: {requests: {memory: '{{ DivideInt 30000 .Count }}Mi'}}\n"
    )
    loaded = template_file(path, "ports.yaml")
    assert not isinstance(loaded, str)
    template, text = loaded
    assert template["spec"]["containers"][0]["ports"][0]["hostPort"] == 80
    pod = instance(template, 5, 1000, text)
    container = pod["spec"]["containers"][0]
    assert (container["ports"][0]["hostPort"], container["resources"]["requests"]["memory"]) == (85, "30Mi")


def current_pod() -> dict[str, Any]:
    """A pod as the API server holds it: admission's toleration and volume mount added."""
    return {
        "metadata": {
            "name": "p",
            "resourceVersion": "7",
            "labels": {"color": "green", ROLE_LABEL: "unmeasured"},
        },
        "spec": {
            "nodeName": "n1",
            "schedulingGates": [{"name": "hold"}],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300}
            ],
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"memory": "30Mi"}},
                    "volumeMounts": [{"name": "token"}],
                }
            ],
        },
        "status": {"phase": "Running"},
    }


TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("desired_spec", "desired_labels", "expected_spec", "expected_labels"),
    [
        pytest.param(
            {
                "containers": [{"name": "c"}],
                "tolerations": [TOLERATION],
                "schedulingGates": [{"name": "hold"}],
            },
            {"type": "unsched"},
            {"tolerations": "both", "schedulingGates": [{"name": "hold"}], "resources": {}},
            {"type": "unsched"},
            id="toleration added, labels replaced",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"requests": {"memory": "1Mi"}}}]},
            {},
            {
                "tolerations": "admitted",
                "schedulingGates": None,
                "resources": {"requests": {"memory": "1Mi"}},
            },
            {},
            id="gates removed, resources changed",
        ),
    ],
)
def test_an_update_template_changes_the_pod_as_held(
    desired_spec: dict[str, Any],
    desired_labels: dict[str, str],
    expected_spec: dict[str, Any],
    expected_labels: dict[str, str],
) -> None:
    current = current_pod()
    admitted = current["spec"]["tolerations"]
    body = updated_pod(current, {"metadata": {"labels": desired_labels}, "spec": desired_spec})
    assert body["metadata"]["labels"] == {**expected_labels, ROLE_LABEL: "unmeasured"}
    assert body["metadata"]["resourceVersion"] == "7"  # a conflict is noticed, not overwritten
    tolerations = {"both": [*admitted, TOLERATION], "admitted": admitted}[expected_spec["tolerations"]]
    assert body["spec"]["tolerations"] == tolerations
    assert body["spec"].get("schedulingGates") == expected_spec["schedulingGates"]
    container = body["spec"]["containers"][0]
    assert (container["resources"], container["volumeMounts"]) == (
        expected_spec["resources"],
        [{"name": "token"}],
    )
    assert body["spec"]["nodeName"] == "n1"
    assert current == current_pod()  # the pod read is left as it was


def test_actuated_reports_each_containers_resources_as_its_spec_asks() -> None:
    pod = current_pod()
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"running": {}}}]
    assert actuated(pod)["status"]["containerStatuses"] == [
        {"name": "c", "state": {"running": {}}, "resources": {"requests": {"memory": "30Mi"}}}
    ]
    assert actuated(pod)["status"]["phase"] == "Running"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), ("1.5s", 1.5), ("10", 0.0), ("s", 0.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text) == seconds


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        pytest.param(
            {"steadyState": True, "durationParam": "$duration", "collectMetrics": True},
            10.0,
            id="steady for the workload's duration",
        ),
        pytest.param({"collectMetrics": True}, 0.0, id="made once"),
        pytest.param(
            {"steadyState": True, "collectMetrics": True},
            "createPods in steady state without a duration, unmeasured or not waited for (not implemented)",
            id="steady without a duration",
        ),
    ],
)
def test_pods_in_steady_state(folder: Path, op: dict[str, Any], expected: float | str) -> None:
    case = {
        "name": "Steady",
        "workloadTemplate": [
            {"opcode": "createNodes", "countParam": "$nodes", "nodeTemplatePath": "node.yaml"},
            {"opcode": "createPods", "count": 10, "podTemplatePath": "pod.yaml", "namespace": "test", **op},
        ],
        "workloads": [{"name": "empty_100nodes", "params": {"nodes": 100, "duration": "10s"}}],
    }
    planned = plan(folder / "performance-config.yaml", case, 100)
    if isinstance(expected, str):
        assert planned == expected
        return
    assert isinstance(planned, Plan)
    pods = [op for op in planned.ops if isinstance(op, PodsOp)]
    assert [(p.count, p.steady_s) for p in pods] == [(10, expected)]
    assert (planned.steady is not None) is (expected > 0)


def test_a_case_at_kubes_own_size_is_planned_once_for_every_node_count(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a case with a 500Nodes workload runs at each --nodes (scaled); one at kube's own
    # size (its performance workload) once
    scaled = {
        "name": "Scaled",
        "workloadTemplate": [
            {"opcode": "createNodes", "countParam": "$nodes", "nodeTemplatePath": "node.yaml"},
            {
                "opcode": "createPods",
                "countParam": "$pods",
                "podTemplatePath": "pod.yaml",
                "collectMetrics": True,
            },
        ],
        "workloads": [{"name": "500Nodes", "params": {"nodes": 500, "pods": 1000}}],
    }
    cases = [
        (folder / "performance-config.yaml", scaled),
        (folder / "performance-config.yaml", window_case([PERFORMANCE])),
    ]
    monkeypatch.setattr(scheduler_perf, "test_cases", lambda: cases)
    runnable, skipped = scheduler_perf.plans(scheduler_perf.parse_args(["--nodes", "500,1000"]))
    assert [(p.case, p.workload, p.nodes) for p in runnable] == [
        ("Scaled", "500Nodes", 500),
        ("EventHandlingCase", "100Nodes_1000Pods", 100),
        ("Scaled", "500Nodes", 1000),
    ]
    assert skipped == []


@pytest.mark.parametrize(
    ("case", "nodes", "grow"),
    [
        pytest.param("SchedulingBasic", 500, True, id="pods made, nothing removed"),
        pytest.param("TopologySpreading", 500, True, id="spreading, pods made only"),
        pytest.param("EventHandlingPodAdd", 500, True, id="pods added in stages"),
        pytest.param("EventHandlingPodDelete", 500, False, id="pods deleted"),
        pytest.param("EventHandlingPodUpdate", 500, False, id="pods updated"),
        pytest.param("EventHandlingNodeAdd", 500, False, id="nodes added after pods"),
        pytest.param("SteadyStateClusterResourceClaimTemplate", 500, False, id="steady state"),
    ],
)
def test_whether_a_case_only_adds_pods(case: str, nodes: int, grow: bool) -> None:
    """The spread check's condition (``scheduler_perf_checks``), on kube's own cases."""
    [(path, spec)] = [(p, c) for p, c in scheduler_perf_plan.test_cases() if c["name"] == case]
    planned = plan(path, spec, nodes)
    assert isinstance(planned, Plan)
    assert planned.counts_only_grow is grow
