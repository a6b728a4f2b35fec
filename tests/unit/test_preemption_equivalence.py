"""The dry run as it is against the one it replaced (``preemption_reference``): on random
clusters (priorities, taints, cordons, zones, GPUs, inter-pod affinity and anti-affinity,
PodDisruptionBudgets, nominated pods) both must choose the same victims in the same
order on every node, the same candidate and nominations, with the same messages, and
leave the state exactly as it was."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler.framework.plugin import CycleContext
from scheduler.framework.preemption import CountedPeers, NodeStatuses, filter_with_nominated_pods, preempt
from scheduler.framework.preemption_reprieve import ResourceReprieve
from scheduler.framework.preemption_victims import (
    PodDisruptionBudget,
    Victims,
    add_nominated_pods,
    node_status,
    select_victims_on_node,
)
from scheduler.framework.profile import filter_around_nominations
from scheduler.framework.status import Status
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.objects.selectors import LabelSelector
from scheduler.objects.volume_manifest import (
    claim_from_manifest,
    csi_node_from_manifest,
    volume_from_manifest,
)
from scheduler.plugins.filters.node_volume_limits import NodeVolumeLimits
from scheduler.plugins.profiles import default_filters
from scheduler.state.cluster_state import ClusterState
from scheduler.state.gpu_fit import gpus_fitting
from tests.builders import make_node, make_pod, pod_manifest
from tests.unit import preemption_reference as reference
from tests.unit.test_preemption import snapshot
from tests.volume_builders import claim_manifest, csi_node_manifest, volume_manifest

FILTERS = default_filters()
NOW = 1_717_200_000.0
APPS = ("a", "b", "db")
ZONES = ("z1", "z2")
# Some preemptors do not fit even with every lower-priority pod gone, some not on any node.
PREEMPTOR_CPUS = ("500m", "1", "2", "3", "6")
CSI_DRIVER = "ebs.csi.aws.com"


def random_affinity(rng: random.Random) -> dict[str, Any] | None:
    """Sometimes a required pod affinity or anti-affinity to one app, by host or zone."""
    kind = rng.choice((None, None, "podAffinity", "podAntiAffinity"))
    if kind is None:
        return None
    term = {
        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
        "topologyKey": rng.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone")),
    }
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def random_pod(
    rng: random.Random,
    name: str,
    priority: int,
    cpus: tuple[str, ...] = ("500m", "1", "1500m", "2"),
    claims: tuple[str, ...] = (),
    **kwargs: Any,
) -> Pod:
    """A random pod; with ``claims``, it mounts those PersistentVolumeClaims."""
    gpu: dict[str, Any] = {}
    if rng.random() < 0.25:
        gpu = {"gpus": 1, "gpu_milli": rng.choice((None, 300, 600))}
    manifest = pod_manifest(
        name,
        priority=priority,
        cpu=rng.choice(cpus),
        memory=rng.choice(("256Mi", "1Gi")),
        labels={"app": rng.choice(APPS)},
        affinity=random_affinity(rng),
        start_time=rng.choice((None, "2024-01-01T00:00:00Z", "2024-05-01T00:00:00Z")),
        **gpu,
        **kwargs,
    )
    if claims:
        manifest["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return pod_from_manifest(manifest)


def attached_claim(rng: random.Random, state: ClusterState, owner: str, share: float) -> tuple[str, ...]:
    """With probability ``share``, a claim for ``owner`` bound to a CSI volume of its own
    (which NodeVolumeLimits counts against the node's CSINode limit), added to the
    catalog; its name, or nothing."""
    if rng.random() >= share:
        return ()
    claim, volume = f"claim-{owner}", f"pv-{owner}"
    state.volumes.put_claim(claim_from_manifest(claim_manifest(claim, volume=volume, bound=True)))
    state.volumes.put_volume(
        volume_from_manifest(volume_manifest(volume, csi=(CSI_DRIVER, f"vol-{owner}"), phase="Bound"))
    )
    return (claim,)


def copy_claims(pods: list[Pod], source: ClusterState, target: ClusterState) -> None:
    """The claims of ``pods`` and their volumes, from ``source``'s catalog to ``target``'s."""
    for pod in pods:
        for volume in pod.volumes:
            claim = source.volumes.claim(pod.namespace, volume.claim)
            if claim is not None:
                target.volumes.put_claim(claim)
                bound = source.volumes.volume(claim.volume_name)
                if bound is not None:
                    target.volumes.put_volume(bound)


def random_cluster(rng: random.Random, volumes: bool = False) -> ClusterState:
    nodes = []
    for i in range(rng.randint(2, 7)):
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.15 else []
        nodes.append(
            make_node(
                f"n{i}",
                cpu=rng.choice(("2", "4")),
                memory="8Gi",
                pods=rng.choice((110, 110, 3)),
                gpus=rng.choice((0, 0, 1, 2)),
                model="T4",
                labels={"topology.kubernetes.io/zone": rng.choice(ZONES)},
                taints=taints,
                unschedulable=rng.random() < 0.1,
            )
        )
    state = ClusterState(nodes)
    if volumes:  # some nodes limit the driver's volumes, most pods have none
        for node in state.node_names:
            limit = rng.choice((None, 1, 2, 3))
            if limit is not None:
                state.volumes.put_csi_node(
                    csi_node_from_manifest(csi_node_manifest(node, {CSI_DRIVER: limit}))
                )
    for k in range(rng.randint(3, 16)):
        claims = attached_claim(rng, state, f"p{k}", 0.3) if volumes else ()
        pod = random_pod(rng, f"p{k}", rng.randint(0, 6), claims=claims, tolerations=[{"operator": "Exists"}])
        row = rng.randrange(len(state))
        if not node_status(state, FILTERS, pod, row).ok:
            continue
        gpus: tuple[int, ...] = ()
        if pod.gpu.count:
            fits = gpus_fitting(state, np.array([row], np.int64), pod.gpu)[0]
            gpus = tuple(int(g) for g in np.flatnonzero(fits)[: pod.gpu.count])
        state.place(pod, state.nodes[row].name, gpus)
    return state


def random_budgets(rng: random.Random) -> list[PodDisruptionBudget]:
    return [
        PodDisruptionBudget("default", f"pdb-{app}", LabelSelector((("app", app),)), rng.randint(0, 2))
        for app in APPS
        if rng.random() < 0.4
    ]


def random_nominated(rng: random.Random, state: ClusterState, volumes: bool = False) -> list[Pod]:
    return [
        random_pod(
            rng,
            f"nominated{k}",
            rng.randint(0, 9),
            claims=attached_claim(rng, state, f"nominated{k}", 0.7) if volumes else (),
            nominated_node_name=rng.choice(state.node_names),
        )
        for k in range(rng.choice((0, 0, 1, 2, 4)))
    ]


def node_statuses(statuses: NodeStatuses) -> tuple[Any, ...]:
    """What a FilterPass-based NodeStatuses tells the cycle: feasible rows, codes, each
    row's reasons and the counts the FitError message is made of."""
    rows = range(statuses.total_nodes)
    return (
        statuses.feasible.tolist(),
        statuses.codes.tolist(),
        [statuses.reasons(row) for row in rows],
        dict(statuses.reason_counts),
        statuses.message,
    )


def groups(state: ClusterState) -> tuple[Any, ...]:
    """The pod groups the affinity plugins read: which pods alike sit on which node. Their
    order is left out: the reference takes pods off and places them back, which moves
    them to the end of their groups; the dry run as it is may not touch them at all."""
    pod_groups = state.pod_groups
    return (
        {key: dict(group.on_node) for key, group in pod_groups.by_labels.items()},
        {key: dict(group.on_node) for key, group in pod_groups.with_terms.items()},
        pod_groups.with_required_anti,
    )


@pytest.mark.parametrize("seed", range(400))
def test_the_dry_run_decides_as_the_reference_does(seed: int) -> None:
    check_dry_run(seed, volumes=False)


def check_dry_run(seed: int, volumes: bool) -> None:
    """Two equal clusters: the reference runs on one, the dry run as it is on the other.
    ``volumes``: CSI volume limits on some nodes, claims on some pods and the preemptor."""
    rng = random.Random(seed)
    state = random_cluster(rng, volumes)
    theirs_state = random_cluster(random.Random(seed), volumes)
    pdbs = random_budgets(rng)
    nominated = random_nominated(rng, state, volumes)
    tolerations = [{"operator": "Exists"}] if rng.random() < 0.5 else []
    claims = attached_claim(rng, state, "preemptor", 1.0) if volumes else ()
    pod = random_pod(
        rng, "preemptor", rng.randint(3, 9), PREEMPTOR_CPUS, claims=claims, tolerations=tolerations
    )
    copy_claims([*nominated, pod], state, theirs_state)  # the reference's catalog has them too
    expected_victims = [
        reference.select_victims_on_node(theirs_state, FILTERS, pod, name, pdbs, nominated=nominated, now=NOW)
        for name in theirs_state.node_names
    ]
    statuses = reference.filter_with_nominated_pods(theirs_state, FILTERS, pod, nominated)
    expected_statuses = node_statuses(statuses)
    expected = reference.preempt(
        theirs_state,
        FILTERS,
        pod,
        statuses,
        np.random.default_rng(seed),
        pdbs=pdbs,
        nominated=nominated,
        now=NOW,
    )
    for name, theirs in zip(state.node_names, expected_victims, strict=True):
        ours = select_victims_on_node(state, FILTERS, pod, name, pdbs, nominated=nominated, now=NOW)
        assert ours == theirs, name
    statuses = filter_with_nominated_pods(state, FILTERS, pod, nominated)
    assert node_statuses(statuses) == expected_statuses
    outcome = preempt(
        state, FILTERS, pod, statuses, np.random.default_rng(seed), pdbs=pdbs, nominated=nominated, now=NOW
    )
    assert outcome == expected
    # Left as the reference leaves it (which test_preemption holds to "as it was").
    assert snapshot(state) == snapshot(theirs_state)
    assert groups(state) == groups(theirs_state)


@pytest.mark.parametrize("seed", range(300))
def test_the_dry_run_decides_as_the_reference_does_with_volume_limits(seed: int) -> None:
    """PreemptionPVs' shape: a preemptor with a CSI volume, on nodes whose CSINode limits
    the driver, among pods with and without volumes."""
    check_dry_run(seed, volumes=True)


def test_volume_limits_take_both_ways_of_reprieving(monkeypatch: pytest.MonkeyPatch) -> None:
    """With volumes, reprieves are counted where no pod moved has a volume and run
    through the filters where one has; NodeVolumeLimits rejects some nodes."""
    paths: list[bool] = []
    applies = ResourceReprieve.applies

    def spy_applies(*args: Any, **kwargs: Any) -> ResourceReprieve | None:
        result = applies(*args, **kwargs)
        paths.append(result is not None)
        return result

    monkeypatch.setattr(ResourceReprieve, "applies", staticmethod(spy_applies))
    limited = 0
    for seed in range(300):
        check_dry_run(seed, volumes=True)
        rng = random.Random(seed)
        state = random_cluster(rng, volumes=True)
        claims = attached_claim(rng, state, "probe", 1.0)
        probe = random_pod(rng, "probe", 0, claims=claims, tolerations=[{"operator": "Exists"}])
        ctx = CycleContext(state, probe, {})
        limits = NodeVolumeLimits()
        if limits.applies(ctx):
            limited += bool(np.any(limits.filter(ctx, np.arange(len(state)))[0].nodes))
    assert paths.count(True) >= 25, paths.count(True)
    assert paths.count(False) >= 25, paths.count(False)
    assert limited >= 10, limited


def test_both_ways_of_reprieving_are_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    """The random clusters reach reprieves counted in requests (with the pod fitting once
    the pods are off and not) and reprieves that must run the filters (affinity, GPUs,
    nominated pods), so the table above holds all of them."""
    paths: list[bool] = []
    counted: list[bool] = []
    applies, status = ResourceReprieve.applies, ResourceReprieve.status

    def spy_applies(*args: Any, **kwargs: Any) -> ResourceReprieve | None:
        result = applies(*args, **kwargs)
        paths.append(result is not None)
        return result

    def spy_status(self: ResourceReprieve) -> Status:
        result = status(self)
        counted.append(result.ok)
        return result

    monkeypatch.setattr(ResourceReprieve, "applies", staticmethod(spy_applies))
    monkeypatch.setattr(ResourceReprieve, "status", spy_status)
    for seed in range(100):
        check_dry_run(seed, volumes=False)
    assert paths.count(True) >= 25, paths.count(True)
    assert paths.count(False) >= 25, paths.count(False)
    assert counted.count(True) >= 10, counted.count(True)
    assert counted.count(False) >= 10, counted.count(False)


def test_the_random_clusters_reach_every_kind_of_outcome() -> None:
    """The table above is not vacuous: its clusters give victims, PDB violations,
    failures the filters explain and nodes with no victims."""
    seen: set[str] = set()
    for seed in range(400):
        rng = random.Random(seed)
        state = random_cluster(rng)
        pdbs = random_budgets(rng)
        nominated = random_nominated(rng, state)
        tolerations = [{"operator": "Exists"}] if rng.random() < 0.5 else []
        pod = random_pod(rng, "preemptor", rng.randint(3, 9), PREEMPTOR_CPUS, tolerations=tolerations)
        for name in state.node_names:
            result = select_victims_on_node(state, FILTERS, pod, name, pdbs, nominated=nominated, now=NOW)
            if isinstance(result, Victims):
                seen.add("violations" if result.num_pdb_violations else "victims")
                if len(result.pods) < len(
                    [
                        p
                        for p in state.pods_on_node[state.node_index[name]].values()
                        if p.priority < pod.priority
                    ]
                ):
                    seen.add("reprieved")
            else:
                seen.add(result.reasons[0] if result.reasons else str(result.code))
    assert {"victims", "violations", "reprieved"} <= seen
    assert len(seen) >= 6, seen


def test_nominated_pods_are_counted_and_placed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The random clusters reach both ways of filtering a node that has nominated peers:
    counted in requests (a verdict that changes with them, and one that does not) and
    placed on the state (a peer with required anti-affinity, a pod with affinity terms)."""
    counted: list[bool] = []  # per node counted: whether it passed
    placed: list[bool] = []
    failures = CountedPeers.failures
    add = add_nominated_pods

    def spy_failures(self: CountedPeers, state: Any, nodes: Any, base: Any) -> dict[int, Status]:
        result = failures(self, state, nodes, base)
        counted.extend(row not in result for row, _ in nodes)
        return result

    def spy_add(*args: Any) -> Any:
        placed.append(True)
        return add(*args)

    monkeypatch.setattr(CountedPeers, "failures", spy_failures)
    monkeypatch.setattr("scheduler.framework.preemption.add_nominated_pods", spy_add)
    for seed in range(400):
        check_dry_run(seed, volumes=False)
    assert counted.count(True) >= 20, counted.count(True)
    assert counted.count(False) >= 8, counted.count(False)
    assert len(placed) >= 10, len(placed)


@pytest.mark.parametrize("seed", range(300))
def test_a_nominated_pod_goes_where_the_full_pass_would_send_it(seed: int) -> None:
    """``filter_around_nominations`` tries the pod's nominated node alone first (kube's
    ``evaluateNominatedNode``): the feasible nodes are that node where the pass over
    every node finds it feasible, and that pass's otherwise, with its statuses."""
    rng = random.Random(seed)
    state = random_cluster(rng)
    nominated = random_nominated(rng, state)
    node = rng.choice([*state.node_names, "gone"])
    pod = random_pod(rng, "preemptor", rng.randint(3, 9), PREEMPTOR_CPUS, nominated_node_name=node)
    statuses = filter_with_nominated_pods(state, FILTERS, pod, nominated)
    before = snapshot(state)
    decision = filter_around_nominations(CycleContext(state, pod, {}), FILTERS, nominated)
    assert snapshot(state) == before
    row = state.node_index.get(node)
    if row is not None and row in statuses.feasible:
        assert decision.feasible.tolist() == [row]
        return
    assert decision.feasible.tolist() == statuses.feasible.tolist()
    assert decision.message == statuses.message


