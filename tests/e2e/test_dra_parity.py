"""DRA parity with kube-scheduler v1.36.4: each scenario runs twice on the same two KWOK
nodes, once for kube-scheduler (built from source, running in the dev cluster) and once
for rl-scheduler (its default profile, fgd-reserve), each in a namespace of its own with
a device class, slices and claims of its own (a driver named after the namespace, so
neither run sees the other's devices or allocations).

Pods are created one at a time, each decided (bound, or reported unschedulable) before
the next. For every row: the same pods bind and the same stay pending under both; a
pod kube puts on a given node is put there by rl-scheduler too where the scenario
admits one node; each claim gets devices for the same requests (the same subrequest of
a ``firstAvailable``) and, while every pod so far is on kube's node, the same devices
and the same ``allocation.nodeSelector``; every allocation, kube's and ours, satisfies
its selectors, counts and constraints and the pods' nodes and holds the pods in
``reservedFor`` (``dra_checker``, which does not use rl-scheduler's allocator); no
device goes to two claims; and a pending pod's last FailedScheduling message is kube's,
word for word (the namespace written NS; our predicted-start suffix cut off).

Inventory (``SLICES``): node a has gpu-0 (a100, 80Gi, numa 0), gpu-1 (a100, 40Gi,
numa 1), gpu-2 (t4, 16Gi, numa 0), gpu-3 (t4, 16Gi, numa 1); node b has gpu-0 and gpu-1
(t4, 16Gi, numa 0) and gpu-2 (t4, 16Gi, numa 1).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import nodes as devnodes
from scheduler.k8s.scheduling.lifetimes_starts import kube_part
from tests.e2e import dra_checker
from tests.e2e.support import (
    api_dicts,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
)

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-dra-parity"
KUBE_SCHEDULER = "default-scheduler"
A, B = NODES = ("drap-a", "drap-b")
ANY = "*"  # the pod binds, on a node the scenario does not fix
PENDING = ""
# Written in scenarios, replaced per run: the driver (also the attributes' domain).
DRIVER = "DRIVER"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"


def gpu(name: str, model: str, memory: str, numa: int) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"model": {"string": model}, "numa": {"int": numa}},
        "capacity": {"memory": {"value": memory}},
    }


@dataclass(frozen=True)
class Slice:
    name: str
    devices: tuple[dict[str, Any], ...]
    node: str = ""
    all_nodes: bool = False
    node_selector: dict[str, Any] | None = None

    def manifest(self, prefix: str, driver: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "driver": driver,
            "pool": {"name": self.name, "generation": 1, "resourceSliceCount": 1},
            "devices": list(self.devices),
        }
        if self.node:
            spec["nodeName"] = self.node
        elif self.all_nodes:
            spec["allNodes"] = True
        else:
            spec["nodeSelector"] = self.node_selector
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{prefix}-{self.name}"},
            "spec": spec,
        }


SLICES = (
    Slice(
        A,
        (
            gpu("gpu-0", "a100", "80Gi", 0),
            gpu("gpu-1", "a100", "40Gi", 1),
            gpu("gpu-2", "t4", "16Gi", 0),
            gpu("gpu-3", "t4", "16Gi", 1),
        ),
        node=A,
    ),
    Slice(
        B,
        (gpu("gpu-0", "t4", "16Gi", 0), gpu("gpu-1", "t4", "16Gi", 0), gpu("gpu-2", "t4", "16Gi", 1)),
        node=B,
    ),
)
NIC = Slice("fabric", ({"name": "nic-0", "attributes": {"model": {"string": "nic"}}},), all_nodes=True)
FPGA = Slice(
    "fpga-b",
    ({"name": "fpga-0", "attributes": {"model": {"string": "fpga"}}},),
    node_selector={
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [B]}]}
        ]
    },
)
# A device with a NoSchedule taint (DRADeviceTaints, beta and on in v1.36), on b.
TAINTED = Slice(
    "tainted-b",
    (
        {
            "name": "tpu-0",
            "attributes": {"model": {"string": "tpu"}},
            "taints": [{"key": "example.com/maintenance", "value": "yes", "effect": "NoSchedule"}],
        },
    ),
    node=B,
)
TOLERATION = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}
# The device classes: "gpu" selects the driver's devices, "t4" adds a model.
CLASSES = {
    "gpu": ('device.driver == "DRIVER"',),
    "t4": ('device.driver == "DRIVER"', 'device.attributes["DRIVER"].model == "t4"'),
}
MODEL = 'device.attributes["DRIVER"].model == "{}"'


def exactly(
    cls: str = "gpu", count: int = 1, *selectors: str, mode: str = "ExactCount", admin: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        spec["count"] = count
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin:
        spec["adminAccess"] = True
    return spec


def claim(
    *requests: tuple[str, dict[str, Any] | list[dict[str, Any]]],
    match: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> dict[str, Any]:
    """A claim's spec: named requests (an ``exactly``, or a list of subrequests for
    ``firstAvailable``) and ``matchAttribute`` constraints (attribute, requests)."""
    listed: list[dict[str, Any]] = []
    for name, request in requests:
        if isinstance(request, list):
            listed.append({"name": name, "firstAvailable": request})
        else:
            listed.append({"name": name, "exactly": request})
    devices: dict[str, Any] = {"requests": listed}
    if match:
        devices["constraints"] = [
            {"matchAttribute": attribute, **({"requests": list(names)} if names else {})}
            for attribute, names in match
        ]
    return {"devices": devices}


def sub(name: str, request: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, **request}


@dataclass(frozen=True)
class PodSpec:
    name: str
    claim: str = ""  # a ResourceClaim's name
    template: str = ""  # or a ResourceClaimTemplate's
    more: tuple[str, ...] = ()  # further ResourceClaims
    node: str = ""  # a nodeSelector on the node's hostname

    @property
    def keys(self) -> list[str]:
        """The pod's claims as a Result names them (a template's: pod/template)."""
        return [self.claim or f"{self.name}/{self.template}", *self.more]


@dataclass(frozen=True)
class Scenario:
    claims: Mapping[str, dict[str, Any]]
    pods: tuple[PodSpec, ...]
    expected: Mapping[str, str]  # pod -> node, ANY or PENDING (what kube does; checked)
    templates: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    slices: tuple[Slice, ...] = SLICES
    namespace_labels: Mapping[str, str] = field(default_factory=dict)


def one(claim_name: str, spec: dict[str, Any], expected: str) -> Scenario:
    """One pod ("p") with one claim."""
    return Scenario({claim_name: spec}, (PodSpec("p", claim=claim_name),), {"p": expected})


SCENARIOS = [
    pytest.param(one("c", claim(("gpu", exactly())), ANY), id="ExactCount 1"),
    pytest.param(one("c", claim(("gpu", exactly(count=4))), A), id="ExactCount 4 (only a has four)"),
    pytest.param(
        # All a100s: a has two, b none (All with no device is a failure, not an empty allocation).
        one("c", claim(("gpu", exactly("gpu", 0, MODEL.format("a100"), mode="All"))), A),
        id="allocationMode All",
    ),
    pytest.param(
        one("c", claim(("gpu", exactly("gpu", 1, MODEL.format("a100")))), A), id="CEL on an attribute"
    ),
    pytest.param(
        # memory > 40Gi: only a/gpu-0 (80Gi).
        one(
            "c",
            claim(
                ("gpu", exactly("gpu", 1, 'device.capacity["DRIVER"].memory.compareTo(quantity("40Gi")) > 0'))
            ),
            A,
        ),
        id="CEL on capacity (quantity compare)",
    ),
    pytest.param(
        # class t4, request numa 0, two devices: a has one t4 on numa 0, b two.
        one("c", claim(("gpu", exactly("t4", 2, 'device.attributes["DRIVER"].numa == 0'))), B),
        id="class selector and request selector",
    ),
    pytest.param(
        # an a100 and a t4 on one numa node: a (gpu-0 and gpu-2 on numa 0).
        one(
            "c",
            claim(
                ("big", exactly("gpu", 1, MODEL.format("a100"))),
                ("small", exactly("t4", 1)),
                match=(("DRIVER/numa", ("big", "small")),),
            ),
            A,
        ),
        id="matchAttribute satisfiable",
    ),
    pytest.param(
        # three devices on one numa node: a has 2 + 2, b 2 + 1.
        one("c", claim(("gpu", exactly(count=3)), match=(("DRIVER/numa", ()),)), PENDING),
        id="matchAttribute unsatisfiable",
    ),
    pytest.param(
        Scenario(
            {"shared": claim(("gpu", exactly(count=1)))},
            (PodSpec("first", claim="shared"), PodSpec("second", claim="shared")),
            {"first": ANY, "second": ANY},
        ),
        id="a claim shared by two pods",
    ),
    pytest.param(
        Scenario(
            {},
            (PodSpec("first", template="pair"), PodSpec("second", template="pair")),
            {"first": ANY, "second": ANY},
            templates={"pair": claim(("gpu", exactly(count=2)))},
        ),
        id="ResourceClaimTemplate",
    ),
    pytest.param(
        # two 80Gi a100s exist nowhere; one a100 does, on a.
        one(
            "c",
            claim(
                (
                    "gpu",
                    [
                        sub("two", exactly("gpu", 2, 'device.capacity["DRIVER"].memory == quantity("80Gi")')),
                        sub("one", exactly("gpu", 1, MODEL.format("a100"))),
                    ],
                )
            ),
            A,
        ),
        id="firstAvailable",
    ),
    pytest.param(
        # two t4s on numa 0 first (only b has them), any device else (both nodes); kube's
        # DynamicResources Score ranks b first, and so do rl-scheduler's preferences.
        one(
            "c",
            claim(
                (
                    "gpu",
                    [
                        sub("pair", exactly("t4", 2, 'device.attributes["DRIVER"].numa == 0')),
                        sub("any", exactly("gpu", 1)),
                    ],
                )
            ),
            B,
        ),
        id="firstAvailable: the node with the first subrequest",
    ),
    pytest.param(
        Scenario(
            {
                "owner": claim(
                    (
                        "gpu",
                        exactly("gpu", 1, MODEL.format("a100")),
                    )
                ),
                "monitor": claim(("gpu", exactly("gpu", 0, MODEL.format("a100"), mode="All", admin=True))),
            },
            (PodSpec("owner", claim="owner"), PodSpec("monitor", claim="monitor")),
            {"owner": A, "monitor": A},
            namespace_labels={ADMIN_LABEL: "true"},
        ),
        id="adminAccess to devices in use",
    ),
    pytest.param(
        Scenario(
            {"nic": claim(("nic", exactly("gpu", 1, MODEL.format("nic"))))},
            (PodSpec("p", claim="nic"),),
            {"p": ANY},
            slices=(*SLICES, NIC),
        ),
        id="a slice on all nodes",
    ),
    pytest.param(
        Scenario(
            {"fpga": claim(("fpga", exactly("gpu", 1, MODEL.format("fpga"))))},
            (PodSpec("p", claim="fpga"),),
            {"p": B},
            slices=(*SLICES, FPGA),
        ),
        id="a slice with a node selector",
    ),
    pytest.param(
        one("c", claim(("gpu", exactly("missing", 1))), PENDING), id="a device class that does not exist"
    ),
    pytest.param(
        Scenario(
            {"shared": claim(("gpu", exactly("gpu", 1, MODEL.format("a100"))))},
            (PodSpec("first", claim="shared"), PodSpec("second", claim="shared", node=B)),
            {"first": A, "second": PENDING},
        ),
        id="a shared claim allocated where the second pod may not go",
    ),
    pytest.param(
        Scenario(
            {
                "a100": claim(("gpu", exactly("gpu", 1, MODEL.format("a100")))),
                "t4s": claim(("gpu", exactly("t4", 2, 'device.attributes["DRIVER"].numa == 0'))),
            },
            (PodSpec("p", claim="a100", more=("t4s",)),),
            {"p": PENDING},
        ),
        id="two claims of one pod, each only on another node",
    ),
    pytest.param(
        Scenario(
            {
                "a100": claim(("gpu", exactly("gpu", 1, MODEL.format("a100")))),
                "t4": claim(("gpu", exactly("t4", 1))),
            },
            (PodSpec("p", claim="a100", more=("t4",)),),
            {"p": A},
        ),
        id="two claims of one pod",
    ),
    pytest.param(
        Scenario(
            {},
            (PodSpec("p", template="five"),),
            {"p": PENDING},
            templates={"five": claim(("gpu", exactly(count=5)))},
        ),
        id="a template no node can satisfy",
    ),
    pytest.param(
        Scenario(
            {"tpu": claim(("tpu", exactly("gpu", 1, MODEL.format("tpu"))))},
            (PodSpec("p", claim="tpu"),),
            {"p": PENDING},
            slices=(*SLICES, TAINTED),
        ),
        id="a device with a NoSchedule taint",
    ),
    pytest.param(
        Scenario(
            {"tpu": claim(("tpu", {**exactly("gpu", 1, MODEL.format("tpu")), "tolerations": [TOLERATION]}))},
            (PodSpec("p", claim="tpu"),),
            {"p": B},
            slices=(*SLICES, TAINTED),
        ),
        id="a tainted device, tolerated",
    ),
    pytest.param(one("c", claim(("gpu", exactly(count=5))), PENDING), id="no node has enough devices"),
    pytest.param(
        Scenario(
            {
                "four": claim(("gpu", exactly(count=4))),
                "a100": claim(("gpu", exactly("gpu", 1, MODEL.format("a100")))),
                "three": claim(("gpu", exactly(count=3))),
            },
            (
                PodSpec("all-of-a", claim="four"),
                PodSpec("a100", claim="a100"),
                PodSpec("rest", claim="three"),
            ),
            # all-of-a takes every device of a; the a100s are a's; b still has three.
            {"all-of-a": A, "a100": PENDING, "rest": B},
        ),
        id="devices allocated to other claims",
    ),
]


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    topology = devnodes.Topology(zones=1, racks_per_zone=1)
    size = devnodes.NODE_TYPES["cpu-small"]
    replace_nodes(api, [devnodes.NodeSpec(name, size, *topology.place(i)) for i, name in enumerate(NODES)])
    return api


@pytest.fixture(scope="module")
def rl_scheduler(
    dev_cluster: Any, core: client.CoreV1Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    del core  # the nodes first
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path_factory.mktemp("logs")) as scheduler:
        yield scheduler


@dataclass
class Result:
    nodes: dict[str, str]  # pod -> node ("" pending)
    messages: dict[str, str]  # pending pod -> its last FailedScheduling message
    claims: dict[str, list[tuple[str, str, str]]]  # pod/ref -> its claim's (request, pool, device)
    node_selectors: dict[str, Any]  # pod/ref -> its claim's status.allocation.nodeSelector
    problems: list[str]


def _fill(text: str, driver: str) -> str:
    return text.replace(DRIVER, driver)


def _filled(value: Any, driver: str) -> Any:
    if isinstance(value, str):
        return _fill(value, driver)
    if isinstance(value, list):
        return [_filled(v, driver) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, driver) for k, v in value.items()}
    return value


def _class_names(value: Any, prefix: str) -> Any:
    """``deviceClassName`` values made the run's class names."""
    if isinstance(value, list):
        return [_class_names(v, prefix) for v in value]
    if isinstance(value, dict):
        return {
            k: f"{prefix}-{v}" if k == "deviceClassName" else _class_names(v, prefix)
            for k, v in value.items()
        }
    return value


