"""Pods with DRA ResourceClaims on the local control plane (kube-apiserver v1.36 serving
resource.k8s.io/v1; kube-controller-manager's resourceclaim controller creating claims
from templates; KWOK nodes): a DeviceClass with a CEL selector, ResourceSlices of three
GPUs on each of two nodes, and claims asking for one device by attribute, two devices,
one device shared by two pods, and one from a template. Every pod binds where its
claim's devices are, each claim's status holds an allocation that satisfies its
selectors and the pods in ``reservedFor``, with kube's finalizer, and no device is
allocated twice. A claim
no node can satisfy gets kube's FailedScheduling text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from devcluster import nodes as devnodes
from tests.e2e.support import (
    create_pods,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    wait_for,
)

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-dra"
DRIVER = "gpu.rl-test.example.com"
NODES = ("dra-node-0", "dra-node-1")
# Per node, the model of gpu-0, gpu-1, gpu-2.
MODELS = {"dra-node-0": ("a100", "t4", "t4"), "dra-node-1": ("t4", "t4", "t4")}


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    size = devnodes.NODE_TYPES["cpu-small"]
    replace_nodes(api, [devnodes.NodeSpec(n, size, "zone-a", "rack-0") for n in NODES])
    return api


@pytest.fixture
def resource(dev_cluster: Any) -> client.ResourceV1Api:
    return client.ResourceV1Api(dev_cluster.api_client())


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "dra", request.node.nodeid) as name:
        yield name


@pytest.fixture
def devices(resource: client.ResourceV1Api, namespace: str) -> Iterator[str]:
    """The class (named after the namespace) and one slice per node, deleted afterwards."""
    cls = f"{namespace}-gpu"
    resource.create_device_class(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    for node in NODES:
        resource.create_resource_slice(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{namespace}-{node}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {"name": f"gpu-{i}", "attributes": {"model": {"string": m}, "index": {"int": i}}}
                        for i, m in enumerate(MODELS[node])
                    ],
                },
            }
        )
    yield cls
    for node in NODES:
        resource.delete_resource_slice(f"{namespace}-{node}")
    resource.delete_device_class(cls)


def _request(cls: str, count: int, *selectors: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def _pod(name: str, namespace: str, claim: str = "", template: str = "") -> dict[str, Any]:
    ref = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", **ref}],
        },
    }


def _nodes_of(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    return {
        p.metadata.name: p.spec.node_name
        for p in core.list_namespaced_pod(namespace).items
        if p.spec.node_name
    }


def test_claims_are_allocated_as_kube_allocates_them(
    dev_cluster: Any,
    core: client.CoreV1Api,
    resource: client.ResourceV1Api,
    namespace: str,
    devices: str,
    tmp_path: Path,
) -> None:
    a100 = f'device.attributes["{DRIVER}"].model == "a100"'
    claims = {
        "big": _request(devices, 1, a100),
        "pair": _request(devices, 2),
        "shared": _request(devices, 1),
        "too-many": _request(devices, 4),
    }
    for name, spec in claims.items():
        resource.create_namespaced_resource_claim(
            namespace,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name},
                "spec": spec,
            },
        )
    resource.create_namespaced_resource_claim_template(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one"},
            "spec": {"spec": _request(devices, 1)},
        },
    )
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path) as scheduler:
        log = lambda: scheduler.log()[-4000:]  # noqa: E731
        # The a100 first: the other claims could otherwise take node-0's devices too.
        create_pods(core, [_pod("big", namespace, claim="big")])
        wait_for(lambda: "big" in _nodes_of(core, namespace), 60, "big to bind")
        create_pods(
            core,
            [
                _pod("pair", namespace, claim="pair"),
                _pod("share-a", namespace, claim="shared"),
                _pod("share-b", namespace, claim="shared"),
                _pod("templated", namespace, template="one"),
                _pod("greedy", namespace, claim="too-many"),
            ],
        )
        expected = {"big", "pair", "share-a", "share-b", "templated"}
        try:
            wait_for(lambda: expected <= set(_nodes_of(core, namespace)), 90, "the claim pods to bind")
        except AssertionError:
            raise AssertionError(log()) from None
        wait_for(
            lambda: any(
                e.reason == "FailedScheduling" and "cannot allocate all claims" in e.message
                for e in pod_events(core, namespace, "greedy")
            ),
            60,
            "greedy's FailedScheduling",
        )
        placed = _nodes_of(core, namespace)
        assert "greedy" not in placed
        # The second pod of the shared claim waits for the first one's allocation to be
        # written, unreported (kube-scheduler would report "in the process of being
        # allocated").
        for mate in ("share-a", "share-b"):
            assert [
                e.message for e in pod_events(core, namespace, mate) if e.reason == "FailedScheduling"
            ] == []
        messages = [
            e.message for e in pod_events(core, namespace, "greedy") if e.reason == "FailedScheduling"
        ]
        assert messages[-1].startswith("0/2 nodes are available: 2 cannot allocate all claims."), messages

        templated = core.read_namespaced_pod("templated", namespace).status.resource_claim_statuses
        claim_of = {
            "big": "big",
            "pair": "pair",
            "share-a": "shared",
            "share-b": "shared",
            "templated": templated[0].resource_claim_name,
        }
        listed = {
            c["metadata"]["name"]: c
            for c in resource.api_client.sanitize_for_serialization(
                resource.list_namespaced_resource_claim(namespace).items
            )
        }
        taken: list[tuple[str, str]] = []
        for pod, name in claim_of.items():
            status = listed[name]["status"]
            results = status["allocation"]["devices"]["results"]
            assert {r["pool"] for r in results} == {placed[pod]}, (pod, results)
            assert pod in {c["name"] for c in status["reservedFor"]}
        for name in {"big", "pair", "shared", claim_of["templated"]}:
            results = listed[name]["status"]["allocation"]["devices"]["results"]
            taken += [(r["pool"], r["device"]) for r in results]
            assert "resource.kubernetes.io/delete-protection" in listed[name]["metadata"]["finalizers"]
            assert {r["driver"] for r in results} == {DRIVER}
        assert len(taken) == len(set(taken)) == 5, taken
        big = listed["big"]["status"]["allocation"]["devices"]["results"]
        assert [(r["pool"], r["device"]) for r in big] == [("dra-node-0", "gpu-0")]
        assert len(listed["pair"]["status"]["allocation"]["devices"]["results"]) == 2
        assert placed["share-a"] == placed["share-b"]
        assert len(listed["shared"]["status"]["reservedFor"]) == 2
        assert "status" not in listed["too-many"] or not listed["too-many"]["status"].get("allocation")


def test_a_claim_a_json_patch_cannot_keep_is_allocated_without_the_finalizer(
    dev_cluster: Any,
    core: client.CoreV1Api,
    resource: client.ResourceV1Api,
    namespace: str,
    devices: str,
    tmp_path: Path,
) -> None:
    """Opaque parameters sent as Python's json writes them (``{"model": "x"}``, not
    compact) are stored byte for byte; the API server then refuses every JSON patch of
    the claim (``spec: ... field is immutable``), the finalizer's too. The claim is
    still allocated and the pod bound, without kube's delete protection."""
    spec = _request(devices, 1)
    spec["devices"]["config"] = [
        {"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {"model": "rl-test"}}}
    ]
    resource.create_namespaced_resource_claim(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "spaced"},
            "spec": spec,
        },
    )
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path) as scheduler:
        create_pods(core, [_pod("spaced", namespace, claim="spaced")])
        try:
            wait_for(lambda: "spaced" in _nodes_of(core, namespace), 60, "the pod to bind")
        except AssertionError:
            raise AssertionError(scheduler.log()[-4000:]) from None
        assert (
            "metadata.finalizers: resource.kubernetes.io/delete-protection cannot be added" in scheduler.log()
        )
    claim = resource.api_client.sanitize_for_serialization(
        resource.read_namespaced_resource_claim("spaced", namespace)
    )
    assert "resource.kubernetes.io/delete-protection" not in (claim["metadata"].get("finalizers") or [])
    assert [c["name"] for c in claim["status"]["reservedFor"]] == ["spaced"]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 1


