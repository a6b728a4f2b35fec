"""Preferences are scored as kube-scheduler scores them: kube-scheduler (built from
source, running in the dev cluster) binds the pod of each scenario, and the node it chose
must be among the nodes that our ``default`` profile ranks highest on the same cluster.

Every scenario is built so that the preference decides: the highest-ranked nodes are
fewer than the feasible ones (resource scores alone would choose differently or not at
all), so a wrong preference score fails the check."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from kubernetes import client

from devcluster import nodes as devnodes
from scheduler.framework.plugin import CycleContext
from scheduler.framework.profile import run_filters, total_scores
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.profiles import build_profile
from scheduler.state.cluster_state import ClusterState
from tests.e2e.support import api_dicts, replace_nodes, scratch_namespace, wait_for
from tests.e2e.workloads import pod

pytestmark = pytest.mark.cluster
KUBE_SCHEDULER = "default-scheduler"
HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
# Six equal nodes, zones a, b, c, a, b, c.
NODES = [f"parity-{i}" for i in range(6)]


def term(app: str, key: str) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}


def weighted(app: str, key: str, weight: int = 100) -> list[dict[str, Any]]:
    return [{"weight": weight, "podAffinityTerm": term(app, key)}]


Placed = list[tuple[str, dict[str, str], dict[str, Any] | None, str]]  # name, labels, spec extra, node
FILLERS: Placed = [(f"filler-{i}", {}, None, NODES[i]) for i in range(6)]

SCENARIOS = [
    pytest.param(
        [("db", {"app": "db"}, None, NODES[0])],
        {
            "affinity": {
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": weighted("db", ZONE)}
            }
        },
        {NODES[0], NODES[3]},
        id="preferred affinity: db's zone",
    ),
    pytest.param(
        [(f"web-{i}", {"app": "web"}, None, NODES[i]) for i in range(4)],
        {
            "affinity": {
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": weighted("web", HOST)}
            }
        },
        {NODES[4], NODES[5]},
        id="preferred anti-affinity: a node without a web pod",
    ),
    pytest.param(
        [("web-0", {"app": "web"}, None, NODES[0]), ("web-1", {"app": "web"}, None, NODES[1])],
        {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ]
        },
        {NODES[2], NODES[5]},
        id="soft zone spread: the zone without web pods",
    ),
    pytest.param(
        [
            *FILLERS[1:],
            (
                "loner",
                {},
                {
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": weighted("web", HOST)
                        }
                    }
                },
                NODES[0],
            ),
        ],
        None,
        set(NODES[1:]),
        id="a placed pod's preferred anti-affinity keeps web pods off its node",
    ),
    pytest.param(
        [
            *(f for f in FILLERS if f[3] != NODES[2]),
            (
                "clingy",
                {},
                {
                    "affinity": {
                        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web", ZONE)]}
                    }
                },
                NODES[2],
            ),
        ],
        None,
        {NODES[2], NODES[5]},
        id="a placed pod's required affinity draws web pods to its zone",
    ),
]


@pytest.fixture(scope="module")
def core(dev_cluster: Any) -> client.CoreV1Api:
    api = dev_cluster.core_v1()
    topology = devnodes.Topology(zones=3, racks_per_zone=1)
    size = devnodes.NODE_TYPES["cpu-small"]
    replace_nodes(api, [devnodes.NodeSpec(name, size, *topology.place(i)) for i, name in enumerate(NODES)])
    return api


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_namespace(core, "parity", request.node.nodeid) as name:
        yield name


def our_best_nodes(core: client.CoreV1Api, incoming: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(feasible nodes, those our default profile scores highest) for ``incoming`` on the
    cluster as the API shows it, the incoming pod left out."""
    state = ClusterState(node_from_manifest(n) for n in api_dicts(core, core.list_node().items))
    for item in api_dicts(core, core.list_pod_for_all_namespaces().items):
        node = item["spec"].get("nodeName")
        if node and item["metadata"]["uid"] != incoming["metadata"]["uid"] and node in state.node_index:
            state.place(pod_from_manifest(item), node, ())
    namespaces = {n.metadata.name: dict(n.metadata.labels or {}) for n in core.list_namespace().items}
    profile = build_profile("default")
    ctx = CycleContext(state, pod_from_manifest(incoming), namespaces)
    feasible = run_filters(ctx, profile.filters).feasible
    totals = total_scores(ctx, profile.scores, feasible)
    names = [state.nodes[int(i)].name for i in feasible]
    return set(names), {names[int(i)] for i in np.flatnonzero(totals == totals.max())}


@pytest.mark.parametrize(("placed", "extra", "expected"), SCENARIOS)
def test_kube_scheduler_chooses_among_our_best_nodes(
    core: client.CoreV1Api, namespace: str, placed: Placed, extra: dict[str, Any] | None, expected: set[str]
) -> None:
    for name, labels, spec, node in placed:
        manifest = pod(
            name, namespace, KUBE_SCHEDULER, labels=labels, extra={**(spec or {}), "nodeName": node}
        )
        core.create_namespaced_pod(namespace, manifest)
    wait_for(
        lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
        60,
        "the placed pods to run",
    )
    time.sleep(1.0)  # kube-scheduler's informers have them by now (they take milliseconds)
    core.create_namespaced_pod(
        namespace, pod("incoming", namespace, KUBE_SCHEDULER, labels={"app": "web"}, extra=extra)
    )
    wait_for(
        lambda: bool(core.read_namespaced_pod("incoming", namespace).spec.node_name),
        60,
        "kube-scheduler to bind",
    )
    incoming = core.api_client.sanitize_for_serialization(core.read_namespaced_pod("incoming", namespace))
    chosen = incoming["spec"]["nodeName"]
    incoming["spec"].pop("nodeName")
    feasible, best = our_best_nodes(core, incoming)
    assert best == expected
    assert best < feasible, "the scenario must not leave the choice to chance"
    assert chosen in best, f"kube-scheduler chose {chosen}, we rank {sorted(best)} highest"
