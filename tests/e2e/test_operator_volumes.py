"""Pods with PersistentVolumeClaims and generic ephemeral volumes on the local control
plane (KWOK nodes; kube-controller-manager's PV and ephemeral-volume controllers): they
land only where their volumes can be attached.

- local volumes (a ``WaitForFirstConsumer`` class without a provisioner, PVs with
  hostname node affinity): the scheduler binds each claim to a volume on the node it
  chooses, the PV controller completes the binding, then the pod binds;
- a claim bound beforehand: the pod goes to its volume's node;
- a class with a provisioner and ``allowedTopologies``: the scheduler names the node
  (``volume.kubernetes.io/selected-node``), the test plays the external provisioner
  (a PV on that node), the PV controller binds, the pod binds; the same for an
  ephemeral volume's claim;
- and the reasons kube-scheduler gives: no volume left, a missing claim, a claim the
  PV controller has not bound.
The independent checker then finds every placed pod's volumes attachable."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e import checker
from tests.e2e.support import (
    create_pods,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import mixed_nodes
from tests.volume_builders import (
    claim_manifest,
    claim_pod_manifest,
    storage_class_manifest,
    volume_manifest,
)

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-volumes"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONER = "example.com/rl-test-provisioner"
NO_VOLUME = "node(s) didn't find available persistent volumes to bind"
# mixed_nodes(10): node i is in zone a, b, c by i % 3; nodes 4 and 9 are tainted.
ZONE_B_UNTAINTED = {"e2e-node-001", "e2e-node-007"}


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    replace_nodes(api, mixed_nodes(10))
    return api


@pytest.fixture
def storage(dev_cluster: Any) -> client.StorageV1Api:
    return client.StorageV1Api(dev_cluster.api_client())


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "volumes", request.node.nodeid) as name:
        yield name
        core.delete_collection_namespaced_persistent_volume_claim(name)


@pytest.fixture
def cluster_objects(core: client.CoreV1Api, storage: client.StorageV1Api, namespace: str) -> Iterator[str]:
    """A prefix for this test's classes and volumes (cluster-wide), deleted afterwards."""
    prefix = namespace
    yield prefix
    for pv in core.list_persistent_volume().items:
        if pv.metadata.name.startswith(prefix):
            core.delete_persistent_volume(pv.metadata.name)
    for sc in storage.list_storage_class().items:
        if sc.metadata.name.startswith(prefix):
            storage.delete_storage_class(sc.metadata.name)


class Provisioner:
    """Plays an external provisioner for ``class_name``: a claim with a selected node
    gets a PV there (hostname node affinity, the claim in its claimRef)."""

    def __init__(self, core: client.CoreV1Api, namespace: str, class_name: str) -> None:
        self.core, self.namespace, self.class_name = core, namespace, class_name
        self.provisioned: dict[str, str] = {}  # claim -> node
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Provisioner:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            for claim in self.core.list_namespaced_persistent_volume_claim(self.namespace).items:
                node = (claim.metadata.annotations or {}).get(SELECTED_NODE)
                name = claim.metadata.name
                if claim.spec.storage_class_name != self.class_name or not node or name in self.provisioned:
                    continue
                pv = volume_manifest(
                    f"{self.class_name}-{name}",
                    storage_class=self.class_name,
                    size=claim.spec.resources.requests["storage"],
                    nodes=[node],
                    claim=(self.namespace, name),
                )
                pv["spec"]["claimRef"]["uid"] = claim.metadata.uid
                try:
                    self.core.create_persistent_volume(pv)
                except ApiException as error:
                    if error.status != 409:
                        raise
                self.provisioned[name] = node


