"""The independent checker catches each kind of violation (so a green e2e run means
something)."""

from typing import Any

import pytest

from tests.e2e.checker import check
from tests.e2e.workloads import node_affinity, required_pod_terms


def node(
    name: str,
    *,
    cpu: str = "4",
    pods: str = "110",
    gpus: str = "0",
    zone: str = "a",
    taints: list[dict[str, str]] | None = None,
    register: str | None = None,
) -> dict[str, Any]:
    annotations = {} if register is None else {"hami.io/node-nvidia-register": register}
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "zone": zone},
            "annotations": annotations,
        },
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": pods, "nvidia.com/gpu": gpus}},
    }


ONE_GPU = '[{"id":"GPU-0","count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-T4","health":true}]'


def hami(allocated: str) -> dict[str, str]:
    return {"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": allocated}


def pod(
    name: str,
    on: str,
    *,
    cpu: str = "1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    gpus: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {"cpu": cpu}
    if gpus:
        requests["nvidia.com/gpu"] = gpus
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {"nodeName": on, "containers": [{"resources": {"requests": requests}}], **spec},
        "status": {"phase": "Running"},
    }


CASES = [
    pytest.param(
        [node("n1")], [pod("a", "n1", cpu="3"), pod("b", "n1", cpu="2")], "cpu 5.0 requested > 4.0", id="cpu"
    ),
    pytest.param([node("n1", pods="1")], [pod("a", "n1"), pod("b", "n1")], "2 pods > 1", id="pod count"),
    pytest.param(
        [node("n1", gpus="10", register=ONE_GPU)],
        [pod(p, "n1", gpus="1", annotations=hami("GPU-0,NVIDIA,4000,60:;")) for p in ("a", "b")],
        "GPU GPU-0 holds 120% cores of 100, 8000 MiB of 16384",
        id="gpu share: cores",
    ),
    pytest.param(
        [node("n1", gpus="10", register=ONE_GPU)],
        [pod(p, "n1", gpus="1", annotations=hami("GPU-0,NVIDIA,9000,10:;")) for p in ("a", "b")],
        "GPU GPU-0 holds 20% cores of 100, 18000 MiB of 16384",
        id="gpu share: memory",
    ),
    pytest.param(
        [node("n1", gpus="10", register=ONE_GPU)],
        [pod("a", "n1", gpus="1")],
        "holds GPUs [] for a request of 1",
        id="a GPU pod on a HAMi node without its allocation",
    ),
    pytest.param(
        [node("n1", gpus="1")],
        [pod(p, "n1", gpus="1") for p in ("a", "b")],
        "nvidia.com/gpu 2.0 requested > 1.0",
        id="whole GPUs as the kubelet counts them",
    ),
    pytest.param(
        [node("n1", taints=[{"key": "k", "effect": "NoSchedule"}])],
        [pod("a", "n1")],
        "untolerated taint k",
        id="taint",
    ),
    pytest.param(
        [node("n1")],
        [pod("a", "n1", affinity=node_affinity("zone", ["b"]))],
        "required node affinity",
        id="node affinity",
    ),
    pytest.param(
        [node("n1")],
        [
            pod(p, "n1", labels={"app": "x"}, affinity={"podAntiAffinity": required_pod_terms("x", "zone")})
            for p in "ab"
        ],
        "anti-affinity",
        id="anti-affinity",
    ),
    pytest.param(
        [node("n1"), node("n2", zone="b")],
        [
            pod("db", "n1", labels={"app": "db"}),
            pod("c", "n2", affinity={"podAffinity": required_pod_terms("db", "zone")}),
        ],
        "affinity: no matching pod",
        id="affinity",
    ),
    pytest.param(
        [node("n1"), node("n2", zone="b")],
        [
            pod(
                p,
                "n1",
                labels={"app": "s"},
                topologySpreadConstraints=[
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "s"}},
                    }
                ],
            )
            for p in "ab"
        ],
        "skew 2 > 1",
        id="topology spread",
    ),
]


def claim(name: str, volume: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name}, "spec": {"volumeName": volume}}


def volume(name: str, *, hosts: list[str] | None = None, zone: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if hosts is not None:
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": hosts}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    labels = {"topology.kubernetes.io/zone": zone} if zone else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def with_claim(name: str, on: str, claim_name: str) -> dict[str, Any]:
    return pod(name, on, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}])


