"""Table tests for the node-local filters. Each row: a pod, the nodes (and pods already
on them), and per node the reasons it is rejected for ("" = fits)."""

from typing import Any

import pytest

from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.filters.gpu_share import GpuShare
from scheduler.plugins.filters.node_affinity import NodeAffinity
from scheduler.plugins.filters.node_name import NodeName
from scheduler.plugins.filters.node_ports import NodePorts
from scheduler.plugins.filters.node_resources_fit import NodeResourcesFit
from scheduler.plugins.filters.node_unschedulable import NodeUnschedulable
from scheduler.plugins.filters.taint_toleration import TaintToleration
from scheduler.plugins.filters.unsupported import Unsupported
from tests.builders import make_node, make_pod, make_state, pod_manifest, verdicts


def with_volumes(name: str, *volumes: dict[str, Any]) -> Any:
    manifest = pod_manifest(name)
    return pod_from_manifest({**manifest, "spec": {**manifest["spec"], "volumes": list(volumes)}})


def expect(**reasons: str | tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``n1=""`` fits, ``n1="reason"`` one reason, ``n1=("a", "b")`` several."""
    return {node: (r,) if isinstance(r, str) and r else tuple(r) for node, r in reasons.items()}


CASES = [
    # ---- NodeResourcesFit ----
    pytest.param(
        NodeResourcesFit(),
        make_pod(cpu="3", memory="1Gi"),
        [make_node("n1", cpu="4"), make_node("n2", cpu="2")],
        [],
        expect(n1="", n2="Insufficient cpu"),
        id="fit: cpu 3000m > 2000m free on n2",
    ),
    pytest.param(
        NodeResourcesFit(),
        make_pod(cpu="1", memory="6Gi"),
        [make_node("n1", cpu="4", memory="8Gi")],
        [(make_pod("old", cpu="3500m", memory="4Gi"), "n1")],
        expect(n1=("Insufficient cpu", "Insufficient memory")),
        id="fit: cpu 1000 > 4000-3500 and memory 6Gi > 8Gi-4Gi: both reasons",
    ),
    pytest.param(
        NodeResourcesFit(),
        make_pod(cpu="100m"),
        [make_node("n1", pods=1), make_node("n2", pods=2)],
        [(make_pod("old"), "n1"), (make_pod("old2"), "n2")],
        expect(n1="Too many pods", n2=""),
        id="fit: pods 1+1 > 1 on n1",
    ),
    pytest.param(
        NodeResourcesFit(),
        make_pod(),
        [make_node("n1", pods=0)],
        [],
        expect(n1="Too many pods"),
        id="fit: a pod with no requests still needs a pod slot",
    ),
    pytest.param(
        NodeResourcesFit(),
        make_pod(extra={"example.com/fpga": "1"}),
        [make_node("n1", extra={"example.com/fpga": "1"}), make_node("n2")],
        [],
        expect(n1="", n2="Insufficient example.com/fpga"),
        id="fit: extended resource only on n1",
    ),
    pytest.param(
        NodeResourcesFit(),
        make_pod(extra={"example.com/unknown": "1"}),
        [make_node("n1")],
        [],
        expect(n1="Insufficient example.com/unknown"),
        id="fit: a resource no node has",
    ),
    pytest.param(
        NodeResourcesFit(),
        make_pod(cpu="1e9"),
        [make_node("n1")],
        [],
        expect(n1="Insufficient cpu"),
        id="fit: absurd request",
    ),
    pytest.param(
        NodeResourcesFit(),
        make_pod(gpus=4),
        [make_node("n1", gpus=1), make_node("n2", gpus=2, hami=False), make_node("n3", gpus=4, hami=False)],
        [],
        expect(n1="", n2="Insufficient nvidia.com/gpu", n3=""),
        id="fit: nvidia.com/gpu counted as the kubelet counts it (n1: 1 GPU x 10 vGPUs)",
    ),
    # ---- GpuShare ----
    pytest.param(
        GpuShare(),
        make_pod(gpus=1, gpu_milli=500),
        [make_node("n1", gpus=1, model="T4"), make_node("n2", gpus=1, model="T4")],
        [(make_pod("old", gpus=1, gpu_milli=600), "n1")],
        expect(n1="Insufficient nvidia.com/gpu", n2=""),
        id="gpu: share 500 > 1000-600 free on n1's only GPU",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=1, gpu_milli=400),
        [make_node("n1", gpus=1, model="T4")],
        [(make_pod("old", gpus=1, gpu_milli=600), "n1")],
        expect(n1=""),
        id="gpu: share 400 <= 400 free",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=2),
        [make_node("n1", gpus=2, model="T4"), make_node("n2", gpus=4, model="T4"), make_node("n3")],
        [(make_pod("old", gpus=1, gpu_milli=100), "n1")],
        expect(n1="Insufficient nvidia.com/gpu", n2="", n3="Insufficient nvidia.com/gpu"),
        id="gpu: two whole GPUs: n1 has one fully free, n3 none",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=1, gpu_models="V100M16,V100M32"),
        [make_node("n1", gpus=1, model="V100M32"), make_node("n2", gpus=8, model="G3"), make_node("n3")],
        [],
        expect(
            n1="",
            n2="node(s) didn't match the pod's GPU type, UUID or mode",
            n3="node(s) didn't match the pod's GPU type, UUID or mode",
        ),
        id="gpu: type constraint (a substring of NVIDIA-V100M32)",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=1, gpu_memory=8000),
        [make_node("n1", gpus=1, gpu_memory=16384), make_node("n2", gpus=1, gpu_memory=16384)],
        [(make_pod("old", gpus=1, gpu_cores=10, gpu_memory=9000), "n1")],
        expect(n1="Insufficient nvidia.com/gpu", n2=""),
        id="gpu: memory 8000 > 16384-9000 MiB free on n1, whatever its cores",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=1, gpu_cores=10, gpu_memory=100),
        [make_node("n1", gpus=1, split=2), make_node("n2", gpus=1, split=3)],
        [(make_pod(f"old{i}", gpus=1, gpu_cores=10, gpu_memory=100), "n1") for i in range(2)]
        + [
            (make_pod(f"old{i}", namespace="other", gpus=1, gpu_cores=10, gpu_memory=100), "n2")
            for i in range(2)
        ],
        expect(n1="Insufficient nvidia.com/gpu", n2=""),
        id="gpu: vGPU slots: n1's 2 taken, n2 has 1 of 3 left",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=1),
        [make_node("n1", gpus=1), make_node("n2", gpus=1)],
        [(make_pod("old", gpus=1, gpu_cores=0, gpu_memory=100), "n1")],
        expect(n1="Insufficient nvidia.com/gpu", n2=""),
        id="gpu: a whole GPU needs one nobody uses, even without cores (HAMi's exclusive rule)",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=1, gpu_cores=0, gpu_memory=100),
        [make_node("n1", gpus=1), make_node("n2", gpus=1)],
        [(make_pod("old", gpus=1, gpu_milli=1000), "n1")],
        expect(n1="Insufficient nvidia.com/gpu", n2=""),
        id="gpu: no cores asked, but a GPU whose cores are all taken refuses it",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=1, gpu_milli=300),
        [make_node("n1", gpus=2, hami=False), make_node("n2", gpus=1)],
        [],
        expect(n1="node(s) had no HAMi vGPU devices (GPUs given whole)", n2=""),
        id="gpu: a share needs HAMi; the plain device plugin gives GPUs whole",
    ),
    pytest.param(
        GpuShare(),
        make_pod(gpus=1, annotations={"nvidia.com/use-gpuuuid": "GPU-n2-1"}),
        [make_node("n1", gpus=2), make_node("n2", gpus=2)],
        [(make_pod("old", gpus=1, gpu_milli=1000), "n2")],
        expect(n1="node(s) didn't match the pod's GPU type, UUID or mode", n2=""),
        id="gpu: UUID constraint; n2's GPU 0 is taken, GPU 1 is the one asked for",
    ),
    pytest.param(
        GpuShare(), make_pod(cpu="1"), [make_node("n1")], [], expect(n1=""), id="gpu: skipped for CPU pods"
    ),
    # ---- NodeName ----
    pytest.param(
        NodeName(),
        make_pod(node_name="n2"),
        [make_node("n1"), make_node("n2")],
        [],
        expect(n1="node(s) didn't match the requested node name", n2=""),
        id="nodename: only n2",
    ),
    pytest.param(
        NodeName(),
        make_pod(node_name="gone"),
        [make_node("n1")],
        [],
        expect(n1="node(s) didn't match the requested node name"),
        id="nodename: unknown node",
    ),
    # ---- NodeUnschedulable ----
    pytest.param(
        NodeUnschedulable(),
        make_pod(),
        [make_node("n1", unschedulable=True), make_node("n2")],
        [],
        expect(n1="node(s) were unschedulable", n2=""),
        id="cordoned node",
    ),
    pytest.param(
        NodeUnschedulable(),
        make_pod(
            tolerations=[
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
            ]
        ),
        [make_node("n1", unschedulable=True)],
        [],
        expect(n1=""),
        id="cordoned node tolerated",
    ),
    # ---- TaintToleration ----
    pytest.param(
        TaintToleration(),
        make_pod(),
        [
            make_node("n1", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
            make_node("n2", taints=[{"key": "soft", "effect": "PreferNoSchedule"}]),
            make_node("n3", taints=[{"key": "evict", "value": "x", "effect": "NoExecute"}]),
        ],
        [],
        expect(n1="node(s) had untolerated taint(s)", n2="", n3="node(s) had untolerated taint(s)"),
        id="taints: NoSchedule and NoExecute filter, PreferNoSchedule does not",
    ),
    pytest.param(
        TaintToleration(),
        make_pod(tolerations=[{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]),
        [
            make_node("n1", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
            make_node("n2", taints=[{"key": "gpu", "value": "false", "effect": "NoSchedule"}]),
        ],
        [],
        expect(n1="", n2="node(s) had untolerated taint(s)"),
        id="taints: Equal needs the value (true != false)",
    ),
    pytest.param(
        TaintToleration(),
        make_pod(tolerations=[{"operator": "Exists"}]),
        [make_node("n1", taints=[{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}])],
        [],
        expect(n1=""),
        id="taints: empty key with Exists tolerates everything",
    ),
    pytest.param(
        TaintToleration(),
        make_pod(tolerations=[{"key": "a", "operator": "Exists", "effect": "NoExecute"}]),
        [make_node("n1", taints=[{"key": "a", "effect": "NoSchedule"}])],
        [],
        expect(n1="node(s) had untolerated taint(s)"),
        id="taints: effect must match",
    ),
    # ---- NodeAffinity ----
    pytest.param(
        NodeAffinity(),
        make_pod(node_selector={"disk": "ssd"}),
        [make_node("n1", labels={"disk": "ssd"}), make_node("n2", labels={"disk": "hdd"}), make_node("n3")],
        [],
        expect(
            n1="",
            n2="node(s) didn't match Pod's node affinity/selector",
            n3="node(s) didn't match Pod's node affinity/selector",
        ),
        id="affinity: nodeSelector",
    ),
    pytest.param(
        NodeAffinity(),
        make_pod(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                                    {"key": "gen", "operator": "Gt", "values": ["3"]},
                                ]
                            },
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n4"]}]},
                        ]
                    }
                }
            }
        ),
        [
            make_node("n1", labels={"zone": "a", "gen": "4"}),
            make_node("n2", labels={"zone": "a", "gen": "3"}),
            make_node("n3", labels={"zone": "c", "gen": "9"}),
            make_node("n4"),
        ],
        [],
        expect(
            n1="",
            n2="node(s) didn't match Pod's node affinity/selector",
            n3="node(s) didn't match Pod's node affinity/selector",
            n4="",
        ),
        id="affinity: terms ORed (zone In a,b AND gen Gt 3) OR name n4",
    ),
    pytest.param(
        NodeAffinity(),
        make_pod(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "NotIn", "values": ["a"]},
                                    {"key": "spot", "operator": "DoesNotExist"},
                                    {"key": "gen", "operator": "Lt", "values": ["5"]},
                                    {"key": "rack", "operator": "Exists"},
                                ]
                            }
                        ]
                    }
                }
            }
        ),
        [
            make_node("n1", labels={"zone": "b", "gen": "4", "rack": "r"}),
            make_node("n2", labels={"zone": "b", "gen": "4", "rack": "r", "spot": "1"}),
            make_node("n3", labels={"gen": "x", "rack": "r"}),
            make_node("n4", labels={"gen": "1"}),
        ],
        [],
        expect(
            n1="",
            n2="node(s) didn't match Pod's node affinity/selector",
            n3="node(s) didn't match Pod's node affinity/selector",
            n4="node(s) didn't match Pod's node affinity/selector",
        ),
        id="affinity: NotIn, DoesNotExist, Lt (non-integer label fails), Exists",
    ),
    pytest.param(
        NodeAffinity(),
        make_pod(
            node_selector={"a": "1"},
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "b", "operator": "In", "values": ["2"]}]}
                        ]
                    }
                }
            },
        ),
        [
            make_node("n1", labels={"a": "1", "b": "2"}),
            make_node("n2", labels={"a": "1"}),
            make_node("n3", labels={"b": "2"}),
        ],
        [],
        expect(
            n1="",
            n2="node(s) didn't match Pod's node affinity/selector",
            n3="node(s) didn't match Pod's node affinity/selector",
        ),
        id="affinity: selector AND affinity",
    ),
    pytest.param(
        NodeAffinity(),
        make_pod(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}
                }
            }
        ),
        [make_node("n1")],
        [],
        expect(n1="node(s) didn't match Pod's node affinity/selector"),
        id="affinity: an empty term matches nothing",
    ),
    # ---- NodePorts ----
    pytest.param(
        NodePorts(),
        make_pod(host_ports=[8080]),
        [make_node("n1"), make_node("n2"), make_node("n3")],
        [
            (make_pod("a", host_ports=[8080]), "n1"),
            (make_pod("b", host_ports=[(8080, "UDP", "")]), "n2"),
            (make_pod("c", host_ports=[9090]), "n3"),
        ],
        expect(n1="node(s) didn't have free ports for the requested pod ports", n2="", n3=""),
        id="ports: same port and protocol conflict; UDP or another port does not",
    ),
    pytest.param(
        NodePorts(),
        make_pod(host_ports=[(8080, "TCP", "10.0.0.1")]),
        [make_node("n1"), make_node("n2")],
        [
            (make_pod("a", host_ports=[(8080, "TCP", "0.0.0.0")]), "n1"),
            (make_pod("b", host_ports=[(8080, "TCP", "10.0.0.2")]), "n2"),
        ],
        expect(n1="node(s) didn't have free ports for the requested pod ports", n2=""),
        id="ports: wildcard host IP conflicts, another IP does not",
    ),
    # ---- Unsupported ----
    pytest.param(
        Unsupported(),
        pod_from_manifest(
            {
                **pod_manifest("dra"),
                "spec": {
                    **pod_manifest("dra")["spec"],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
                },
            }
        ),
        [make_node("n1")],
        [],
        expect(n1=""),
        id="unsupported: resource claims are DynamicResources', not refused",
    ),
    pytest.param(
        Unsupported(),
        pod_from_manifest(
            {
                **pod_manifest("gated"),
                "spec": {**pod_manifest("gated")["spec"], "schedulingGates": [{"name": "example.com/wait"}]},
            }
        ),
        [make_node("n1")],
        [],
        expect(n1="waiting for scheduling gates: [example.com/wait]"),
        id="unsupported: scheduling gates",
    ),
    pytest.param(
        Unsupported(),
        with_volumes(
            "two",
            {"name": "a", "persistentVolumeClaim": {"claimName": "claim-a", "readOnly": True}},
            {"name": "b", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        ),
        [make_node("n1")],
        [],
        expect(n1=""),
        id="unsupported: claims are the volume filters' to decide (tests/unit/test_filters_volumes.py)",
    ),
    pytest.param(
        Unsupported(),
        with_volumes(
            "kubelet-only",
            {"name": "tmp", "emptyDir": {"medium": "Memory"}},
            {"name": "conf", "configMap": {"name": "app"}},
            {"name": "creds", "secret": {"secretName": "app"}},
            {"name": "logs", "hostPath": {"path": "/var/log"}},
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
            {"name": "info", "downwardAPI": {"items": []}},
            {"name": "inline", "csi": {"driver": "secrets-store.csi.k8s.io"}},
            {"name": "share", "nfs": {"server": "nfs.example", "path": "/export"}},
            {"name": "image", "image": {"reference": "example.com/data:1"}},
        ),
        [make_node("n1")],
        [],
        expect(n1=""),
        id="unsupported: volumes the kubelet mounts without a scheduler's decision are allowed",
    ),
]


@pytest.mark.parametrize(("plugin", "pod", "nodes", "placed", "expected"), CASES)
def test_node_filters(
    plugin: Any,
    pod: Any,
    nodes: list[Any],
    placed: list[tuple[Any, str]],
    expected: dict[str, tuple[str, ...]],
) -> None:
    state = make_state(nodes, placed)
    assert verdicts(plugin, state, pod) == expected


GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("taints_before", "taints_after", "expected_after"),
    [
        pytest.param([GPU_TAINT], [], "", id="taint removed: the node passes"),
        pytest.param([], [GPU_TAINT], "node(s) had untolerated taint(s)", id="taint added: rejected"),
        pytest.param([GPU_TAINT], [GPU_TAINT], "node(s) had untolerated taint(s)", id="unchanged"),
    ],
)
def test_taint_verdicts_follow_the_nodes_taints(
    taints_before: list[dict[str, str]], taints_after: list[dict[str, str]], expected_after: str
) -> None:
    """The verdicts kept per set of tolerations are those of the nodes' taints now."""
    state = make_state([make_node("n1", taints=taints_before), make_node("n2")])
    pod = make_pod()
    verdicts(TaintToleration(), state, pod)  # kept for this pod's tolerations
    state.update_node(make_node("n1", taints=taints_after))
    assert verdicts(TaintToleration(), state, pod) == expect(n1=expected_after, n2="")
