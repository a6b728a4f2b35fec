"""kube's queueing hints for a pod landing on a node or changing its labels there: which
unschedulable pods it may help (``hints.helped``), and a pod deleted from its node
(``hints.deletion_helped``)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.k8s.scheduling.hints import (
    AFFINITY_REASONS,
    SPREAD_REASONS,
    deletion_helped,
    helped,
    node_change_helped,
    volume_change_helped,
)
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.filters.inter_pod_affinity import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
)
from scheduler.plugins.filters.node_affinity import REASON as NODE_AFFINITY
from scheduler.plugins.filters.node_name import REASON as NODE_NAME
from scheduler.plugins.filters.node_ports import REASON as PORTS
from scheduler.plugins.filters.node_resources_fit import TOO_MANY_PODS, insufficient
from scheduler.plugins.filters.node_unschedulable import REASON as CORDON
from scheduler.plugins.filters.node_volume_limits import REASON as VOLUME_LIMITS
from scheduler.plugins.filters.pod_topology_spread import REASON_SKEW
from scheduler.plugins.filters.taint_toleration import REASON as TAINT
from scheduler.plugins.filters.volume_restrictions import DISK_CONFLICT as DISK
from scheduler.plugins.filters.volume_restrictions import READ_WRITE_ONCE_POD_CONFLICT as RWOP
from scheduler.plugins.filters.volume_zone import REASON as VOLUME_ZONE
from tests.builders import make_node, make_pod, pod_manifest

HOST = "kubernetes.io/hostname"


def term(labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": HOST, **extra}


AFFINE = make_pod(
    "affine",
    namespace="web",
    affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "db"})]}},
)
AFFINE_ELSEWHERE = make_pod(
    "affine-ns",
    namespace="web",
    affinity={
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "db"}, namespaces=["data"])]
        }
    },
)
AFFINE_BY_SELECTOR = make_pod(
    "affine-sel",
    namespace="web",
    affinity={
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "db"}, namespaceSelector={})]
        }
    },
)
ANTI = make_pod(
    "anti",
    namespace="web",
    affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "db"})]}},
)
SPREAD = make_pod(
    "spread",
    namespace="web",
    topology_spread=[
        {
            "maxSkew": 1,
            "topologyKey": HOST,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ],
)


def pod(namespace: str, **labels: str) -> Any:
    return make_pod("other", namespace=namespace, labels=labels, node_name="n1")


@pytest.mark.parametrize(
    ("pending", "reasons", "before", "after", "expected"),
    [
        pytest.param(
            AFFINE, AFFINITY_REASONS, None, pod("web", app="db"), True, id="affinity: its pod lands"
        ),
        pytest.param(
            AFFINE, AFFINITY_REASONS, None, pod("web", app="cache"), False, id="affinity: another pod"
        ),
        pytest.param(
            AFFINE, AFFINITY_REASONS, None, pod("data", app="db"), False, id="affinity: another namespace"
        ),
        pytest.param(
            AFFINE_ELSEWHERE,
            AFFINITY_REASONS,
            None,
            pod("data", app="db"),
            True,
            id="affinity: a named namespace",
        ),
        pytest.param(
            AFFINE_BY_SELECTOR,
            AFFINITY_REASONS,
            None,
            pod("any", app="db"),
            True,
            id="affinity: a namespace selector",
        ),
        pytest.param(
            AFFINE,
            frozenset({REASON_SKEW}),
            None,
            pod("web", app="db"),
            False,
            id="rejected for something else",
        ),
        pytest.param(AFFINE, None, None, pod("web", app="db"), True, id="being tried: any reason"),
        pytest.param(
            AFFINE,
            AFFINITY_REASONS,
            pod("web", app="cache"),
            pod("web", app="db"),
            True,
            id="affinity: relabelled to match",
        ),
        pytest.param(
            ANTI, frozenset({REASON_ANTI_AFFINITY}), None, pod("web", app="db"), False, id="anti: a pod lands"
        ),
        pytest.param(
            ANTI,
            frozenset({REASON_ANTI_AFFINITY}),
            pod("web", app="db"),
            pod("web", app="x"),
            True,
            id="anti: relabelled away",
        ),
        pytest.param(
            ANTI,
            frozenset({REASON_AFFINITY}),
            pod("web", app="db"),
            pod("web", app="db", tier="1"),
            False,
            id="anti: still matching",
        ),
        pytest.param(
            SPREAD, SPREAD_REASONS, None, pod("web", app="web"), True, id="spread: a matching pod lands"
        ),
        pytest.param(
            SPREAD, SPREAD_REASONS, None, pod("web", app="db"), False, id="spread: another pod lands"
        ),
        pytest.param(
            SPREAD, SPREAD_REASONS, None, pod("data", app="web"), False, id="spread: another namespace"
        ),
        pytest.param(
            SPREAD,
            SPREAD_REASONS,
            pod("web", app="web"),
            pod("web", app="x"),
            True,
            id="spread: relabelled away",
        ),
        pytest.param(
            SPREAD,
            SPREAD_REASONS,
            pod("web", app="web"),
            pod("web", app="web"),
            False,
            id="spread: labels unchanged",
        ),
    ],
)
def test_which_pending_pods_a_placed_pod_may_help(
    pending: Any, reasons: frozenset[str] | None, before: Any, after: Any, expected: bool
) -> None:
    assert helped(pending, reasons, before, after) is expected


PORTED = make_pod("ported", namespace="web", host_ports=[8080])
PORT_HOLDER = make_pod("holder", namespace="web", host_ports=[8080], node_name="n1")
OTHER_PORT = make_pod("other-port", namespace="web", host_ports=[9090], node_name="n1")
EXCLUSIVE = make_pod(
    "exclusive",
    namespace="web",
    labels={"app": "db"},
    node_name="n1",
    affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "web"})]}},
)
WEB = make_pod("web-1", namespace="web", labels={"app": "web"})


def with_claims(name: str, namespace: str, *claims: str, disk: str = "") -> Pod:
    """A pod with ``persistentVolumeClaim`` volumes of these claims, and an AWS EBS disk."""
    manifest = pod_manifest(name, namespace=namespace)
    volumes: list[dict[str, Any]] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}} for i, claim in enumerate(claims)
    ]
    if disk:
        volumes.append({"name": "disk", "awsElasticBlockStore": {"volumeID": disk}})
    return pod_from_manifest({**manifest, "spec": {**manifest["spec"], "volumes": volumes}})


DATA_USER = with_claims("p", "web", "data")
DATA_HOLDER = with_claims("holder", "web", "logs", "data")
LOGS_HOLDER = with_claims("other", "web", "logs")
NAMESAKE = with_claims("namesake", "batch", "data")
DISK_USER = with_claims("p", "web", disk="vol-1")
DISK_MOUNTER = with_claims("mounter", "web", disk="vol-1")
OTHER_MOUNTER = with_claims("mounter", "web", disk="vol-2")


@pytest.mark.parametrize(
    ("pending", "reasons", "deleted", "expected"),
    [
        pytest.param(
            WEB, frozenset({"Insufficient cpu"}), pod("web", app="x"), True, id="room: any deletion"
        ),
        pytest.param(WEB, frozenset({TAINT}), pod("web", app="x"), False, id="a taint: no deletion lifts it"),
        pytest.param(
            WEB, frozenset({TAINT, "Insufficient memory"}), pod("web"), True, id="one node short of room"
        ),
        pytest.param(AFFINE, frozenset({REASON_AFFINITY}), pod("web", app="db"), False, id="affinity: not"),
        pytest.param(PORTED, frozenset({PORTS}), PORT_HOLDER, True, id="ports: the holder leaves"),
        pytest.param(PORTED, frozenset({PORTS}), OTHER_PORT, False, id="ports: another port leaves"),
        pytest.param(
            ANTI, frozenset({REASON_ANTI_AFFINITY}), pod("web", app="db"), True, id="anti: its match"
        ),
        pytest.param(ANTI, frozenset({REASON_ANTI_AFFINITY}), pod("web", app="x"), False, id="anti: another"),
        pytest.param(
            WEB, frozenset({REASON_EXISTING_ANTI_AFFINITY}), EXCLUSIVE, True, id="existing anti: the excluder"
        ),
        pytest.param(SPREAD, SPREAD_REASONS, pod("web", app="web"), True, id="spread: a counted pod"),
        pytest.param(SPREAD, SPREAD_REASONS, pod("web", app="db"), False, id="spread: another pod"),
        pytest.param(DATA_USER, frozenset({RWOP}), DATA_HOLDER, True, id="ReadWriteOncePod: its holder"),
        pytest.param(DATA_USER, frozenset({RWOP}), LOGS_HOLDER, False, id="ReadWriteOncePod: another claim"),
        pytest.param(DATA_USER, frozenset({RWOP}), NAMESAKE, False, id="ReadWriteOncePod: another namespace"),
        pytest.param(DISK_USER, frozenset({DISK}), DISK_MOUNTER, True, id="disk: its mounter leaves"),
        pytest.param(DISK_USER, frozenset({DISK}), OTHER_MOUNTER, False, id="disk: another disk's mounter"),
        pytest.param(WEB, frozenset({"a reason no hint knows"}), pod("web"), True, id="unknown: moved"),
        pytest.param(WEB, None, pod("web"), True, id="being tried"),
    ],
)
def test_which_pending_pods_a_deletion_may_help(
    pending: Any, reasons: frozenset[str] | None, deleted: Any, expected: bool
) -> None:
    assert deletion_helped(pending, reasons, deleted) is expected


ZONE = "topology.kubernetes.io/zone"
GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
PLAIN = make_node("n", cpu="4", pods=10, labels={ZONE: "a"})
CORDONED = make_node("n", cpu="4", pods=10, labels={ZONE: "a"}, unschedulable=True)
TAINTED = make_node("n", cpu="4", pods=10, labels={ZONE: "a"}, taints=[GPU_TAINT])
BIGGER = make_node("n", cpu="8", pods=10, labels={ZONE: "a"})
MORE_PODS = make_node("n", cpu="4", pods=20, labels={ZONE: "a"})
ZONE_B = make_node("n", cpu="4", pods=10, labels={ZONE: "b"})
BIGGER_IN_B = make_node("n", cpu="8", pods=10, labels={ZONE: "b"})
BIGGER_TAINTED = make_node("n", cpu="8", pods=10, labels={ZONE: "a"}, taints=[GPU_TAINT])
BIGGER_CORDONED = make_node("n", cpu="8", pods=10, labels={ZONE: "a"}, unschedulable=True)
IN_B = make_pod("in-b", node_selector={ZONE: "b"})
TOLERANT = make_pod("tolerant", tolerations=[{**GPU_TAINT, "operator": "Equal"}])
ON_N = make_pod("on-n", node_name="n")
ON_M = make_pod("on-m", node_name="m")
SIX_CPUS = make_pod("six-cpus", cpu="6")
TWELVE_CPUS = make_pod("twelve-cpus", cpu="12")


@pytest.mark.parametrize(
    ("pending", "reasons", "before", "after", "helps"),
    [
        pytest.param(IN_B, {NODE_AFFINITY}, PLAIN, ZONE_B, True, id="node now in the pod's zone"),
        pytest.param(IN_B, {NODE_AFFINITY}, None, ZONE_B, True, id="new node in the pod's zone"),
        pytest.param(IN_B, {NODE_AFFINITY}, None, PLAIN, False, id="new node not in the pod's zone"),
        pytest.param(IN_B, {NODE_AFFINITY}, ZONE_B, BIGGER_IN_B, False, id="in the pod's zone all along"),
        pytest.param(TOLERANT, {TAINT}, None, TAINTED, True, id="new node with taints the pod tolerates"),
        pytest.param(IN_B, {TAINT}, None, TAINTED, False, id="new node with taints the pod does not"),
        pytest.param(TOLERANT, {TAINT}, PLAIN, TAINTED, False, id="tolerated before and after a new taint"),
        pytest.param(TOLERANT, {TAINT}, TAINTED, BIGGER_TAINTED, False, id="tolerated all along"),
        pytest.param(IN_B, {TAINT}, PLAIN, TAINTED, False, id="tainted with what the pod does not tolerate"),
        pytest.param(IN_B, {TAINT}, TAINTED, PLAIN, True, id="taint removed"),
        pytest.param(IN_B, {CORDON}, CORDONED, PLAIN, True, id="uncordoned"),
        pytest.param(IN_B, {CORDON}, None, PLAIN, True, id="new schedulable node"),
        pytest.param(IN_B, {CORDON}, None, CORDONED, False, id="new cordoned node"),
        pytest.param(IN_B, {CORDON}, PLAIN, CORDONED, False, id="cordoned"),
        pytest.param(IN_B, {CORDON}, PLAIN, BIGGER, False, id="schedulable all along"),
        pytest.param(IN_B, {CORDON}, CORDONED, BIGGER_CORDONED, False, id="cordoned all along"),
        pytest.param(ON_N, {NODE_NAME}, None, PLAIN, True, id="the node the pod names, added"),
        pytest.param(ON_N, {NODE_NAME}, PLAIN, BIGGER, False, id="the node the pod names, changed"),
        pytest.param(ON_M, {NODE_NAME}, None, PLAIN, False, id="another node added"),
        pytest.param(IN_B, {insufficient("cpu")}, PLAIN, BIGGER, True, id="more cpu"),
        pytest.param(SIX_CPUS, {insufficient("cpu")}, PLAIN, BIGGER, True, id="more cpu, now enough"),
        pytest.param(TWELVE_CPUS, {insufficient("cpu")}, PLAIN, BIGGER, False, id="more cpu, too little"),
        pytest.param(TWELVE_CPUS, {insufficient("cpu")}, None, BIGGER, False, id="a new node too small"),
        pytest.param(IN_B, {insufficient("cpu")}, PLAIN, MORE_PODS, False, id="more pods, not more cpu"),
        pytest.param(IN_B, {insufficient("cpu")}, None, PLAIN, True, id="a new node has room"),
        pytest.param(IN_B, {TOO_MANY_PODS}, PLAIN, MORE_PODS, True, id="more pods allowed"),
        pytest.param(IN_B, {TOO_MANY_PODS}, PLAIN, BIGGER, False, id="more cpu, not more pods"),
        pytest.param(SPREAD, {REASON_SKEW}, PLAIN, ZONE_B, True, id="labels changed: spreading"),
        pytest.param(SPREAD, {REASON_SKEW}, PLAIN, BIGGER, False, id="labels unchanged: spreading"),
        pytest.param(
            ANTI, {REASON_ANTI_AFFINITY}, PLAIN, BIGGER, False, id="labels unchanged: anti-affinity"
        ),
        pytest.param(IN_B, {NODE_AFFINITY, insufficient("cpu")}, PLAIN, BIGGER, True, id="any reason lifted"),
        pytest.param(IN_B, {PORTS}, PLAIN, BIGGER, True, id="a reason without a node hint"),
        pytest.param(IN_B, None, PLAIN, CORDONED, True, id="not known yet"),
    ],
)
def test_node_change_helped(
    pending: Pod, reasons: set[str] | None, before: Node | None, after: Node, helps: bool
) -> None:
    assert (
        node_change_helped(pending, None if reasons is None else frozenset(reasons), before, after) is helps
    )


@pytest.mark.parametrize(
    ("pending", "reasons", "claim", "helps"),
    [
        pytest.param(WEB, {insufficient("cpu")}, None, False, id="room"),
        pytest.param(WEB, {TOO_MANY_PODS, PORTS}, None, False, id="pods, ports"),
        pytest.param(
            WEB, {TAINT, NODE_AFFINITY, CORDON, NODE_NAME}, None, False, id="taints, affinity, cordon, name"
        ),
        pytest.param(WEB, SPREAD_REASONS | AFFINITY_REASONS, None, False, id="spreading, inter-pod affinity"),
        pytest.param(DATA_USER, {RWOP}, None, False, id="a ReadWriteOncePod conflict: a volume or class"),
        pytest.param(DISK_USER, {DISK}, None, False, id="a disk conflict: a volume or class"),
        pytest.param(DATA_USER, {RWOP}, "web/data", True, id="a ReadWriteOncePod conflict: its claim"),
        pytest.param(WEB, {VOLUME_ZONE}, None, True, id="volume zone"),
        pytest.param(WEB, {insufficient("cpu"), VOLUME_LIMITS}, None, True, id="one volume reason"),
        pytest.param(WEB, {"PreFilter"}, None, True, id="a PreFilter rejection"),
        pytest.param(WEB, None, None, True, id="not known yet"),
        pytest.param(DATA_USER, {VOLUME_ZONE}, "web/data", True, id="its claim"),
        pytest.param(DATA_USER, {VOLUME_ZONE}, "web/logs", False, id="another claim"),
        pytest.param(DATA_USER, {VOLUME_ZONE}, "batch/data", False, id="a namesake in another namespace"),
        pytest.param(DATA_USER, None, "web/logs", False, id="another claim, reasons not known yet"),
        pytest.param(DATA_USER, {insufficient("cpu")}, "web/data", False, id="its claim, room"),
    ],
)
def test_which_pending_pods_a_volume_change_may_help(
    pending: Pod, reasons: set[str] | None, claim: str | None, helps: bool
) -> None:
    why = None if reasons is None else frozenset(reasons)
    assert volume_change_helped(pending, why, claim) is helps