def test_fgd_scores_gpus_from_resource_slices(
    dev_cluster: Any,
    core: client.CoreV1Api,
    resource: client.ResourceV1Api,
    namespace: str,
    devices: str,
    tmp_path: Path,
) -> None:
    """The class's devices are GPUs to FGD (``dra_gpu_classes``): dra-node-1 has 24 of
    its 32 cores taken, so its three free GPUs are stranded for the typical GPU pods, and
    FGD (59 there against 53 on dra-node-0, with the default trace's typical pods: the
    same state built in a unit test gives these) sends a one-GPU DRA pod of 4 cores
    there. Without the view the pod looks CPU-only and both nodes score 50."""
    hog = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hog", "namespace": namespace},
        "spec": {
            "nodeName": "dra-node-1",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "24"}}}],
        },
    }
    core.create_namespaced_pod(namespace, hog)
    resource.create_namespaced_resource_claim(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "one"},
            "spec": _request(devices, 1),
        },
    )
    pod = _pod("one", namespace, claim="one")
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "4"}
    env = {"RL_SCHEDULER_PROFILE": "fgd", "RL_SCHEDULER_DRA_GPU_CLASSES": f'["{devices}"]'}
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path, env=env) as scheduler:
        create_pods(core, [pod])
        try:
            wait_for(lambda: "one" in _nodes_of(core, namespace), 60, "the pod to bind")
        except AssertionError:
            raise AssertionError(scheduler.log()[-4000:]) from None
    assert _nodes_of(core, namespace)["one"] == "dra-node-1"
    claim = resource.api_client.sanitize_for_serialization(
        resource.read_namespaced_resource_claim("one", namespace)
    )
    assert [r["pool"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["dra-node-1"]
