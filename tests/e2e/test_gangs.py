"""Gang scheduling against the dev cluster, with scheduler-plugins' PodGroups: a gang
binds whole or not at all, is reported while it cannot, binds once room appears, two
gangs competing for the same GPUs never deadlock, and a gang of higher priority evicts
what it needs, and only then, to bind whole.

GPU nodes of 2 GPUs each (KWOK, registered as HAMi does); every worker asks for one
whole GPU (100% of its cores and memory), so the arithmetic is a count of GPUs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import nodes as devnodes
from scheduler.objects.pod_group import CORE_GROUP, CORE_VERSION, GROUP, PLURAL, POD_GROUP_LABEL, VERSION
from tests.e2e import checker
from tests.e2e.support import (
    api_dicts,
    create_pods,
    ensure_pod_group_crd,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-gangs"
GPU_NODE = devnodes.NodeType(32_000, 131_072, 2, "V100M32")


def gpu_nodes(*names: str) -> list[devnodes.NodeSpec]:
    return [
        devnodes.NodeSpec(name, GPU_NODE, "zone-a", f"zone-a-rack-{i // 2}") for i, name in enumerate(names)
    ]


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    ensure_pod_group_crd(api.api_client)
    return api


@pytest.fixture(scope="module")
def scheduler(
    dev_cluster: Any, core: client.CoreV1Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    logs = tmp_path_factory.mktemp("logs")
    with running_scheduler(dev_cluster.kubeconfig, SCHEDULER, logs) as process:
        yield process.log_path


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "e2e-gangs", request.node.nodeid) as name:
        yield name


def create_group(core: client.CoreV1Api, namespace: str, name: str, min_member: int) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 60},
    }
    client.CustomObjectsApi(core.api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )


def workers(namespace: str, group: str, count: int) -> list[dict[str, Any]]:
    return [
        pod(f"{group}-{i}", namespace, SCHEDULER, gpus=1, gpu_percent=100, labels={POD_GROUP_LABEL: group})
        for i in range(count)
    ]


def bound(core: client.CoreV1Api, namespace: str, group: str) -> list[str]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"{POD_GROUP_LABEL}={group}").items
    return sorted(p.metadata.name for p in pods if p.spec.node_name)


def failures(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    return [e.message for e in pod_events(core, namespace, name) if e.reason == "FailedScheduling"]


def violations(core: client.CoreV1Api, namespace: str) -> list[str]:
    groups = client.CustomObjectsApi(core.api_client).list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL
    )
    return checker.check(
        api_dicts(core, core.list_node().items),
        api_dicts(core, core.list_namespaced_pod(namespace).items),
        pod_groups=groups["items"],
    )


def test_a_gang_of_8_with_room_for_6_binds_none_reports_it_and_binds_all_8_once_room_appears(
    core: client.CoreV1Api, scheduler: Path, namespace: str
) -> None:
    replace_nodes(core, gpu_nodes("gang-a", "gang-b", "gang-c"))  # 6 GPUs
    create_group(core, namespace, "train", 8)
    create_pods(core, workers(namespace, "train", 8))
    expected = f"PodGroup {namespace}/train gets rejected: 6 of the 8 pods it needs could be placed at once"

    def all_reported() -> bool:
        return all(any(expected in m for m in failures(core, namespace, f"train-{i}")) for i in range(8))

    wait_for(all_reported, 60, "every member's FailedScheduling naming the gang")
    time.sleep(2)  # nothing binds meanwhile either
    assert bound(core, namespace, "train") == []
    devnodes.create_nodes(core, gpu_nodes("gang-a", "gang-b", "gang-c", "gang-d")[3:])
    wait_for(lambda: len(bound(core, namespace, "train")) == 8, 90, "all 8 workers to bind")
    assert violations(core, namespace) == []
    # A GPU gang takes the fewest nodes: 8 one-GPU workers, 2 per node.
    nodes = {p.spec.node_name for p in core.list_namespaced_pod(namespace).items}
    assert len(nodes) == 4


def test_a_group_waits_for_its_pod_group_and_its_members_then_binds(
    core: client.CoreV1Api, scheduler: Path, namespace: str
) -> None:
    replace_nodes(core, gpu_nodes("gang-a", "gang-b"))
    create_pods(core, workers(namespace, "late", 2))
    wait_for(
        lambda: any(f"PodGroup {namespace}/late not found" in m for m in failures(core, namespace, "late-0")),
        60,
        "the missing PodGroup reported",
    )
    create_group(core, namespace, "late", 3)  # 2 pods of minMember 3
    wait_for(
        lambda: any(
            "current pods number: 2, minMember of group: 3" in m for m in failures(core, namespace, "late-0")
        ),
        60,
        "the missing member reported",
    )
    assert bound(core, namespace, "late") == []
    create_pods(core, workers(namespace, "late", 3)[2:])
    wait_for(lambda: len(bound(core, namespace, "late")) == 3, 60, "the 3 members to bind")
    assert violations(core, namespace) == []


def test_two_gangs_competing_for_the_same_gpus_never_deadlock(
    core: client.CoreV1Api, scheduler: Path, namespace: str
) -> None:
    replace_nodes(core, gpu_nodes("gang-a", "gang-b", "gang-c", "gang-d"))  # 8 GPUs
    for group in ("blue", "green"):
        create_group(core, namespace, group, 6)
    # Interleaved, so each gang's members arrive between the other's: 12 workers, 8 GPUs.
    blue, green = workers(namespace, "blue", 6), workers(namespace, "green", 6)
    create_pods(core, [m for pair in zip(blue, green, strict=True) for m in pair], workers=1)

    def one_gang_whole() -> bool:
        counts = sorted(len(bound(core, namespace, g)) for g in ("blue", "green"))
        return counts == [0, 6]

    wait_for(one_gang_whole, 90, "one gang bound whole, the other not at all")
    first = "blue" if bound(core, namespace, "blue") else "green"
    second = "green" if first == "blue" else "blue"
    assert violations(core, namespace) == []
    # The gang that got the GPUs finishes: the other takes them, whole.
    core.delete_collection_namespaced_pod(
        namespace, label_selector=f"{POD_GROUP_LABEL}={first}", grace_period_seconds=0
    )
    wait_for(lambda: len(bound(core, namespace, second)) == 6, 90, f"gang {second} to bind whole")
    assert violations(core, namespace) == []


LOW, HIGH = "rl-e2e-gang-low", "rl-e2e-gang-high"


def ensure_priority_classes(core: client.CoreV1Api) -> None:
    scheduling = client.SchedulingV1Api(core.api_client)
    for name, value in ((LOW, 10), (HIGH, 1000)):
        try:
            scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
        except ApiException as error:
            if error.status != 409:
                raise
    wait_for(
        lambda: {LOW, HIGH} <= {c.metadata.name for c in scheduling.list_priority_class().items},
        30,
        "the priority classes",
    )
    time.sleep(1.0)  # the admission plugin's informer has them by now


def fillers(namespace: str, count: int) -> list[dict[str, Any]]:
    """One-GPU pods of low priority, outside any gang."""
    return [
        pod(f"filler-{i}", namespace, SCHEDULER, gpus=1, gpu_percent=100, extra={"priorityClassName": LOW})
        for i in range(count)
    ]


def urgent(namespace: str, group: str, count: int) -> list[dict[str, Any]]:
    members = workers(namespace, group, count)
    for member in members:
        member["spec"]["priorityClassName"] = HIGH
    return members


def running_fillers(core: client.CoreV1Api, namespace: str) -> list[str]:
    pods = core.list_namespaced_pod(namespace).items
    return sorted(
        p.metadata.name
        for p in pods
        if p.metadata.name.startswith("filler-") and p.spec.node_name and not p.metadata.deletion_timestamp
    )


@pytest.mark.parametrize(
    ("members", "evicted", "binds"),
    [
        # 4 GPUs full of low-priority pods; a gang of 2 evicts 2 of them and binds whole.
        (2, 2, True),
        # A gang of 5 cannot fit 4 GPUs even with every victim gone: no one is evicted.
        (5, 0, False),
    ],
    ids=["evicts-what-it-needs", "evicts-no-one-when-it-cannot-fit"],
)
def test_a_gang_of_higher_priority_preempts_whole_or_not_at_all(
    core: client.CoreV1Api, scheduler: Path, namespace: str, members: int, evicted: int, binds: bool
) -> None:
    ensure_priority_classes(core)
    replace_nodes(core, gpu_nodes("gang-a", "gang-b"))  # 4 GPUs
    create_pods(core, fillers(namespace, 4))
    wait_for(lambda: len(running_fillers(core, namespace)) == 4, 60, "the 4 fillers to bind")
    create_group(core, namespace, "urgent", members)
    create_pods(core, urgent(namespace, "urgent", members))
    first = f"{namespace}/urgent gets rejected"
    wait_for(
        lambda: all(
            any(first in m and "preemption:" in m for m in failures(core, namespace, f"urgent-{i}"))
            for i in range(members)
        ),
        60,
        "every member's FailedScheduling with the gang's preemption",
    )
    if binds:
        wait_for(lambda: len(bound(core, namespace, "urgent")) == members, 90, "the gang to bind whole")
    else:
        time.sleep(3)  # nothing is evicted or bound meanwhile either
        assert bound(core, namespace, "urgent") == []
        assert all(
            "0/2 nodes are available" in m
            for m in failures(core, namespace, "urgent-0")
            if "preemption:" in m
        )
    assert len(running_fillers(core, namespace)) == 4 - evicted
    assert violations(core, namespace) == []


def create_core_group(core: client.CoreV1Api, namespace: str, name: str, policy: dict[str, Any]) -> None:
    """A PodGroup of the Workload API (scheduling.k8s.io/v1alpha2; the dev cluster's API
    server runs with the GenericWorkload gate)."""
    body = {
        "apiVersion": f"{CORE_GROUP}/{CORE_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": policy},
    }
    client.CustomObjectsApi(core.api_client).create_namespaced_custom_object(
        CORE_GROUP, CORE_VERSION, namespace, PLURAL, body
    )


def core_members(namespace: str, group: str, count: int) -> list[dict[str, Any]]:
    pods = [pod(f"{group}-{i}", namespace, SCHEDULER, gpus=1, gpu_percent=100) for i in range(count)]
    for member in pods:
        member["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pods


def bound_named(core: client.CoreV1Api, namespace: str, prefix: str) -> list[str]:
    pods = core.list_namespaced_pod(namespace).items
    return sorted(p.metadata.name for p in pods if p.metadata.name.startswith(prefix) and p.spec.node_name)


def test_the_workload_apis_gang_binds_whole_and_its_basic_policy_binds_pod_by_pod(
    core: client.CoreV1Api, scheduler: Path, namespace: str
) -> None:
    replace_nodes(core, gpu_nodes("gang-a", "gang-b"))  # 4 GPUs
    create_core_group(core, namespace, "wl", {"gang": {"minCount": 5}})
    create_pods(core, core_members(namespace, "wl", 5))
    expected = f"PodGroup scheduling.k8s.io:{namespace}/wl gets rejected: 4 of the 5 pods it needs"
    wait_for(
        lambda: all(any(expected in m for m in failures(core, namespace, f"wl-{i}")) for i in range(5)),
        60,
        "every member's FailedScheduling naming the gang",
    )
    assert bound_named(core, namespace, "wl-") == []
    devnodes.create_nodes(core, gpu_nodes("gang-a", "gang-b", "gang-c")[2:])
    wait_for(lambda: len(bound_named(core, namespace, "wl-")) == 5, 90, "all 5 members to bind")
    # The basic policy is no gang: of 3 pods, the one GPU left takes one.
    create_core_group(core, namespace, "basic", {"basic": {}})
    create_pods(core, core_members(namespace, "basic", 3))
    wait_for(lambda: len(bound_named(core, namespace, "basic-")) == 1, 60, "one basic pod to bind")
    assert violations(core, namespace) == []