def zoned(name: str, zone: str) -> dict[str, Any]:
    manifest = node(name)
    manifest["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
    return manifest


VOLUME_CASES = [
    pytest.param(
        [node("n1"), node("n2")],
        [with_claim("a", "n1", "data")],
        [claim("data", "pv-1")],
        [volume("pv-1", hosts=["n2"])],
        "volume pv-1 (claim data): node affinity not met",
        id="a volume's node affinity",
    ),
    pytest.param(
        [node("n1")],
        [pod("job", "n1", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}])],
        [claim("job-scratch", "pv-1")],
        [volume("pv-1", hosts=["n2"])],
        "volume pv-1 (claim job-scratch): node affinity not met",
        id="an ephemeral volume's claim (<pod>-<volume>)",
    ),
    pytest.param(
        [zoned("n1", "zone-a")],
        [with_claim("a", "n1", "data")],
        [claim("data", "pv-1")],
        [volume("pv-1", zone="zone-b__zone-c")],
        "topology.kubernetes.io/zone zone-b__zone-c, node has zone-a",
        id="a volume's zone",
    ),
    pytest.param(
        [node("n1")],
        [with_claim("a", "n1", "data")],
        [claim("data", "pv-gone")],
        [],
        "bound to volume pv-gone, which does not exist",
        id="a claim bound to a missing volume",
    ),
]


@pytest.mark.parametrize(("nodes", "pods", "claims", "volumes", "problem"), VOLUME_CASES)
def test_checker_finds_volume_violations(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    problem: str,
) -> None:
    problems = check(nodes, pods, claims, volumes)
    assert any(problem in p for p in problems), problems


def test_checker_accepts_volumes_where_they_can_be_attached() -> None:
    nodes = [zoned("n1", "zone-a"), node("n2")]
    pods = [with_claim("a", "n1", "data"), with_claim("b", "n2", "logs"), with_claim("c", "n2", "pending")]
    claims = [
        claim("data", "pv-1"),
        claim("logs", "pv-2"),
        {"metadata": {"namespace": "ns", "name": "pending"}},
    ]
    volumes = [volume("pv-1", hosts=["n1"], zone="zone-a__zone-b"), volume("pv-2", zone="zone-c")]
    assert check(nodes, pods, claims, volumes) == []


@pytest.mark.parametrize(("nodes", "pods", "problem"), CASES)
def test_checker_finds_violations(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], problem: str
) -> None:
    problems = check(nodes, pods)
    assert any(problem in p for p in problems), problems


def test_checker_accepts_a_valid_placement() -> None:
    nodes = [node("n1"), node("n2", zone="b")]
    pods = [
        pod("db", "n1", labels={"app": "db"}),
        pod("c", "n1", affinity={"podAffinity": required_pod_terms("db", "zone")}),
    ]
    assert check(nodes, pods) == []


def member(name: str, on: str, group: str = "job") -> dict[str, Any]:
    """A pod of PodGroup ``group``; ``on`` "" leaves it pending."""
    manifest = pod(name, on, labels={"scheduling.x-k8s.io/pod-group": group})
    if not on:
        del manifest["spec"]["nodeName"]
    return manifest


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name}, "spec": {"minMember": min_member}}


@pytest.mark.parametrize(
    ("members", "problems"),
    [
        # 2 of minMember 3 bound: a gang in part.
        (
            [member("a", "n1"), member("b", "n2"), member("c", "")],
            ["PodGroup ns/job: 2 pods bound, minMember 3"],
        ),
        ([member("a", ""), member("b", ""), member("c", "")], []),  # none bound
        ([member("a", "n1"), member("b", "n1"), member("c", "n2")], []),  # all bound
        # Bound members of another group, or of none, do not count.
        ([member("a", "n1", "other"), pod("b", "n1"), member("c", "")], []),
    ],
)
def test_checker_finds_gangs_bound_in_part(members: list[dict[str, Any]], problems: list[str]) -> None:
    nodes = [node("n1"), node("n2")]
    assert check(nodes, members, pod_groups=[pod_group("job", 3)]) == problems
