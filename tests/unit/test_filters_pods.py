"""Table tests for the filters that look at other pods: PodTopologySpread and
InterPodAffinity. Each row: a pod, the nodes, the pods already on them, and per node the
reasons it is rejected for ("" = fits). Comments give kube's arithmetic."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.status import Code
from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.plugins.filters.inter_pod_affinity import InterPodAffinity
from scheduler.plugins.filters.pod_topology_spread import PodTopologySpread
from scheduler.state.cluster_state import ClusterState
from tests.builders import all_nodes, context, make_node, make_pod, make_state, verdicts

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

# kube-scheduler 1.36 wording and codes, pinned here rather than imported.
SKEW = "node(s) didn't match pod topology spread constraints"
LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
CODES = {
    SKEW: Code.UNSCHEDULABLE,
    LABEL: Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    AFF: Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    ANTI: Code.UNSCHEDULABLE,
    EXISTING: Code.UNSCHEDULABLE,
}

NamespaceLabels = Mapping[str, Mapping[str, str]]


def expect(**reasons: str) -> dict[str, tuple[str, ...]]:
    """``n1=""`` fits, ``n1=REASON`` rejected for that reason."""
    return {node: (r,) if r else () for node, r in reasons.items()}


def zone_node(name: str, zone: str | None, **labels: str) -> Node:
    return make_node(name, labels={**({ZONE: zone} if zone else {}), **labels})


def web(name: str, **kwargs: Any) -> Pod:
    labels = {"app": "web", **kwargs.pop("labels", {})}
    return make_pod(name, labels=labels, **kwargs)


_copies = itertools.count()


def many(pod: Pod, node: str, count: int) -> list[tuple[Pod, str]]:
    """``count`` copies of ``pod`` (namespace and labels) on ``node``."""
    return [
        (make_pod(f"{pod.name}-{next(_copies)}", namespace=pod.namespace, labels=pod.labels), node)
        for _ in range(count)
    ]


def spread(
    key: str = ZONE,
    max_skew: int = 1,
    selector: Mapping[str, str] | None = None,
    when: str = "DoNotSchedule",
    **extra: Any,
) -> dict[str, Any]:
    """A topology spread constraint; ``selector`` is ``matchLabels`` (default app=web)."""
    constraint: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if "labelSelector" not in extra:
        constraint["labelSelector"] = {"matchLabels": dict(selector or {"app": "web"})}
    return constraint


def term(key: str = ZONE, selector: Mapping[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A pod affinity term; ``selector`` is ``matchLabels`` (default app=db)."""
    out: dict[str, Any] = {"topologyKey": key, **extra}
    if "labelSelector" not in extra:
        out["labelSelector"] = {"matchLabels": dict(selector or {"app": "db"})}
    return out


