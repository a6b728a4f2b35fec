"""Which plugins rejected an unschedulable pod (kube's ``UnschedulablePlugins``, the
``plugin`` label of ``scheduler_unschedulable_pods``): the filters' plugin names, not
their reasons, with and without nominated pods. Each row: the nodes, the pod, the pods
nominated, the plugins."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.framework.profile import schedule_pod
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from tests.builders import make_node, make_pod, make_state

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def two_nodes() -> list[Any]:
    """n1: 4 cores, zone a; n2: 4 cores, zone b, tainted."""
    return [
        make_node("n1", cpu="4", labels={"zone": "a"}),
        make_node("n2", cpu="4", labels={"zone": "b"}, taints=[TAINT]),
    ]


@pytest.mark.parametrize(
    ("pod", "nominated", "plugins", "scheduled"),
    [
        pytest.param(
            make_pod("p", cpu="8"), [], {"NodeResourcesFit", "TaintToleration"}, False, id="too big, taint"
        ),
        pytest.param(
            make_pod("p", cpu="1", node_selector={"zone": "c"}, tolerations=[{**TAINT, "operator": "Equal"}]),
            [],
            {"NodeAffinity"},
            False,
            id="tolerates the taint, no node in its zone",
        ),
        pytest.param(
            make_pod("p", cpu="1", node_selector={"zone": "b"}),
            [],
            {"NodeAffinity", "TaintToleration"},
            False,
            id="its zone tainted, the other not its zone",
        ),
        # a pod of higher priority holds n1's room; n2 is tainted
        pytest.param(
            make_pod("p", cpu="2", priority=0),
            [make_pod("held", cpu="3", priority=10, nominated_node_name="n1")],
            {"NodeResourcesFit", "TaintToleration"},
            False,
            id="room held by a nominated pod",
        ),
        # n2 still rejected it: the set is read only when no node passes
        pytest.param(make_pod("p", cpu="1"), [], {"TaintToleration"}, True, id="fits on n1"),
    ],
)
def test_plugins_that_rejected_the_pod(
    pod: Pod, nominated: list[Pod], plugins: set[str], scheduled: bool
) -> None:
    state = make_state(two_nodes())
    profile = build_profile("default", ProfileContext())
    decision = schedule_pod(state, pod, profile, np.random.default_rng(0), nominated=nominated)
    assert decision.plugins == plugins
    assert decision.scheduled is scheduled