def test_the_nominated_node_fits_in_some_random_clusters_and_not_in_others() -> None:
    """The table above meets both branches: the nominated node kept, and the full pass."""
    kept = 0
    seeds = range(300)
    for seed in seeds:
        rng = random.Random(seed)
        state = random_cluster(rng)
        nominated = random_nominated(rng, state)
        node = rng.choice([*state.node_names, "gone"])
        pod = random_pod(rng, "preemptor", rng.randint(3, 9), PREEMPTOR_CPUS, nominated_node_name=node)
        row = state.node_index.get(node)
        kept += row is not None and row in filter_with_nominated_pods(state, FILTERS, pod, nominated).feasible
    assert 20 <= kept <= len(seeds) - 20, kept


@pytest.mark.parametrize("resources", [2, 40])
def test_nominated_pods_counted_over_many_resources(resources: int) -> None:
    """A pod asking for dozens of extended resources makes patterns of more than 62
    conditions (``CountedPeers.failures`` numbers them another way): the statuses are
    still the reference's."""
    names = [f"example.com/r{k}" for k in range(resources)]
    nodes = [
        make_node(f"n{i}", cpu="4", extra={name: str(2 + (i + k) % 3) for k, name in enumerate(names)})
        for i in range(8)
    ]
    states = [ClusterState(nodes), ClusterState(nodes)]
    peers = [
        make_pod(
            f"peer{i}", cpu="1", priority=5, extra=dict.fromkeys(names, "1"), nominated_node_name=f"n{i}"
        )
        for i in range(6)
    ]
    pod = make_pod("preemptor", cpu="2", priority=5, extra=dict.fromkeys(names, "2"))
    ours = filter_with_nominated_pods(states[0], FILTERS, pod, peers)
    theirs = reference.filter_with_nominated_pods(states[1], FILTERS, pod, peers)
    assert node_statuses(ours) == node_statuses(theirs)
    assert len(set(node_statuses(ours)[2])) > 1  # nodes fail for different reasons


