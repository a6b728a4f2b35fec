"""One tenant's pod cannot stop the scheduler for everyone: pods whose fields the API
server accepts but rl-scheduler cannot read, created before it starts and while it
runs, are each reported once on that pod; the scheduler stays ready and places the
ordinary pods created after them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.support import (
    create_pods,
    pod_events,
    replace_nodes,
    running_scheduler,
    scratch_namespace,
    wait_for,
)
from tests.e2e.workloads import mixed_nodes, pod

pytestmark = pytest.mark.cluster
SCHEDULER = "rl-scheduler-hostile"
MANY_DIGITS = "1" * 5000  # past Python's 4,300-digit int() limit
HUGE_EXPONENT = "1e1048577"  # stored by the API server as 100e1048575


def container(resources: dict[str, Any], name: str = "main") -> dict[str, Any]:
    return {"name": name, "image": "registry.k8s.io/pause:3.10", "resources": resources}


# (name, what the pod asks that the API server stores and we cannot read, the message's field)
BAD_PODS: list[tuple[str, dict[str, Any], str]] = [
    (
        "cpu-digits",
        {"containers": [container({"requests": {"cpu": MANY_DIGITS}})]},
        "spec.containers[0].resources.requests.cpu",
    ),
    (
        "memory-exponent",
        {"containers": [container({"limits": {"memory": HUGE_EXPONENT}})]},
        "spec.containers[0].resources.requests.memory",  # the API server copies the limit
    ),
    (
        "init-storage-exponent",
        {
            "initContainers": [container({"requests": {"ephemeral-storage": HUGE_EXPONENT}}, "init")],
            "containers": [container({})],
        },
        "spec.initContainers[0].resources.requests.ephemeral-storage",
    ),
]


def bad_pod(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    manifest = pod(name, namespace, SCHEDULER)
    manifest["spec"].update(spec)
    return manifest


def bound_bad_pod(name: str, namespace: str, node: str) -> dict[str, Any]:
    """Another scheduler's pod, placed by naming its node, with a quantity we cannot read:
    the cache skips it, and nothing else."""
    manifest = pod(name, namespace, "default-scheduler", cpu="1")
    manifest["spec"]["nodeName"] = node
    manifest["spec"]["containers"][0]["resources"]["limits"] = {"memory": HUGE_EXPONENT}
    manifest["spec"]["containers"][0]["resources"]["requests"].pop("memory")
    manifest["spec"]["tolerations"] = [{"operator": "Exists"}]
    return manifest


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    replace_nodes(api, mixed_nodes(10))
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "e2e-hostile", request.node.nodeid) as name:
        yield name


def failed_scheduling(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    return [e.message or "" for e in pod_events(core, namespace, name) if e.reason == "FailedScheduling"]


def test_unreadable_pods_cost_only_themselves_before_the_start_and_while_running(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Any
) -> None:
    before = [bad_pod(f"before-{name}", namespace, spec) for name, spec, _ in BAD_PODS]
    create_pods(core, [*before, bound_bad_pod("before-bound", namespace, "e2e-node-000")])
    # Before the fix, the first listing failed on them: never ready, a restart loop.
    with running_scheduler(
        dev_cluster.kubeconfig, SCHEDULER, tmp_path, "--profile", "fgd-reserve"
    ) as scheduler:
        during = [bad_pod(f"during-{name}", namespace, spec) for name, spec, _ in BAD_PODS]
        create_pods(core, [*during, bound_bad_pod("during-bound", namespace, "e2e-node-001")])
        fields = {f"{when}-{name}": field for name, _, field in BAD_PODS for when in ("before", "during")}

        def all_reported() -> bool:
            return all(failed_scheduling(core, namespace, name) for name in fields)

        wait_for(all_reported, 60, "a FailedScheduling event on every unreadable pod")
        ordinary = [
            pod(f"ordinary-{i:03d}", namespace, SCHEDULER, cpu="10m", memory="16Mi") for i in range(100)
        ]
        create_pods(core, ordinary)

        def bound() -> int:
            pods = core.list_namespaced_pod(namespace).items
            return sum(1 for p in pods if p.metadata.name.startswith("ordinary-") and p.spec.node_name)

        try:
            wait_for(lambda: bound() == 100, 120, "the 100 ordinary pods to bind")
        except AssertionError as error:
            raise AssertionError(f"{error}: {bound()} bound\n{scheduler.log()[-3000:]}") from None
        time.sleep(2)  # a repeated report would come with the watch events of the binds
        for name, field in fields.items():
            messages = failed_scheduling(core, namespace, name)
            assert len(messages) == 1, (name, messages)
            assert field in messages[0], (name, messages)
            assert "out of range" in messages[0] or "characters long" in messages[0], (name, messages)
        for name in fields:
            assert not core.read_namespaced_pod(name, namespace).spec.node_name
        assert scheduler.get("/readyz")[0] == 200
        assert scheduler.process is not None
        assert scheduler.process.poll() is None
        assert scheduler.metric("rl_scheduler_unreadable_objects_total", {"kind": "pod"}) >= len(fields) + 2
        log = scheduler.log()
        assert f"{namespace}/before-bound" in log
        assert f"{namespace}/during-bound" in log