def affinity(*terms: dict[str, Any], anti: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if terms:
        out["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}
    if anti:
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    return out


def run(
    plugin: Any,
    nodes: list[Node],
    placed: list[tuple[Pod, str]],
    pod: Pod,
    namespace_labels: NamespaceLabels | None = None,
) -> dict[str, tuple[str, ...]]:
    """``verdicts``, and every rejection carries kube's code for its reason."""
    state = make_state(nodes, placed)
    ctx = context(state, pod, namespace_labels)
    if plugin.pre_filter(ctx).code == Code.SUCCESS:
        for rejection in plugin.filter(ctx, all_nodes(state)):
            assert rejection.code == CODES[rejection.reason]
    return verdicts(plugin, state, pod, namespace_labels)


A1, A2, B1, C1 = (zone_node("a1", "a"), zone_node("a2", "a"), zone_node("b1", "b"), zone_node("c1", "c"))
X1 = zone_node("x1", None)  # no zone label
DB = make_pod("db", labels={"app": "db"})


SPREAD_CASES = [
    pytest.param(
        web("p", topology_spread=[spread()]),
        [A1, B1, C1],
        many(web("w"), "a1", 2) + many(web("w"), "b1", 1),
        # a=2, b=1, c=0, min 0: a 2+1-0=3 > 1, b 1+1-0=2 > 1, c 0+1-0=1
        expect(a1=SKEW, b1=SKEW, c1=""),
        id="zones: maxSkew 1, only the empty zone",
    ),
    pytest.param(
        web("p", topology_spread=[spread()]),
        [A1, A2, B1],
        many(web("w"), "a1", 1) + many(web("w"), "b1", 1),
        # a=1 (a1 1 + a2 0), b=1, min 1: 1+1-1 = 1 everywhere
        expect(a1="", a2="", b1=""),
        id="zones: balanced, counts summed per zone",
    ),
    pytest.param(
        web("p", topology_spread=[spread(HOST)]),
        [A1, A2, B1],
        many(web("w"), "a1", 1) + many(web("w"), "a2", 1),
        # per host a1=1, a2=1, b1=0, min 0: a1 1+1-0 = 2 > 1, b1 0+1-0 = 1
        expect(a1=SKEW, a2=SKEW, b1=""),
        id="hostname: maxSkew 1",
    ),
    pytest.param(
        web("p", topology_spread=[spread(HOST, max_skew=2)]),
        [A1, A2, B1],
        many(web("w"), "a1", 1) + many(web("w"), "a2", 1),
        # min 0: a1 1+1-0 = 2 <= 2
        expect(a1="", a2="", b1=""),
        id="hostname: maxSkew 2",
    ),
    pytest.param(
        web("p", topology_spread=[spread()]),
        [A1, B1],
        many(web("w"), "a1", 1) + many(web("w"), "b1", 1),
        # a=1, b=1, 2 domains >= minDomains 1: min 1, 1+1-1 = 1
        expect(a1="", b1=""),
        id="minDomains default 1",
    ),
    pytest.param(
        web("p", topology_spread=[spread(minDomains=3)]),
        [A1, B1],
        many(web("w"), "a1", 1) + many(web("w"), "b1", 1),
        # 2 domains < minDomains 3: min becomes 0, 1+1-0 = 2 > 1
        expect(a1=SKEW, b1=SKEW),
        id="minDomains 3 > 2 domains: global min 0",
    ),
    pytest.param(
        web("p", node_selector={"disk": "ssd"}, topology_spread=[spread()]),
        [zone_node("a1", "a", disk="ssd"), zone_node("b1", "b", disk="hdd")],
        many(web("w"), "a1", 1),
        # Honor: b1 fails the nodeSelector, zone b not counted: a=1, min 1,
        # a1 1+1-1 = 1; b1's zone has no count: 0+1-1 = 0 (NodeAffinity rejects it)
        expect(a1="", b1=""),
        id="nodeAffinityPolicy Honor (default)",
    ),
    pytest.param(
        web("p", node_selector={"disk": "ssd"}, topology_spread=[spread(nodeAffinityPolicy="Ignore")]),
        [zone_node("a1", "a", disk="ssd"), zone_node("b1", "b", disk="hdd")],
        many(web("w"), "a1", 1),
        # Ignore: a=1, b=0, min 0: a1 1+1-0 = 2 > 1
        expect(a1=SKEW, b1=""),
        id="nodeAffinityPolicy Ignore",
    ),
    pytest.param(
        web("p", topology_spread=[spread()]),
        [A1, make_node("b1", labels={ZONE: "b"}, taints=[{"key": "gpu", "effect": "NoSchedule"}])],
        many(web("w"), "a1", 1),
        # Ignore (default): a=1, b=0, min 0: a1 1+1-0 = 2 > 1
        expect(a1=SKEW, b1=""),
        id="nodeTaintsPolicy Ignore (default)",
    ),
    pytest.param(
        web("p", topology_spread=[spread(nodeTaintsPolicy="Honor")]),
        [A1, make_node("b1", labels={ZONE: "b"}, taints=[{"key": "gpu", "effect": "NoSchedule"}])],
        many(web("w"), "a1", 1),
        # Honor: tainted b1 not counted: a=1, min 1: a1 1+1-1 = 1
        expect(a1="", b1=""),
        id="nodeTaintsPolicy Honor drops untolerated nodes",
    ),
    pytest.param(
        web(
            "p",
            topology_spread=[spread(nodeTaintsPolicy="Honor")],
            tolerations=[{"key": "gpu", "operator": "Exists"}],
        ),
        [A1, make_node("b1", labels={ZONE: "b"}, taints=[{"key": "gpu", "effect": "NoSchedule"}])],
        many(web("w"), "a1", 1),
        # Honor, taint tolerated: b counted, a=1, b=0, min 0: a1 2 > 1
        expect(a1=SKEW, b1=""),
        id="nodeTaintsPolicy Honor keeps tolerated nodes",
    ),
    pytest.param(
        web("p", topology_spread=[spread(nodeTaintsPolicy="Honor")]),
        [A1, make_node("b1", labels={ZONE: "b"}, taints=[{"key": "soft", "effect": "PreferNoSchedule"}])],
        many(web("w"), "a1", 1),
        # PreferNoSchedule does not exclude: a=1, b=0, min 0: a1 2 > 1
        expect(a1=SKEW, b1=""),
        id="nodeTaintsPolicy Honor ignores PreferNoSchedule",
    ),
    pytest.param(
        web("p", topology_spread=[spread()]),
        [A1, B1, X1],
        many(web("w"), "a1", 1) + many(web("w"), "b1", 1) + many(web("w"), "x1", 5),
        # x1 lacks the zone key: rejected, and its 5 pods count nowhere
        expect(a1="", b1="", x1=LABEL),
        id="missing topology label",
    ),
    pytest.param(
        web("p", topology_spread=[spread(ZONE), spread(HOST)]),
        [A1, A2, X1],
        many(web("w"), "a1", 1) + many(web("w"), "a2", 1),
        # x1 lacks zone, so it is not counted for hostname either: hosts a1=1,
        # a2=1, min 1 (not 0): 1+1-1 = 1; zone a=2, min 2: 2+1-2 = 1
        expect(a1="", a2="", x1=LABEL),
        id="a node lacking any constraint's key is counted for none",
    ),
    pytest.param(
        web("p", topology_spread=[spread(ZONE), spread("rack")]),
        [zone_node("a1", "a", rack="r1"), zone_node("a2", "a"), zone_node("b1", "b", rack="r2")],
        many(web("w"), "a1", 2),
        # zone (counted a1, b1): a=2, b=0, min 0; a2 fails zone 2+1-0 = 3 > 1 before
        # its missing rack is seen; b1: zone 1, rack r2 0+1-0 = 1
        expect(a1=SKEW, a2=SKEW, b1=""),
        id="constraints checked in order",
    ),
    pytest.param(
        make_pod("p", labels={"app": "batch"}, topology_spread=[spread()]),
        [A1, B1],
        many(web("w"), "a1", 1),
        # selector app=web does not match the pod: selfMatch 0, a1 1+0-0 = 1
        expect(a1="", b1=""),
        id="selector not matching the pod: selfMatch 0",
    ),
    pytest.param(
        web("p", namespace="prod", topology_spread=[spread()]),
        [A1, B1],
        many(web("w", namespace="dev"), "a1", 2)
        + many(web("w", namespace="prod"), "a1", 1)
        + many(web("w", namespace="prod"), "b1", 1),
        # only prod pods count: a=1, b=1, min 1: 1+1-1 = 1 (with dev a=3: 3 > 1)
        expect(a1="", b1=""),
        id="other namespaces not counted",
    ),
    pytest.param(
        web("p", labels={"version": "v2"}, topology_spread=[spread(matchLabelKeys=["version"])]),
        [A1, B1],
        many(web("w", labels={"version": "v1"}), "a1", 3) + many(web("w", labels={"version": "v2"}), "a1", 1),
        # selector app=web AND version=v2: a=1, b=0, min 0: a1 1+1-0 = 2 > 1
        expect(a1=SKEW, b1=""),
        id="matchLabelKeys adds version=v2",
    ),
    pytest.param(
        web("p", labels={"version": "v2"}, topology_spread=[spread(max_skew=2, matchLabelKeys=["version"])]),
        [A1, B1],
        many(web("w", labels={"version": "v1"}), "a1", 3),
        # only v2 pods count: a=0, b=0: 0+1-0 = 1 <= 2 (v1 pods would give 4)
        expect(a1="", b1=""),
        id="matchLabelKeys: other versions not counted",
    ),
    pytest.param(
        web("p", topology_spread=[spread(matchLabelKeys=["absent"])]),
        [A1, B1],
        many(web("w"), "a1", 1),
        # the pod has no "absent" label: selector unchanged, a1 1+1-0 = 2 > 1
        expect(a1=SKEW, b1=""),
        id="matchLabelKeys: missing pod label ignored",
    ),
    pytest.param(
        web(
            "p",
            topology_spread=[spread(selector={"app": "web"}), spread(selector={"tier": "fe"})],
            labels={"tier": "fe"},
        ),
        [A1, B1],
        [(make_pod("w", labels={"app": "web"}), "a1"), (make_pod("f", labels={"tier": "fe"}), "b1")],
        # same key, counted per constraint: app a=1,b=0 -> a1 2 > 1;
        # tier a=0,b=1 -> b1 2 > 1 (summing per (key, value) would pass both)
        expect(a1=SKEW, b1=SKEW),
        id="two constraints on one key count separately",
    ),
    pytest.param(
        web("p", topology_spread=[spread(labelSelector={})]),
        [A1, B1],
        many(web("w"), "a1", 4),
        # empty selector: kube counts 0 on nodes but selfMatch 1: 0+1-0 = 1
        expect(a1="", b1=""),
        id="empty labelSelector counts no pods",
    ),
    pytest.param(
        web("p", topology_spread=[spread(labelSelector=None)]),
        [A1, B1],
        many(web("w"), "a1", 4),
        # no selector matches nothing: 0+0-0 = 0
        expect(a1="", b1=""),
        id="missing labelSelector matches nothing",
    ),
    pytest.param(
        web("p", topology_spread=[spread()]),
        [A1, B1],
        [(web(f"w{k}", deletion_timestamp="2026-01-01T00:00:00Z"), "a1") for k in range(4)],
        # pods being deleted are not counted (kube #87621): a=0, b=0
        expect(a1="", b1=""),
        id="pods being deleted are not counted",
    ),
    pytest.param(
        web("p", topology_spread=[spread(when="ScheduleAnyway")]),
        [A1, B1, X1],
        many(web("w"), "a1", 4),
        # soft constraints only score: PreFilter skips
        expect(a1="", b1="", x1=""),
        id="ScheduleAnyway never filters",
    ),
    pytest.param(
        web("p"),
        [A1, X1],
        many(web("w"), "a1", 4),
        # no constraints: system defaults are ScheduleAnyway, PreFilter skips
        expect(a1="", x1=""),
        id="no constraints: skipped",
    ),
    pytest.param(
        web("p", topology_spread=[spread()]),
        [X1, zone_node("x2", None)],
        [],
        # no node has the key: every node lacks it
        expect(x1=LABEL, x2=LABEL),
        id="no node has the topology key",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "placed", "expected"), SPREAD_CASES)
def test_pod_topology_spread(
    pod: Pod, nodes: list[Node], placed: list[tuple[Pod, str]], expected: dict[str, tuple[str, ...]]
) -> None:
    assert run(PodTopologySpread(), nodes, placed, pod) == expected


def db(name: str, namespace: str = "default", labels: Mapping[str, str] | None = None, **kwargs: Any) -> Pod:
    return make_pod(name, namespace=namespace, labels={"app": "db", **(labels or {})}, **kwargs)


def case(
    pod: Pod,
    nodes: list[Node],
    placed: list[tuple[Pod, str]],
    expected: dict[str, tuple[str, ...]],
    *,
    id: str,
    ns: NamespaceLabels | None = None,
) -> Any:
    """A row; ``ns`` is the namespaces' labels, for ``namespaceSelector``."""
    return pytest.param(pod, nodes, placed, ns or {}, expected, id=id)


AFFINITY_CASES = [
    case(
        web("p", affinity=affinity(term())),
        [A1, A2, B1],
        [(db("d"), "a1")],
        # db in zone a: (zone, a) count 1, (zone, b) 0
        expect(a1="", a2="", b1=AFF),
        id="affinity: same zone as a db pod",
    ),
    case(
        db("p", affinity=affinity(term())),
        [A1, B1, X1],
        [],
        # no pod matches anywhere and p matches its own term: any node with a zone
        expect(a1="", b1="", x1=AFF),
        id="affinity: first of a self-affine group",
    ),
    case(
        web("p", affinity=affinity(term())),
        [A1, B1],
        [],
        # no db anywhere and p (app=web) does not match its own term
        expect(a1=AFF, b1=AFF),
        id="affinity: no match anywhere, no self-match",
    ),
    case(
        db("p", affinity=affinity(term())),
        [A1, B1],
        [(db("d"), "a1")],
        # a db exists (zone a): the self-match escape no longer applies
        expect(a1="", b1=AFF),
        id="affinity: self-match ignored once a pod matches",
    ),
    case(
        web("p", affinity=affinity(term())),
        [A1, X1],
        [(db("d"), "a1")],
        # x1 has no zone: affinity needs every term's key on the node
        expect(a1="", x1=AFF),
        id="affinity: node missing the topology key",
    ),
    case(
        db("p", affinity=affinity(term())),
        [A1, B1, X1],
        [(db("d"), "x1")],
        # the only db is on a node without a zone: counts stay empty, so the
        # self-affine escape still applies on zoned nodes
        expect(a1="", b1="", x1=AFF),
        id="affinity: matches on unzoned nodes count nowhere",
    ),
    case(
        web("p", affinity=affinity(term(), term(HOST, {"tier": "cache"}))),
        [A1, A2, B1],
        [(db("d1", labels={"tier": "cache"}), "a1"), (db("d2"), "b1")],
        # only d1 matches both terms: (zone a) 1, (host a1) 1; a2 has host count 0
        expect(a1="", a2=AFF, b1=AFF),
        id="affinity: a pod must match all terms",
    ),
    case(
        web("p", affinity=affinity(anti=(term(HOST, {"app": "web"}),))),
        [A1, A2],
        [(web("w"), "a1")],
        # (host a1) has one web pod
        expect(a1=ANTI, a2=""),
        id="anti-affinity by hostname",
    ),
    case(
        web("p", affinity=affinity(anti=(term(ZONE, {"app": "web"}),))),
        [A1, A2, B1, X1],
        [(web("w"), "a1")],
        # (zone a) has one web pod; x1 lacks the key and passes that term
        expect(a1=ANTI, a2=ANTI, b1="", x1=""),
        id="anti-affinity by zone",
    ),
    case(
        web("p"),
        [A1, A2, B1],
        [(db("d", affinity=affinity(anti=(term(ZONE, {"app": "web"}),))), "a1")],
        # d's anti-affinity matches p: (zone a) count 1
        expect(a1=EXISTING, a2=EXISTING, b1=""),
        id="existing pod's anti-affinity",
    ),
    case(
        web("p"),
        [A1, B1],
        [(db("d", namespace="ops", affinity=affinity(anti=(term(ZONE, {"app": "web"}),))), "a1")],
        # d's term defaults to d's namespace (ops); p is in default
        expect(a1="", b1=""),
        id="existing anti-affinity: owner's namespace",
    ),
    case(
        web("p", affinity=affinity(term(), anti=(term(HOST, {"app": "web"}),))),
        [A1, A2, B1],
        [
            (db("d"), "a2"),
            (web("w"), "a1"),
            (
                make_pod("g", labels={"app": "guard"}, affinity=affinity(anti=(term(HOST, {"app": "web"}),))),
                "b1",
            ),
        ],
        # a1: zone a has db, web on a1 -> anti; a2: passes; b1: no db in zone b ->
        # affinity first (g's anti-affinity would also reject it)
        expect(a1=ANTI, a2="", b1=AFF),
        id="one reason per node, kube's order",
    ),
    case(
        web("p", affinity=affinity(term(namespaces=["data"]))),
        [A1, B1],
        [(db("d1", namespace="data"), "a1"), (db("d2"), "b1")],
        # term namespaces [data]: d2 in default does not count
        expect(a1="", b1=AFF),
        id="affinity: listed namespaces",
    ),
    case(
        web("p", namespace="prod", affinity=affinity(term())),
        [A1, B1],
        [(db("d"), "a1")],
        # no namespaces: the term means prod; the db is in default
        expect(a1=AFF, b1=AFF),
        id="affinity: default namespace is the pod's",
    ),
    case(
        web("p", affinity=affinity(term(namespaceSelector={"matchLabels": {"team": "data"}}))),
        [A1, B1],
        [(db("d1", namespace="ml"), "a1"), (db("d2"), "b1")],
        # namespaceSelector team=data picks ml, not default
        expect(a1="", b1=AFF),
        id="affinity: namespaceSelector",
        ns={"ml": {"team": "data"}, "default": {}},
    ),
    case(
        web("p", affinity=affinity(term(namespaceSelector={}))),
        [A1, B1, C1],
        [(db("d1", namespace="elsewhere"), "b1"), (db("d2", namespace="unlabelled"), "c1")],
        # empty namespaceSelector: every namespace, known or not
        expect(a1=AFF, b1="", c1=""),
        id="affinity: empty namespaceSelector = all",
        ns={"elsewhere": {"x": "y"}},
    ),
    case(
        web(
            "p",
            affinity=affinity(term(namespaces=["data"], namespaceSelector={"matchLabels": {"team": "ml"}})),
        ),
        [A1, B1, C1],
        [(db("d1", namespace="data"), "a1"), (db("d2", namespace="ml"), "b1"), (db("d3"), "c1")],
        # namespaces OR namespaceSelector: data and ml, not default
        expect(a1="", b1="", c1=AFF),
        id="affinity: namespaces plus namespaceSelector",
        ns={"ml": {"team": "ml"}},
    ),
    case(
        web("p", namespace="shop"),
        [A1, B1],
        [
            (
                db(
                    "d",
                    namespace="ops",
                    affinity=affinity(
                        anti=(term(ZONE, {"app": "web"}, namespaceSelector={"matchLabels": {"env": "prod"}}),)
                    ),
                ),
                "a1",
            )
        ],
        # d's term selects namespaces labelled env=prod: shop is one
        expect(a1=EXISTING, b1=""),
        id="existing anti-affinity: namespaceSelector",
        ns={"shop": {"env": "prod"}},
    ),
    case(
        web("p", namespace="shop"),
        [A1, B1],
        [
            (
                db(
                    "d",
                    namespace="ops",
                    affinity=affinity(
                        anti=(term(ZONE, {"app": "web"}, namespaceSelector={"matchLabels": {"env": "prod"}}),)
                    ),
                ),
                "a1",
            )
        ],
        # shop is env=dev: d's term does not reach p
        expect(a1="", b1=""),
        id="existing anti-affinity: namespaceSelector misses",
        ns={"shop": {"env": "dev"}},
    ),
    case(
        web(
            "p",
            labels={"version": "v2"},
            affinity=affinity(anti=(term(HOST, {"app": "web"}, matchLabelKeys=["version"]),)),
        ),
        [A1, A2],
        [(web("w1", labels={"version": "v1"}), "a1"), (web("w2", labels={"version": "v2"}), "a2")],
        # selector app=web AND version In (v2): only w2 counts
        expect(a1="", a2=ANTI),
        id="anti-affinity: matchLabelKeys",
    ),
    case(
        web(
            "p",
            labels={"tenant": "a"},
            affinity=affinity(
                anti=(
                    term(
                        HOST,
                        labelSelector={"matchExpressions": [{"key": "tenant", "operator": "Exists"}]},
                        mismatchLabelKeys=["tenant"],
                    ),
                )
            ),
        ),
        [A1, A2],
        [(web("w1", labels={"tenant": "a"}), "a1"), (web("w2", labels={"tenant": "b"}), "a2")],
        # tenant Exists AND tenant NotIn (a): only other tenants' pods repel
        expect(a1="", a2=ANTI),
        id="anti-affinity: mismatchLabelKeys",
    ),
    case(
        web("p"),
        [A1, A2],
        [
            (
                web(
                    "w",
                    labels={"version": "v1"},
                    affinity=affinity(anti=(term(HOST, {"app": "web"}, matchLabelKeys=["version"]),)),
                ),
                "a1",
            )
        ],
        # w's term merges w's own label: app=web AND version In (v1); p has none
        expect(a1="", a2=""),
        id="existing anti-affinity: owner's matchLabelKeys",
    ),
    case(
        web("p", affinity=affinity(anti=(term(HOST, labelSelector=None),))),
        [A1],
        [(web("w"), "a1")],
        # a term without labelSelector matches no pod
        expect(a1=""),
        id="anti-affinity: missing labelSelector matches nothing",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "placed", "namespace_labels", "expected"), AFFINITY_CASES)
def test_inter_pod_affinity(
    pod: Pod,
    nodes: list[Node],
    placed: list[tuple[Pod, str]],
    namespace_labels: NamespaceLabels,
    expected: dict[str, tuple[str, ...]],
) -> None:
    assert run(InterPodAffinity(), nodes, placed, pod, namespace_labels) == expected


def test_inter_pod_affinity_skips_when_nothing_applies() -> None:
    plugin = InterPodAffinity()
    repel = db("d", affinity=affinity(anti=(term(HOST, {"app": "other"}),)))
    state = make_state([A1, A2], [(repel, "a1"), (web("w"), "a2")])
    # No terms on p, and d's anti-affinity does not match p.
    assert plugin.pre_filter(context(state, web("p"))).code == Code.SKIP
    # d's anti-affinity matches an app=other pod, so the filter must run.
    other = make_pod("o", labels={"app": "other"})
    assert plugin.pre_filter(context(state, other)).code == Code.SUCCESS


def test_anti_affinity_pod_keys_follow_place_remove_and_node_removal() -> None:
    repel = db("d", affinity=affinity(anti=(term(HOST, {"app": "web"}),)))
    state = make_state([A1, A2], [(repel, "a1"), (web("w"), "a2")])
    assert state.anti_affinity_pod_keys == {"default/d"}
    state.remove("default/d")
    assert state.anti_affinity_pod_keys == set()
    state.place(repel, "a2")
    state.remove_node("a2")
    assert state.anti_affinity_pod_keys == set()


def test_label_domains_follow_label_changes() -> None:
    state = make_state([A1, B1, X1])
    before = state.label_domains(ZONE)
    assert list(before.ids) == [0, 1, -1]
    assert dict(before.index) == {"a": 0, "b": 1}
    state.update_node(zone_node("x1", "a"))
    assert list(state.label_domains(ZONE).ids) == [0, 1, 0]


# ---- properties ----------------------------------------------------------------------------

NODE = st.fixed_dictionaries(
    {
        "zone": st.sampled_from(["a", "b", "c", None]),
        "ssd": st.booleans(),
        "tainted": st.booleans(),
    }
)
PLACED = st.tuples(st.integers(0, 7), st.sampled_from(["web", "db"]), st.sampled_from(["default", "other"]))
CONSTRAINT = st.fixed_dictionaries(
    {
        "key": st.sampled_from([ZONE, HOST]),
        "max_skew": st.integers(1, 3),
        "min_domains": st.sampled_from([None, 1, 2, 4]),
        "app": st.sampled_from(["web", "db"]),
        "affinity_policy": st.sampled_from(["Honor", "Ignore"]),
        "taints_policy": st.sampled_from(["Honor", "Ignore"]),
    }
)


def build_cluster(nodes: list[dict[str, Any]], placed: list[tuple[int, str, str]]) -> ClusterState:
    built = [
        make_node(
            f"n{i}",
            labels={**({ZONE: n["zone"]} if n["zone"] else {}), "disk": "ssd" if n["ssd"] else "hdd"},
            taints=[{"key": "t", "effect": "NoSchedule"}] if n["tainted"] else [],
        )
        for i, n in enumerate(nodes)
    ]
    pods = [
        (make_pod(f"q{j}", namespace=ns, labels={"app": app}), f"n{i % len(nodes)}")
        for j, (i, app, ns) in enumerate(placed)
    ]
    return make_state(built, pods)


def reference_spread(state: ClusterState, pod: Pod) -> dict[str, tuple[str, ...]]:
    """kube's filtering.go, transcribed plainly: one node at a time, no arrays."""
    hard = [c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]
    counts: list[dict[str, int]] = [{} for _ in hard]
    for i, node in enumerate(state.nodes):
        if any(c.topology_key not in node.labels for c in hard):
            continue
        for k, c in enumerate(hard):
            wanted_disk = pod.node_selector.get("disk")
            honor = c.node_affinity_policy == "Honor"
            if honor and wanted_disk and node.labels["disk"] != wanted_disk:
                continue
            if c.node_taints_policy == "Honor" and node.taints:
                continue
            value = node.labels[c.topology_key]
            selector = c.label_selector
            assert selector is not None
            matched = sum(
                1
                for p in state.pods_on_node[i].values()
                if p.namespace == pod.namespace and selector.matches(p.labels)
            )
            counts[k][value] = counts[k].get(value, 0) + matched
    out: dict[str, tuple[str, ...]] = {}
    for node in state.nodes:
        reason: tuple[str, ...] = ()
        for k, c in enumerate(hard):
            if c.topology_key not in node.labels:
                reason = (LABEL,)
                break
            domains = counts[k]
            minimum = min(domains.values()) if len(domains) >= (c.min_domains or 1) else 0
            assert c.label_selector is not None
            self_match = int(c.label_selector.matches(pod.labels))
            if domains.get(node.labels[c.topology_key], 0) + self_match - minimum > c.max_skew:
                reason = (SKEW,)
                break
        out[node.name] = reason
    return out


def spread_manifest(c: dict[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "nodeAffinityPolicy": c["affinity_policy"],
        "nodeTaintsPolicy": c["taints_policy"],
    }
    if c["min_domains"] is not None:
        extra["minDomains"] = c["min_domains"]
    return spread(c["key"], c["max_skew"], {"app": c["app"]}, **extra)


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(NODE, min_size=1, max_size=8),
    placed=st.lists(PLACED, max_size=20),
    constraints=st.lists(CONSTRAINT, min_size=1, max_size=2),
    ssd_only=st.booleans(),
    namespace=st.sampled_from(["default", "other"]),
)
def test_topology_spread_matches_a_plain_reference(
    nodes: list[dict[str, Any]],
    placed: list[tuple[int, str, str]],
    constraints: list[dict[str, Any]],
    ssd_only: bool,
    namespace: str,
) -> None:
    state = build_cluster(nodes, placed)
    pod = web(
        "incoming",
        namespace=namespace,
        node_selector={"disk": "ssd"} if ssd_only else None,
        topology_spread=[spread_manifest(c) for c in constraints],
    )
    assert verdicts(PodTopologySpread(), state, pod) == reference_spread(state, pod)


@settings(max_examples=60, deadline=None)
@given(
    zones=st.lists(st.sampled_from("abcd"), min_size=1, max_size=8),
    max_skew=st.integers(1, 3),
    choices=st.lists(st.integers(0, 1000), min_size=1, max_size=25),
)
def test_topology_spread_keeps_skew_within_max_skew(
    zones: list[str], max_skew: int, choices: list[int]
) -> None:
    """Starting empty, placing each pod on any node the filter accepts never lets the
    spread across zones exceed maxSkew (every node counted, minDomains 1)."""
    state = make_state([zone_node(f"n{i}", z) for i, z in enumerate(zones)])
    plugin = PodTopologySpread()
    for step, choice in enumerate(choices):
        pod = web(f"w{step}", topology_spread=[spread(max_skew=max_skew)])
        ctx = context(state, pod)
        plugin.pre_filter(ctx)
        nodes = all_nodes(state)
        rejected = np.zeros(nodes.size, np.bool_)
        for rejection in plugin.filter(ctx, nodes):
            rejected |= rejection.nodes
        feasible = nodes[~rejected]
        assert feasible.size  # some zone always holds the minimum
        state.place(pod, state.nodes[int(feasible[choice % feasible.size])].name)
        per_zone = dict.fromkeys(zones, 0)
        for i, pods in enumerate(state.pods_on_node):
            per_zone[zones[i]] += len(pods)
        assert max(per_zone.values()) - min(per_zone.values()) <= max_skew


@settings(max_examples=60, deadline=None)
@given(hosts=st.integers(1, 6), pods=st.lists(st.tuples(st.booleans(), st.integers(0, 100)), max_size=15))
def test_hostname_anti_affinity_is_symmetric(hosts: int, pods: list[tuple[bool, int]]) -> None:
    """Web pods, some repelling web pods per host, placed one by one on accepted nodes:
    no host ever holds a repelling pod together with another web pod, whichever came
    first (the incoming pod's terms and the existing pods' terms)."""
    state = make_state([make_node(f"h{i}") for i in range(hosts)])
    plugin = InterPodAffinity()
    for step, (repels, choice) in enumerate(pods):
        anti = affinity(anti=(term(HOST, {"app": "web"}),)) if repels else None
        pod = web(f"w{step}", affinity=anti)
        ok = [name for name, reasons in verdicts(plugin, state, pod).items() if not reasons]
        if ok:
            state.place(pod, ok[choice % len(ok)])
    for on_node in state.pods_on_node:
        if len(on_node) > 1:
            assert not any(p.pod_anti_affinity.required for p in on_node.values())