def _nodes_of(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    return {
        p.metadata.name: p.spec.node_name
        for p in core.list_namespaced_pod(namespace).items
        if p.spec.node_name
    }


def _failed(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    return [e.message for e in pod_events(core, namespace, name) if e.reason == "FailedScheduling"]


def _waits_with(core: client.CoreV1Api, namespace: str, name: str, reason: str) -> bool:
    return any(reason in message for message in _failed(core, namespace, name))


def test_claim_pods_land_only_where_their_volumes_can_be_attached(
    dev_cluster: Any,
    core: client.CoreV1Api,
    storage: client.StorageV1Api,
    namespace: str,
    cluster_objects: str,
    tmp_path: Path,
) -> None:
    local, fast, slow = (f"{cluster_objects}-{n}" for n in ("local", "fast", "slow"))
    storage.create_storage_class(storage_class_manifest(local, provisioner="kubernetes.io/no-provisioner"))
    storage.create_storage_class(storage_class_manifest(fast, provisioner=PROVISIONER, zones=["zone-b"]))
    storage.create_storage_class(storage_class_manifest(slow, provisioner=PROVISIONER, mode="Immediate"))
    local_nodes = {"e2e-node-002", "e2e-node-005"}
    for node in sorted(local_nodes):
        core.create_persistent_volume(
            volume_manifest(f"{local}-{node}", storage_class=local, size="5Gi", nodes=[node])
        )
    # Too small for the claims (1Gi < 2Gi): never chosen.
    core.create_persistent_volume(
        volume_manifest(f"{local}-small", storage_class=local, size="1Gi", nodes=["e2e-node-006"])
    )
    # A claim bound beforehand, to a volume on node 3.
    core.create_persistent_volume(
        volume_manifest(f"{cluster_objects}-preset", nodes=["e2e-node-003"], claim=(namespace, "preset"))
    )
    claims = [
        claim_manifest(f"data-{i}", namespace=namespace, storage_class=local, size="2Gi") for i in range(3)
    ]
    claims += [
        claim_manifest("preset", namespace=namespace, storage_class="", volume=f"{cluster_objects}-preset"),
        claim_manifest("cache", namespace=namespace, storage_class=fast),
        claim_manifest("unbound", namespace=namespace, storage_class=slow),
    ]
    for manifest in claims:
        del manifest["metadata"]["uid"], manifest["status"]
        core.create_namespaced_persistent_volume_claim(namespace, manifest)
    ephemeral = claim_pod_manifest("job", namespace=namespace, ephemeral=["scratch"], scheduler=SCHEDULER)
    ephemeral["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] = fast
    pods = [
        *(
            claim_pod_manifest(f"db-{i}", [f"data-{i}"], namespace=namespace, scheduler=SCHEDULER)
            for i in range(3)
        ),
        claim_pod_manifest("app", ["preset"], namespace=namespace, scheduler=SCHEDULER),
        claim_pod_manifest("cache", ["cache"], namespace=namespace, scheduler=SCHEDULER),
        ephemeral,
        claim_pod_manifest("orphan", ["nope"], namespace=namespace, scheduler=SCHEDULER),
        claim_pod_manifest("waiting", ["unbound"], namespace=namespace, scheduler=SCHEDULER),
    ]
    for manifest in pods:
        del manifest["metadata"]["uid"]

    with (
        running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path) as scheduler,
        Provisioner(core, namespace, fast) as provisioner,
    ):
        create_pods(core, pods)
        log = lambda: scheduler.log()[-4000:]  # noqa: E731

        # Two local volumes for three claims: two pods bind, one on each volume's node.
        wait_for(
            lambda: len({f"db-{i}" for i in range(3)} & set(_nodes_of(core, namespace))) == 2,
            90,
            "two db pods",
        )
        placed = _nodes_of(core, namespace)
        [left] = [f"db-{i}" for i in range(3) if f"db-{i}" not in placed]
        assert {placed[p] for p in placed if p.startswith("db-")} == local_nodes, log()
        wait_for(lambda: _waits_with(core, namespace, left, f"8 {NO_VOLUME}"), 60, f"{left}: no volume left")

        # A bound claim's pod goes to its volume's node.
        wait_for(lambda: "app" in _nodes_of(core, namespace), 60, "app to bind")
        assert _nodes_of(core, namespace)["app"] == "e2e-node-003"

        # Provisioned where the scheduler chose, in zone b; an ephemeral volume's claim too.
        wait_for(
            lambda: {"cache", "job"} <= set(_nodes_of(core, namespace)),
            90,
            "cache and job to bind",
        )
        placed = _nodes_of(core, namespace)
        assert provisioner.provisioned == {"cache": placed["cache"], "job-scratch": placed["job"]}, log()
        assert {placed["cache"], placed["job"]} <= ZONE_B_UNTAINTED

        # kube-scheduler's reasons for the rest.
        wait_for(
            lambda: _waits_with(core, namespace, "orphan", 'persistentvolumeclaim "nope" not found'),
            60,
            "orphan",
        )
        wait_for(
            lambda: _waits_with(
                core, namespace, "waiting", "pod has unbound immediate PersistentVolumeClaims"
            ),
            60,
            "waiting's reason",
        )

        # A new volume: the pod left over binds there.
        core.create_persistent_volume(
            volume_manifest(f"{local}-e2e-node-008", storage_class=local, size="5Gi", nodes=["e2e-node-008"])
        )
        wait_for(lambda: left in _nodes_of(core, namespace), 60, f"{left} to bind to the new volume")
        assert _nodes_of(core, namespace)[left] == "e2e-node-008"
        assert not {"orphan", "waiting"} & set(_nodes_of(core, namespace))

        bound = {
            c.metadata.name: c.spec.volume_name
            for c in core.list_namespaced_persistent_volume_claim(namespace).items
        }
        assert bound[f"data-{left[-1]}"] == f"{local}-e2e-node-008"
        nodes = core.api_client.sanitize_for_serialization(core.list_node().items)
        listed = core.list_namespaced_pod(namespace).items
        assert (
            checker.check(
                nodes,
                core.api_client.sanitize_for_serialization(listed),
                core.api_client.sanitize_for_serialization(
                    core.list_namespaced_persistent_volume_claim(namespace).items
                ),
                core.api_client.sanitize_for_serialization(core.list_persistent_volume().items),
            )
            == []
        ), log()


def test_a_provisioner_that_gives_the_node_back_fails_the_bind_and_the_pod_waits(
    dev_cluster: Any,
    core: client.CoreV1Api,
    storage: client.StorageV1Api,
    namespace: str,
    cluster_objects: str,
    tmp_path: Path,
) -> None:
    """A provisioner that cannot provision removes the selected-node annotation (as
    external-provisioner does): the bind fails with kube-scheduler's PreBind error and
    the pod stays unbound; the claim keeps no volume."""
    broken = f"{cluster_objects}-broken"
    storage.create_storage_class(storage_class_manifest(broken, provisioner=PROVISIONER))
    claim = claim_manifest("data", namespace=namespace, storage_class=broken)
    del claim["metadata"]["uid"], claim["status"]
    core.create_namespaced_persistent_volume_claim(namespace, claim)
    pod = claim_pod_manifest("db", ["data"], namespace=namespace, scheduler=SCHEDULER)
    del pod["metadata"]["uid"]
    expected = 'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC "data"'
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path) as scheduler:
        create_pods(core, [pod])

        def give_back() -> bool:
            current = core.read_namespaced_persistent_volume_claim("data", namespace)
            if SELECTED_NODE not in (current.metadata.annotations or {}):
                return False
            patch = {"metadata": {"annotations": {SELECTED_NODE: None}}}
            core.patch_namespaced_persistent_volume_claim("data", namespace, patch)
            return True

        wait_for(give_back, 60, "the scheduler to select a node for the claim")
        wait_for(lambda: _waits_with(core, namespace, "db", expected), 60, "the PreBind error")
        assert "db" not in _nodes_of(core, namespace), scheduler.log()[-3000:]
        assert not core.read_namespaced_persistent_volume_claim("data", namespace).spec.volume_name


KUBE_SCHEDULER = "default-scheduler"


def _same_scenario(
    core: client.CoreV1Api, storage: client.StorageV1Api, namespace: str, scheduler: str
) -> None:
    """One local PV (node 2) for two claims, a claim bound beforehand (node 3), a
    missing claim, an unbound claim of an Immediate class, in ``namespace``."""
    local, slow = f"{namespace}-local", f"{namespace}-slow"
    storage.create_storage_class(storage_class_manifest(local, provisioner="kubernetes.io/no-provisioner"))
    storage.create_storage_class(storage_class_manifest(slow, provisioner=PROVISIONER, mode="Immediate"))
    core.create_persistent_volume(
        volume_manifest(f"{local}-2", storage_class=local, size="5Gi", nodes=["e2e-node-002"])
    )
    core.create_persistent_volume(
        volume_manifest(f"{namespace}-preset", nodes=["e2e-node-003"], claim=(namespace, "preset"))
    )
    claims = [
        claim_manifest("data-0", namespace=namespace, storage_class=local, size="2Gi"),
        claim_manifest("data-1", namespace=namespace, storage_class=local, size="2Gi"),
        claim_manifest("preset", namespace=namespace, storage_class="", volume=f"{namespace}-preset"),
        claim_manifest("unbound", namespace=namespace, storage_class=slow),
    ]
    for manifest in claims:
        del manifest["metadata"]["uid"], manifest["status"]
        core.create_namespaced_persistent_volume_claim(namespace, manifest)
    for name, claim in (("db-0", "data-0"), ("app", "preset"), ("orphan", "nope"), ("waiting", "unbound")):
        pod = claim_pod_manifest(name, [claim], namespace=namespace, scheduler=scheduler)
        del pod["metadata"]["uid"]
        core.create_namespaced_pod(namespace, pod)
    wait_for(
        lambda: {"db-0", "app"} <= set(_nodes_of(core, namespace)), 60, f"{scheduler}: db-0 and app to bind"
    )
    pod = claim_pod_manifest("db-1", ["data-1"], namespace=namespace, scheduler=scheduler)
    del pod["metadata"]["uid"]
    core.create_namespaced_pod(namespace, pod)


def _outcome(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    """Each pod's node, or the fit error of its FailedScheduling message (its first
    sentence: kube-scheduler adds what preemption found)."""
    placed = _nodes_of(core, namespace)
    out = dict(placed)
    for name in ("db-1", "orphan", "waiting"):
        messages = _failed(core, namespace, name)
        out[name] = messages[-1].split(". ")[0].rstrip(".") if messages else ""
    return out


def test_volume_reasons_and_places_are_kube_schedulers(
    dev_cluster: Any,
    core: client.CoreV1Api,
    storage: client.StorageV1Api,
    cluster_objects: str,
    tmp_path: Path,
) -> None:
    """kube-scheduler (in the dev cluster) and rl-scheduler on the same scenario, each
    in a namespace of its own: the same nodes and the same reasons."""
    outcomes = {}
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, tmp_path):
        for scheduler in (KUBE_SCHEDULER, SCHEDULER):
            namespace = f"{cluster_objects}-{'kube' if scheduler == KUBE_SCHEDULER else 'rl'}"
            core.create_namespace({"metadata": {"name": namespace}})
            try:
                _same_scenario(core, storage, namespace, scheduler)
                wait_for(
                    lambda n=namespace: all(_outcome(core, n).values()), 60, f"{scheduler}: every reason"
                )
                outcomes[scheduler] = _outcome(core, namespace)
            finally:
                core.delete_namespace(namespace)
    kube, ours = outcomes[KUBE_SCHEDULER], outcomes[SCHEDULER]
    assert kube == {
        "db-0": "e2e-node-002",
        "app": "e2e-node-003",
        "db-1": f"0/10 nodes are available: 2 node(s) had untolerated taint(s), 8 {NO_VOLUME}",
        "orphan": '0/10 nodes are available: persistentvolumeclaim "nope" not found',
        "waiting": "0/10 nodes are available: pod has unbound immediate PersistentVolumeClaims",
    }
    assert ours == kube
