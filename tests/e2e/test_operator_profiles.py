"""Several profiles in one rl-scheduler process, from its settings file and from a
KubeSchedulerConfiguration file: each pod is scheduled by the profile its
``spec.schedulerName`` names, and a configuration naming what rl-scheduler does not
implement stops the process with the field's path."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from devcluster import nodes as devnodes
from tests.e2e.support import create_pods, replace_nodes, running_scheduler, scratch_namespace, wait_for
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
NODES = 8
PODS = 8  # per profile


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    size = devnodes.NODE_TYPES["cpu-small"]  # 32 cores, 128 GiB
    replace_nodes(api, [devnodes.NodeSpec(f"e2e-prof-{i}", size, "zone-a", "rack-1") for i in range(NODES)])
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "e2e-profiles", request.node.nodeid) as name:
        yield name


def nodes_used(core: client.CoreV1Api, namespace: str, scheduler: str) -> list[str]:
    """The node of each of ``scheduler``'s pods; waits until all are bound."""

    def bound() -> bool:
        pods = [p for p in core.list_namespaced_pod(namespace).items if p.spec.scheduler_name == scheduler]
        return len(pods) == PODS and all(p.spec.node_name for p in pods)

    wait_for(bound, 120, f"{PODS} pods of {scheduler} to be bound")
    pods = core.list_namespaced_pod(namespace).items
    return [p.spec.node_name for p in pods if p.spec.scheduler_name == scheduler]


def run_both(
    core: client.CoreV1Api, namespace: str, packer: str, spreader: str, scheduler: Any
) -> tuple[list[str], list[str]]:
    """The packer's pods first, then the spreader's; where each landed."""
    placed = []
    for name in (packer, spreader):
        create_pods(core, [pod(f"{name}-{i}", namespace, name, cpu="2", memory="8Gi") for i in range(PODS)])
        placed.append(nodes_used(core, namespace, name))
        labels = {"result": "scheduled", "profile": name}
        wait_for(
            lambda labels=labels: scheduler.metric("scheduler_schedule_attempts_total", labels) >= PODS,
            30,
            f"scheduled attempts of {name}",
        )
    return placed[0], placed[1]


def assert_packed_then_spread(packed: list[str], spread: list[str]) -> None:
    """8 pods of 2 cores and 8 GiB (the nodes' own ratio, so the balance score is the
    same everywhere) on 8 empty 32-core nodes: packing keeps them on one node; spreading
    then puts one on each of the 7 empty nodes and the eighth beside one of them."""
    assert len(set(packed)) == 1, packed
    assert len(set(spread)) == NODES - 1, spread
    assert packed[0] not in spread


def test_two_profiles_in_one_process_each_bind_their_pods(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    """rl-prof-pack packs (MostAllocated), rl-prof-spread spreads (kube's LeastAllocated)."""
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "profile": "most-allocated",
                "profiles": [{"schedulerName": "rl-prof-spread", "preset": "default"}],
                "leader_election": {"enabled": False},
            }
        )
    )
    with running_scheduler(
        dev_cluster.kubeconfig, "rl-prof-pack", tmp_path, "--config", str(settings)
    ) as scheduler:
        packed, spread = run_both(core, namespace, "rl-prof-pack", "rl-prof-spread", scheduler)
    assert_packed_then_spread(packed, spread)


KUBE_CONFIGURATION: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "leaderElection": {"leaderElect": False},
    "clientConnection": {"qps": 100, "burst": 200},
    "profiles": [
        {
            "schedulerName": "rl-kube-pack",
            "plugins": {
                "score": {
                    "disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                    "enabled": [{"name": "NodeResourcesFit", "weight": 5}],
                }
            },
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "NodeResourcesFitArgs",
                        "scoringStrategy": {
                            "type": "MostAllocated",
                            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                        },
                    },
                }
            ],
        },
        {"schedulerName": "rl-kube-spread"},
    ],
}


def test_a_kube_scheduler_configuration_with_our_plugins_loads(
    dev_cluster: Any, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(KUBE_CONFIGURATION))
    with running_scheduler(
        dev_cluster.kubeconfig, "rl-kube-pack", tmp_path, "--config", str(path)
    ) as scheduler:
        packed, spread = run_both(core, namespace, "rl-kube-pack", "rl-kube-spread", scheduler)
    assert_packed_then_spread(packed, spread)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            {
                "profiles": [
                    {"schedulerName": "x", "plugins": {"reserve": {"enabled": [{"name": "VolumeBinding"}]}}}
                ]
            },
            "profiles[0].plugins.reserve: not supported by rl-scheduler",
            id="reserve point",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "x", "plugins": {"score": {"enabled": [{"name": "Spread"}]}}}]},
            "profiles[0].plugins.score.enabled[0].name: unknown plugin 'Spread'",
            id="unknown plugin",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "x", "pluginsConfig": []}]},
            "profiles[0].pluginsConfig: unknown field",
            id="misspelt profile field",
        ),
        pytest.param(
            {"podMaxBackoffSeconds": 20}, "podMaxBackoffSeconds: not supported by rl-scheduler", id="backoff"
        ),
    ],
)
def test_a_kube_scheduler_configuration_with_an_unknown_field_is_refused_naming_it(
    dev_cluster: Any, tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump({**KUBE_CONFIGURATION, **change}))
    command = [sys.executable, "-m", "scheduler.cli", "run", "--config", str(path)]
    command += ["--kubeconfig", str(dev_cluster.kubeconfig)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert message in result.stderr + result.stdout, result.stderr