def _pod_manifest(spec: PodSpec, namespace: str, scheduler: str) -> dict[str, Any]:
    ref = {"resourceClaimName": spec.claim} if spec.claim else {"resourceClaimTemplateName": spec.template}
    refs = [{"name": "dev", **ref}] + [
        {"name": f"dev{i}", "resourceClaimName": c} for i, c in enumerate(spec.more)
    ]
    selector = {"nodeSelector": {"kubernetes.io/hostname": spec.node}} if spec.node else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": spec.name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": r["name"]} for r in refs]},
                }
            ],
            "resourceClaims": refs,
            **selector,
        },
    }


class DeviceObjects:
    """The run's classes and slices (cluster-scoped), deleted afterwards."""

    def __init__(self, resource: client.ResourceV1Api, namespace: str, scenario: Scenario) -> None:
        self.resource = resource
        self.prefix = namespace
        self.driver = f"{namespace}.example.com"
        self.classes = {
            f"{namespace}-{name}": {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": f"{namespace}-{name}"},
                "spec": {"selectors": [{"cel": {"expression": _fill(e, self.driver)}} for e in selectors]},
            }
            for name, selectors in CLASSES.items()
        }
        self.slices = [s.manifest(namespace, self.driver) for s in scenario.slices]

    def __enter__(self) -> DeviceObjects:
        for cls in self.classes.values():
            self.resource.create_device_class(cls)
        for slice_ in self.slices:
            self.resource.create_resource_slice(slice_)
        return self

    def __exit__(self, *exc: object) -> None:
        for slice_ in self.slices:
            self.resource.delete_resource_slice(slice_["metadata"]["name"])
        for name in self.classes:
            self.resource.delete_device_class(name)