def volume_pod(
    name: str, priority: int, cpu: str, state: ClusterState, with_volume: bool, **kwargs: Any
) -> Pod:
    manifest = pod_manifest(name, priority=priority, cpu=cpu, **kwargs)
    if with_volume:
        claims = attached_claim(random.Random(0), state, name, 1.0)
        manifest["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return pod_from_manifest(manifest)


@pytest.mark.parametrize(
    ("peer_volume", "expected"),
    [
        # n0 allows one volume of the driver; the preemptor has one, so does the peer.
        (True, "node(s) exceed max volume count"),
        (False, "victim"),
    ],
    ids=["a nominated peer's volume counts: no room", "a peer without one: the victim goes"],
)
def test_a_nominated_peers_volume_counts_against_the_nodes_limit(peer_volume: bool, expected: str) -> None:
    """Counted reprieves hold only while the pods moved have no volumes: a pod nominated
    to the node with a volume takes the node's last CSI slot in kube's pass with
    nominated pods, so the reprieve must run the filters (as the reference does)."""

    def cluster() -> tuple[ClusterState, Pod, Pod]:
        state = ClusterState([make_node("n0", cpu="4", memory="8Gi")])
        state.volumes.put_csi_node(csi_node_from_manifest(csi_node_manifest("n0", {CSI_DRIVER: 1})))
        state.place(make_pod("victim", priority=0, cpu="2"), "n0", ())
        peer = volume_pod("peer", 9, "1", state, peer_volume, nominated_node_name="n0")
        return state, peer, volume_pod("preemptor", 5, "2", state, True)

    state, peer, pod = cluster()
    theirs_state, _, _ = cluster()
    ours = select_victims_on_node(state, FILTERS, pod, "n0", [], nominated=[peer], now=NOW)
    theirs = reference.select_victims_on_node(theirs_state, FILTERS, pod, "n0", [], nominated=[peer], now=NOW)
    assert ours == theirs
    said = [p.name for p in ours.pods] if isinstance(ours, Victims) else list(ours.reasons)
    assert said == [expected]
