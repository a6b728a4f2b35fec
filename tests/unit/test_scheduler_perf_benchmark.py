"""The scheduler_perf benchmark's pure parts: how a kube test case is sized for N nodes,
and the independent check of hard constraints on what the API server returns."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from scheduler_perf_checks import broken_constraints
from scheduler_perf_plan import sized_params

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

CASE = {
    "workloads": [
        {"name": "5Nodes", "params": {"initNodes": 5, "initPods": 1, "measurePods": 4}},
        {"name": "500Nodes", "params": {"initNodes": 500, "initPods": 100, "measurePods": 400}},
        {"name": "1000Nodes", "params": {"initNodes": 1000, "initPods": 4000, "measurePods": 1000}},
    ]
}
SPLIT_NODES = {
    "workloads": [{"name": "500Nodes", "params": {"normalNodes": 400, "taintNodes": 100, "measurePods": 400}}]
}


@pytest.mark.parametrize(
    ("case", "nodes", "expected"),
    [
        pytest.param(
            CASE, 500, ("500Nodes", {"initNodes": 500, "initPods": 100, "measurePods": 400}), id="exact"
        ),
        pytest.param(
            CASE,
            1000,
            ("1000Nodes", {"initNodes": 1000, "initPods": 4000, "measurePods": 1000}),
            id="kube's own 1000",
        ),
        # 2000/500 = 4: nodes and init pods x4, measured pods kept
        pytest.param(
            CASE, 2000, ("500Nodes", {"initNodes": 2000, "initPods": 400, "measurePods": 400}), id="scaled"
        ),
        pytest.param(
            SPLIT_NODES,
            1000,
            ("500Nodes", {"normalNodes": 800, "taintNodes": 200, "measurePods": 400}),
            id="every node count scaled",
        ),
        pytest.param(
            {"workloads": [{"name": "5Nodes", "params": {}}]},
            500,
            "no 500Nodes or 500Nodes workload",
            id="too small only",
        ),
    ],
)
def test_sized_params(case: dict[str, Any], nodes: int, expected: Any) -> None:
    assert sized_params(case, nodes) == expected


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {HOST: name, **labels}}}


def pod(name: str, on: str | None, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "sched-1", "labels": labels or {}},
        "spec": {"nodeName": on, **spec},
    }


def anti(key: str = HOST) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def affinity(key: str = ZONE) -> dict[str, Any]:
    term = {
        "labelSelector": {"matchLabels": {"color": "blue"}},
        "topologyKey": key,
        "namespaces": ["sched-1"],
    }
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


GREEN, BLUE = {"color": "green"}, {"color": "blue"}
NODES = [node("n1", **{ZONE: "a"}), node("n2", **{ZONE: "a"}), node("n3", **{ZONE: "b"})]


@pytest.mark.parametrize(
    ("pods", "broken"),
    [
        pytest.param(
            [pod("p1", "n1", GREEN, affinity=anti()), pod("p2", "n2", GREEN, affinity=anti())],
            0,
            id="anti-affinity kept",
        ),
        # each of the two sees the other on n1
        pytest.param(
            [pod("p1", "n1", GREEN, affinity=anti()), pod("p2", "n1", GREEN, affinity=anti())],
            2,
            id="anti-affinity broken",
        ),
        # the plain pod has no term; p1's term sees it
        pytest.param(
            [pod("p1", "n1", GREEN, affinity=anti()), pod("p2", "n1", GREEN)],
            1,
            id="existing pod's anti-affinity",
        ),
        pytest.param(
            [pod("p1", "n1", GREEN, affinity=anti()), pod("p2", None, GREEN, affinity=anti())],
            0,
            id="pending pods do not count",
        ),
        pytest.param(
            [pod("p1", "n1", BLUE, affinity=affinity()), pod("p2", "n2", BLUE, affinity=affinity())],
            0,
            id="affinity in the same zone",
        ),
        pytest.param(
            [pod("p1", "n1", BLUE, affinity=affinity()), pod("p2", "n3", BLUE, affinity=affinity())],
            2,
            id="affinity across zones",
        ),
        pytest.param([pod("p1", "n3", BLUE, affinity=affinity())], 0, id="first of its group"),
        pytest.param([pod("p1", "n1", BLUE, nodeSelector={ZONE: "b"})], 1, id="node selector broken"),
        pytest.param(
            [
                pod(
                    f"p{i}",
                    n,
                    BLUE,
                    topologySpreadConstraints=[
                        {
                            "maxSkew": 1,
                            "topologyKey": ZONE,
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": BLUE},
                        }
                    ],
                )
                for i, n in enumerate(["n1", "n2", "n3"])
            ],
            0,
            id="spread: a 2, b 1",
        ),
        pytest.param(
            [
                pod(
                    f"p{i}",
                    n,
                    BLUE,
                    topologySpreadConstraints=[
                        {
                            "maxSkew": 1,
                            "topologyKey": ZONE,
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": BLUE},
                        }
                    ],
                )
                for i, n in enumerate(["n1", "n2", "n1"])
            ],
            3,
            id="spread: a 3, b 0",
        ),
    ],
)
def test_broken_constraints(pods: list[dict[str, Any]], broken: int) -> None:
    assert len(broken_constraints(pods, NODES, {})) == broken


SPREAD = {
    "maxSkew": 1,
    "topologyKey": ZONE,
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": BLUE},
}


def spreading(name: str, on: str) -> dict[str, Any]:
    return pod(name, on, BLUE, topologySpreadConstraints=[SPREAD])


@pytest.mark.parametrize(
    ("pods", "counts_only_grew", "broken"),
    [
        pytest.param(
            [spreading("p1", "n1"), spreading("p2", "n2"), spreading("p3", "n1")],
            True,
            3,
            id="a 3, b 0, all spreading: broken",
        ),
        # kube's EventHandlingPodAdd: unconstrained blue pods fill zone a, the spreading
        # pod went to b when a held one more than b
        pytest.param(
            [pod("u1", "n1", BLUE), pod("u2", "n2", BLUE), pod("u3", "n1", BLUE), spreading("p1", "n3")],
            True,
            0,
            id="a 3 without the constraint, b 1 spreading: a may exceed",
        ),
        pytest.param(
            [pod("u1", "n3", BLUE), spreading("p1", "n1"), spreading("p2", "n2"), spreading("p3", "n1")],
            True,
            3,
            id="a 3 spreading over b 1 without it: broken",
        ),
        # pods deleted or nodes added after placement: the final skew says nothing
        pytest.param(
            [spreading("p1", "n1"), spreading("p2", "n2"), spreading("p3", "n1")],
            False,
            0,
            id="counts fell: skew not checked",
        ),
    ],
)
def test_spread_checked_where_the_final_state_shows_it(
    pods: list[dict[str, Any]], counts_only_grew: bool, broken: int
) -> None:
    assert len(broken_constraints(pods, NODES, {}, counts_only_grew)) == broken