def _wait(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


def _bound(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    return bool(core.read_namespaced_pod(name, namespace).spec.node_name)


def _decided(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    return _bound(core, namespace, name) or any(
        e.reason == "FailedScheduling" for e in pod_events(core, namespace, name)
    )


def _messages(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    events = [e for e in pod_events(core, namespace, name) if e.reason == "FailedScheduling"]
    events.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    return [e.message for e in events]


def run(
    core: client.CoreV1Api,
    resource: client.ResourceV1Api,
    namespace: str,
    scenario: Scenario,
    scheduler: str,
) -> Result:
    if scenario.namespace_labels:
        core.patch_namespace(namespace, {"metadata": {"labels": dict(scenario.namespace_labels)}})
    with DeviceObjects(resource, namespace, scenario) as objects:
        for name, spec in scenario.claims.items():
            body = _class_names(_filled(spec, objects.driver), namespace)
            resource.create_namespaced_resource_claim(
                namespace,
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": name},
                    "spec": body,
                },
            )
        for name, spec in scenario.templates.items():
            body = _class_names(_filled(spec, objects.driver), namespace)
            resource.create_namespaced_resource_claim_template(
                namespace,
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaimTemplate",
                    "metadata": {"name": name},
                    "spec": {"spec": body},
                },
            )
        time.sleep(1.0)  # the schedulers' informers have the objects by now (they take milliseconds)
        for pod_spec in scenario.pods:
            core.create_namespaced_pod(namespace, _pod_manifest(pod_spec, namespace, scheduler))
            # A pod waiting for its template's claim may be reported first: a pod the
            # scenario binds is waited for until it binds (a pod that does not is
            # left to the comparison), the others until they are decided.
            check = _bound if scenario.expected[pod_spec.name] != PENDING else _decided
            _wait(functools.partial(check, core, namespace, pod_spec.name), 60)
        time.sleep(2.0)  # a pod reported unschedulable has time to bind if it would
        return _result(core, resource, namespace, scenario, objects)


def _result(
    core: client.CoreV1Api,
    resource: client.ResourceV1Api,
    namespace: str,
    scenario: Scenario,
    objects: DeviceObjects,
) -> Result:
    pods = {p["metadata"]["name"]: p for p in api_dicts(core, core.list_namespaced_pod(namespace).items)}
    claims = {
        c["metadata"]["name"]: c
        for c in api_dicts(core, resource.list_namespaced_resource_claim(namespace).items)
    }
    nodes = {name: pod["spec"].get("nodeName") or PENDING for name, pod in pods.items()}
    labels = {n.metadata.name: dict(n.metadata.labels or {}) for n in core.list_node().items}
    # The run's namespace (also in its class names) written NS, to compare runs.
    messages = {
        name: (_messages(core, namespace, name) or [""])[-1].replace(namespace, "NS")
        for name, node in nodes.items()
        if not node
    }
    allocated: dict[str, list[tuple[str, str, str]]] = {}
    selectors: dict[str, Any] = {}
    problems: list[str] = []
    for spec in scenario.pods:
        pod = pods[spec.name]
        node = nodes[spec.name]
        if not node:
            continue
        templated = [
            s["resourceClaimName"] for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        ]
        names = [spec.claim or (templated or [""])[0], *spec.more]
        for key, claim_name in zip(spec.keys, names, strict=True):
            if claim_name not in claims:
                problems.append(f"pod {spec.name}: its claim {claim_name!r} is not listed")
                continue
            found = claims[claim_name]
            problems += dra_checker.check_claim(
                found, objects.classes, objects.slices, node, labels[node], [pod["metadata"]["uid"]]
            )
            allocation = (found.get("status") or {}).get("allocation") or {}
            allocated[key] = sorted(
                (r["request"], r["pool"], r["device"])
                for r in allocation.get("devices", {}).get("results", [])
            )
            selectors[key] = allocation.get("nodeSelector")
    problems += [f"device {d} given twice" for d in dra_checker.devices_given_twice(claims.values())]
    return Result(nodes, messages, allocated, selectors, problems)


@pytest.fixture(scope="module")
def resource(dev_cluster: Any) -> client.ResourceV1Api:
    return client.ResourceV1Api(dev_cluster.api_client())


def test_admin_access_needs_the_namespace_label(
    core: client.CoreV1Api, resource: client.ResourceV1Api, request: pytest.FixtureRequest
) -> None:
    """Why the adminAccess row labels its namespace: the API server refuses the claim
    otherwise."""
    with scratch_namespace(core, "drap-admin", request.node.nodeid) as namespace:
        body = {"metadata": {"name": "c"}, "spec": claim(("gpu", exactly("gpu", 1, admin=True)))}
        with pytest.raises(ApiException) as refused:
            resource.create_namespaced_resource_claim(namespace, body)
    assert refused.value.status == 422
    assert "requires the `resource.kubernetes.io/admin-access: true` label" in str(refused.value.body)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_same_outcome_as_kube_scheduler(
    core: client.CoreV1Api,
    resource: client.ResourceV1Api,
    rl_scheduler: Any,
    request: pytest.FixtureRequest,
    scenario: Scenario,
) -> None:
    results = {}
    for scheduler in (KUBE_SCHEDULER, SCHEDULER):
        prefix = f"drap-{'kube' if scheduler == KUBE_SCHEDULER else 'rl'}"
        with scratch_namespace(core, prefix, request.node.nodeid) as namespace:
            results[scheduler] = run(core, resource, namespace, scenario, scheduler)
    kube, ours = results[KUBE_SCHEDULER], results[SCHEDULER]
    log = rl_scheduler.log()[-3000:]
    # The scenario is what kube does, and kube's allocations pass the checker.
    for name, node in scenario.expected.items():
        assert bool(kube.nodes[name]) if node == ANY else kube.nodes[name] == node, (name, kube.nodes)
    assert kube.problems == [], kube.problems
    # rl-scheduler: the same pods bound and pending, on the node the scenario fixes.
    assert {n: bool(v) for n, v in ours.nodes.items()} == {n: bool(v) for n, v in kube.nodes.items()}, log
    for name, node in scenario.expected.items():
        if node not in (ANY, PENDING):
            assert ours.nodes[name] == node, (name, ours.nodes, log)
    assert ours.problems == [], (ours.problems, log)
    # The same requests (and subrequests) got devices, the same devices on the same node.
    assert {k: [r for r, _, _ in v] for k, v in ours.claims.items()} == {
        k: [r for r, _, _ in v] for k, v in kube.claims.items()
    }
    # The same devices while every pod so far is on the same node as kube's (after
    # that, the free devices differ).
    same = True
    for spec in scenario.pods:
        same = same and kube.nodes[spec.name] == ours.nodes[spec.name]
        for key in spec.keys:
            if key in kube.claims and same:
                assert ours.claims[key] == kube.claims[key], (key, ours.claims, kube.claims)
                assert ours.node_selectors[key] == kube.node_selectors[key], (key, ours.node_selectors)
    # kube's words for the pods that stay pending.
    assert {n: kube_part(m) for n, m in ours.messages.items()} == kube.messages
