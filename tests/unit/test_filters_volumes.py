"""The volume filters, as tables: each row a pod, the nodes, the cluster's claims,
volumes, classes and CSINodes, and each node's reasons (kube-scheduler's wording)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.objects.fields import FieldReader
from scheduler.objects.pod import Pod
from scheduler.objects.volume_manifest import VolumeSpecError, claim_from_manifest, volume_from_manifest
from scheduler.plugins.filters.node_volume_limits import REASON as VOLUME_COUNT
from scheduler.plugins.filters.node_volume_limits import NodeVolumeLimits
from scheduler.plugins.filters.volume_binding import VolumeBinding
from scheduler.plugins.filters.volume_restrictions import (
    DISK_CONFLICT,
    READ_WRITE_ONCE_POD_CONFLICT,
    VolumeRestrictions,
)
from scheduler.plugins.filters.volume_zone import REASON as ZONE_CONFLICT
from scheduler.plugins.filters.volume_zone import VolumeZone
from scheduler.volumes.binding import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    PV_NOT_EXIST,
    UNBOUND_IMMEDIATE,
    find_pod_volumes,
    pod_claims,
)
from scheduler.volumes.node_masks import NodeLookup, selector_mask
from tests.builders import make_node, make_pod, verdicts
from tests.volume_builders import (
    HOSTNAME as HOST,
)
from tests.volume_builders import (
    ZONE,
    claim_manifest,
    claim_pod,
    claim_pod_manifest,
    csi_node_manifest,
    storage_class_manifest,
    volume_manifest,
    volume_state,
)

LOCAL = storage_class_manifest("local", provisioner="kubernetes.io/no-provisioner")
DYNAMIC = storage_class_manifest("fast", provisioner="example.com/fast", zones=["zone-a"])
IMMEDIATE = storage_class_manifest("standard", mode="Immediate")
DELETING = 'persistentvolumeclaim "data" is being deleted'
TWO = [make_node("n1"), make_node("n2")]
ZONED = [
    make_node("n1", labels={ZONE: "zone-a"}),
    make_node("n2", labels={ZONE: "zone-b"}),
    make_node("n3"),
]


def expect(**reasons: str | tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``n1=""`` fits, ``n1="reason"`` one reason, ``n1=("a", "b")`` several."""
    return {node: (r,) if isinstance(r, str) and r else tuple(r) for node, r in reasons.items()}


def row(
    plugin: Any,
    pod: Pod,
    expected: dict[str, tuple[str, ...]],
    case: str,
    *,
    nodes: list[Any] = TWO,
    **catalog: Any,
) -> Any:
    return pytest.param(plugin, pod, nodes, catalog, expected, id=case)


def aws_volume(name: str, volume_id: str) -> dict[str, Any]:
    """A bound PV of the in-tree AWS EBS plugin (scheduler_perf's pv-aws.yaml)."""
    manifest = volume_manifest(name, phase="Bound")
    del manifest["spec"]["hostPath"]
    manifest["spec"]["awsElasticBlockStore"] = {"volumeID": volume_id}
    return manifest


def on_n1_iscsi(read_only: bool) -> Pod:
    volume = {"name": "disk", "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.x:1", "lun": 0}}
    volume["iscsi"]["readOnly"] = read_only
    return claim_pod("other", extra_volumes=[volume])


CASES = [
    # ---- VolumeBinding: PreFilter ----
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1='persistentvolumeclaim "data" not found', n2='persistentvolumeclaim "data" not found'),
        "binding: a missing claim rejects every node",
    ),
    row(
        VolumeBinding(),
        claim_pod("job", ephemeral=["scratch"]),
        expect(
            n1='waiting for ephemeral volume controller to create the persistentvolumeclaim "job-scratch"',
            n2='waiting for ephemeral volume controller to create the persistentvolumeclaim "job-scratch"',
        ),
        "binding: an ephemeral volume's claim (<pod>-<volume>) not created yet",
    ),
    row(
        VolumeBinding(),
        claim_pod("job", ephemeral=["scratch"]),
        expect(
            n1="PVC default/job-scratch was not created for pod default/job (pod is not owner)",
            n2="PVC default/job-scratch was not created for pod default/job (pod is not owner)",
        ),
        "binding: an ephemeral volume's claim owned by another pod",
        claims=[claim_manifest("job-scratch", storage_class="fast", owner_uid="uid-someone-else")],
        classes=[DYNAMIC],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=UNBOUND_IMMEDIATE, n2=UNBOUND_IMMEDIATE),
        "binding: an unbound claim of an Immediate class waits for the PV controller",
        claims=[claim_manifest("data", storage_class="standard")],
        classes=[IMMEDIATE],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=UNBOUND_IMMEDIATE, n2=UNBOUND_IMMEDIATE),
        "binding: a claim without a class is bound by the PV controller too",
        claims=[claim_manifest("data")],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=UNBOUND_IMMEDIATE, n2=UNBOUND_IMMEDIATE),
        "binding: a claim naming a volume without bind-completed (pre-bound) waits",
        claims=[claim_manifest("data", storage_class="local", volume="pv-1")],
        volumes=[volume_manifest("pv-1", storage_class="local", claim=("default", "data"))],
        classes=[LOCAL],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(
            n1='persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-gone"',
            n2='persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-gone"',
        ),
        "binding: a lost claim",
        claims=[claim_manifest("data", volume="pv-gone", phase="Lost")],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=DELETING, n2=DELETING),
        "binding: a claim being deleted",
        claims=[claim_manifest("data", storage_class="local", deleting=True)],
        classes=[LOCAL],
    ),
    # ---- VolumeBinding: bound claims ----
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1="", n2=NODE_CONFLICT),
        "binding: a bound volume's node affinity (hostname n1)",
        claims=[claim_manifest("data", volume="pv-1", bound=True)],
        volumes=[volume_manifest("pv-1", nodes=["n1"], claim=("default", "data"), phase="Bound")],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=PV_NOT_EXIST, n2=PV_NOT_EXIST),
        "binding: a bound claim whose volume does not exist",
        claims=[claim_manifest("data", volume="pv-gone", bound=True)],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data", "logs"]),
        expect(n1=PV_NOT_EXIST, n2=NODE_CONFLICT),
        "binding: claims in order, a node's first failing claim decides (n2 fails pv-1 first)",
        claims=[
            claim_manifest("data", volume="pv-1", bound=True),
            claim_manifest("logs", volume="pv-gone", bound=True),
        ],
        volumes=[volume_manifest("pv-1", nodes=["n1"], claim=("default", "data"), phase="Bound")],
    ),
    # ---- VolumeBinding: WaitForFirstConsumer, static volumes ----
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1="", n2=BIND_CONFLICT),
        "binding: a local volume on n1 only, no provisioner",
        claims=[claim_manifest("data", storage_class="local")],
        volumes=[volume_manifest("pv-1", storage_class="local", nodes=["n1"])],
        classes=[LOCAL],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=BIND_CONFLICT, n2=BIND_CONFLICT),
        "binding: a volume smaller than the claim (1Gi < 5Gi)",
        claims=[claim_manifest("data", storage_class="local", size="5Gi")],
        volumes=[volume_manifest("pv-1", storage_class="local", size="1Gi")],
        classes=[LOCAL],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=BIND_CONFLICT, n2=BIND_CONFLICT),
        "binding: a volume without the claim's access mode (ReadWriteMany)",
        claims=[claim_manifest("data", storage_class="local", modes=["ReadWriteMany"])],
        volumes=[volume_manifest("pv-1", storage_class="local")],
        classes=[LOCAL],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=BIND_CONFLICT, n2=""),
        "binding: the claim's selector picks the volume on n2",
        claims=[claim_manifest("data", storage_class="local", selector={"tier": "gold"})],
        volumes=[
            volume_manifest("pv-1", storage_class="local", nodes=["n1"], labels={"tier": "bronze"}),
            volume_manifest("pv-2", storage_class="local", nodes=["n2"], labels={"tier": "gold"}),
        ],
        classes=[LOCAL],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=BIND_CONFLICT, n2=BIND_CONFLICT),
        "binding: a volume of another class, and one taken by another claim",
        claims=[claim_manifest("data", storage_class="local")],
        volumes=[
            volume_manifest("pv-other", storage_class="slow", nodes=["n1"]),
            volume_manifest("pv-taken", storage_class="local", claim=("default", "web"), phase="Bound"),
        ],
        classes=[LOCAL],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data", "logs"]),
        expect(n1="", n2=BIND_CONFLICT),
        "binding: two claims need two volumes (n1 has two, n2 one)",
        claims=[claim_manifest("data", storage_class="local"), claim_manifest("logs", storage_class="local")],
        volumes=[
            volume_manifest("pv-1a", storage_class="local", nodes=["n1"]),
            volume_manifest("pv-1b", storage_class="local", nodes=["n1"]),
            volume_manifest("pv-2a", storage_class="local", nodes=["n2"]),
        ],
        classes=[LOCAL],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=BIND_CONFLICT, n2=""),
        "binding: a volume pre-bound to the claim (on n2) is its only match",
        claims=[claim_manifest("data", storage_class="local")],
        volumes=[
            volume_manifest("pv-1", storage_class="local", nodes=["n1"]),
            volume_manifest("pv-2", storage_class="local", nodes=["n2"], claim=("default", "data")),
        ],
        classes=[LOCAL],
    ),
    # ---- VolumeBinding: WaitForFirstConsumer, provisioning ----
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1="", n2=BIND_CONFLICT, n3=BIND_CONFLICT),
        "binding: provisioned where the class's allowedTopologies match (zone-a)",
        nodes=ZONED,
        claims=[claim_manifest("data", storage_class="fast")],
        classes=[DYNAMIC],
    ),
    row(
        VolumeBinding(),
        claim_pod("job", ephemeral=["scratch"]),
        expect(n1="", n2=BIND_CONFLICT, n3=BIND_CONFLICT),
        "binding: an ephemeral volume's claim, owned by the pod, provisioned in zone-a",
        nodes=ZONED,
        claims=[claim_manifest("job-scratch", storage_class="fast", owner_uid="uid-job")],
        classes=[DYNAMIC],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data"]),
        expect(n1=BIND_CONFLICT, n2=""),
        "binding: a claim whose selected node is n2 (provisioning under way)",
        claims=[claim_manifest("data", storage_class="any", selected_node="n2")],
        classes=[storage_class_manifest("any")],
    ),
    row(
        VolumeBinding(),
        claim_pod("db", ["data", "scratch"]),
        expect(n1="", n2=(NODE_CONFLICT, BIND_CONFLICT)),
        "binding: a bound volume on n1 and a claim provisioned in zone-a: n2 fails both",
        nodes=ZONED[:2],
        claims=[
            claim_manifest("data", volume="pv-1", bound=True),
            claim_manifest("scratch", storage_class="fast"),
        ],
        volumes=[volume_manifest("pv-1", nodes=["n1"], claim=("default", "data"), phase="Bound")],
        classes=[DYNAMIC],
    ),
    # ---- VolumeZone ----
    row(
        VolumeZone(),
        claim_pod("db", ["data"]),
        expect(n1="", n2=ZONE_CONFLICT, n3=""),
        "zone: a volume in zone-a; a node without zone labels fits any",
        nodes=ZONED,
        claims=[claim_manifest("data", volume="pv-1", bound=True)],
        volumes=[volume_manifest("pv-1", labels={ZONE: "zone-a"}, phase="Bound")],
    ),
    row(
        VolumeZone(),
        claim_pod("db", ["data"]),
        expect(n1="", n2="", n3=""),
        "zone: a volume in zone-a__zone-b (several zones)",
        nodes=ZONED,
        claims=[claim_manifest("data", volume="pv-1", bound=True)],
        volumes=[volume_manifest("pv-1", labels={ZONE: "zone-a__zone-b"}, phase="Bound")],
    ),
    row(
        VolumeZone(),
        claim_pod("db", ["data"]),
        expect(n1=ZONE_CONFLICT, n2="", n3=""),
        "zone: the beta zone label on the volume, the GA one on the nodes",
        nodes=ZONED,
        claims=[claim_manifest("data", volume="pv-1", bound=True)],
        volumes=[volume_manifest("pv-1", labels={"failure-domain.beta.kubernetes.io/zone": "zone-b"})],
    ),
    row(
        VolumeZone(),
        claim_pod("db", ["data"]),
        expect(n1='persistentvolume "pv-gone" not found', n2='persistentvolume "pv-gone" not found'),
        "zone: a bound claim's volume does not exist",
        claims=[claim_manifest("data", volume="pv-gone", bound=True)],
    ),
    row(
        VolumeZone(),
        claim_pod("db", ["data"]),
        expect(n1="", n2="", n3=""),
        "zone: an unbound WaitForFirstConsumer claim is skipped",
        nodes=ZONED,
        claims=[claim_manifest("data", storage_class="fast")],
        classes=[DYNAMIC],
    ),
    # ---- VolumeRestrictions ----
    row(
        VolumeRestrictions(),
        claim_pod("db", ["data"]),
        expect(n1=READ_WRITE_ONCE_POD_CONFLICT, n2=READ_WRITE_ONCE_POD_CONFLICT),
        "restrictions: a ReadWriteOncePod claim a placed pod uses",
        placed=[(claim_pod("first", ["data"]), "n1")],
        claims=[claim_manifest("data", volume="pv-1", bound=True, modes=["ReadWriteOncePod"])],
    ),
    row(
        VolumeRestrictions(),
        claim_pod("db", ["data"]),
        expect(n1="", n2=""),
        "restrictions: a ReadWriteOncePod claim no pod uses",
        placed=[(claim_pod("first", ["other"]), "n1")],
        claims=[claim_manifest("data", volume="pv-1", bound=True, modes=["ReadWriteOncePod"])],
    ),
    row(
        VolumeRestrictions(),
        on_n1_iscsi(read_only=False),
        expect(n1=DISK_CONFLICT, n2=""),
        "restrictions: the same iSCSI disk read-write on n1",
        placed=[(on_n1_iscsi(read_only=True), "n1")],
    ),
    row(
        VolumeRestrictions(),
        on_n1_iscsi(read_only=True),
        expect(n1="", n2=""),
        "restrictions: the same iSCSI disk read-only twice",
        placed=[(on_n1_iscsi(read_only=True), "n1")],
    ),
    # ---- NodeVolumeLimits ----
    row(
        NodeVolumeLimits(),
        claim_pod("db", ["data"]),
        expect(n1=VOLUME_COUNT, n2=""),
        "limits: n1 allows one volume of the driver and has one (n2 reports no CSINode)",
        placed=[(claim_pod("first", ["old"]), "n1")],
        claims=[
            claim_manifest("old", volume="pv-old", bound=True),
            claim_manifest("data", volume="pv-new", bound=True),
        ],
        volumes=[
            volume_manifest("pv-old", csi=("ebs.csi.aws.com", "vol-1"), phase="Bound"),
            volume_manifest("pv-new", csi=("ebs.csi.aws.com", "vol-2"), phase="Bound"),
        ],
        csi_nodes=[csi_node_manifest("n1", {"ebs.csi.aws.com": 1})],
    ),
    row(
        NodeVolumeLimits(),
        claim_pod("db", ["old"]),
        expect(n1="", n2=""),
        "limits: a volume the node has already is not counted twice",
        placed=[(claim_pod("first", ["old"]), "n1")],
        claims=[claim_manifest("old", volume="pv-old", bound=True)],
        volumes=[volume_manifest("pv-old", csi=("ebs.csi.aws.com", "vol-1"), phase="Bound")],
        csi_nodes=[csi_node_manifest("n1", {"ebs.csi.aws.com": 1})],
    ),
    row(
        NodeVolumeLimits(),
        claim_pod("db", ["data"]),
        expect(n1=VOLUME_COUNT, n2=""),
        "limits: an unbound claim counts for its class's provisioner",
        claims=[claim_manifest("data", storage_class="ebs")],
        classes=[storage_class_manifest("ebs", provisioner="ebs.csi.aws.com")],
        csi_nodes=[csi_node_manifest("n1", {"ebs.csi.aws.com": 0}), csi_node_manifest("n2", {"other": 0})],
    ),
    row(
        NodeVolumeLimits(),
        claim_pod("db", ["data"]),
        expect(n1=VOLUME_COUNT, n2=""),
        "limits: in-tree AWS EBS volumes count as ebs.csi.aws.com's, as kube migrates them",
        placed=[(claim_pod("first", ["old"]), "n1")],
        claims=[
            claim_manifest("old", volume="pv-old", bound=True),
            claim_manifest("data", volume="pv-new", bound=True),
        ],
        volumes=[aws_volume("pv-old", "vol-1"), aws_volume("pv-new", "vol-2")],
        csi_nodes=[csi_node_manifest("n1", {"ebs.csi.aws.com": 1})],
    ),
    row(
        NodeVolumeLimits(),
        claim_pod("db", ["data"]),
        expect(n1="", n2=""),
        "limits: aws://<zone>/vol-1 and vol-1 are one volume, counted once",
        placed=[(claim_pod("first", ["old"]), "n1")],
        claims=[
            claim_manifest("old", volume="pv-old", bound=True),
            claim_manifest("data", volume="pv-new", bound=True),
        ],
        volumes=[aws_volume("pv-old", "aws://us-east-1a/vol-1"), aws_volume("pv-new", "vol-1")],
        csi_nodes=[csi_node_manifest("n1", {"ebs.csi.aws.com": 1})],
    ),
    row(
        NodeVolumeLimits(),
        claim_pod("db", ["data"]),
        expect(n1=VOLUME_COUNT, n2=""),
        "limits: an unbound claim of the in-tree provisioner counts for its CSI driver",
        claims=[claim_manifest("data", storage_class="gp2")],
        classes=[storage_class_manifest("gp2", provisioner="kubernetes.io/aws-ebs")],
        csi_nodes=[csi_node_manifest("n1", {"ebs.csi.aws.com": 0}), csi_node_manifest("n2", {"other": 0})],
    ),
    row(
        VolumeBinding(),
        make_pod("plain"),
        expect(n1="", n2=""),
        "binding: a pod without claims is skipped",
    ),
]


@pytest.mark.parametrize(("plugin", "pod", "nodes", "catalog", "expected"), CASES)
def test_volume_filters(
    plugin: Any, pod: Pod, nodes: list[Any], catalog: dict[str, Any], expected: dict[str, tuple[str, ...]]
) -> None:
    state = volume_state(nodes, **catalog)
    assert verdicts(plugin, state, pod) == expected


def test_claims_take_the_smallest_fitting_volumes_one_each() -> None:
    """1Gi claim first takes the 5Gi volume; the 8Gi claim then the 20Gi (5Gi < 8Gi)."""
    state = volume_state(
        TWO,
        claims=[
            claim_manifest("big", storage_class="local", size="8Gi"),
            claim_manifest("small", storage_class="local", size="1Gi"),
        ],
        volumes=[
            volume_manifest("pv-20", storage_class="local", size="20Gi", nodes=["n1"]),
            volume_manifest("pv-5", storage_class="local", size="5Gi", nodes=["n1"]),
            volume_manifest("pv-50", storage_class="local", size="50Gi", nodes=["n1"]),
        ],
        classes=[LOCAL],
    )
    pod = claim_pod("db", ["big", "small"])
    fit = find_pod_volumes(state, pod_claims(pod, state.volumes), np.arange(2))
    chosen = {claim.name: volume.name for claim, volume in fit.pod_volumes(0).static}
    assert chosen == {"small": "pv-5", "big": "pv-20"}
    assert fit.bind_conflict.tolist() == [False, True]


def test_provisioned_claims_and_static_bindings_per_node() -> None:
    """On n1 the local volume binds; in zone-a a fast claim is provisioned."""
    state = volume_state(
        ZONED[:2],
        claims=[claim_manifest("data", storage_class="local"), claim_manifest("cache", storage_class="fast")],
        volumes=[volume_manifest("pv-1", storage_class="local", nodes=["n1"])],
        classes=[LOCAL, DYNAMIC],
    )
    pod = claim_pod("db", ["data", "cache"])
    fit = find_pod_volumes(state, pod_claims(pod, state.volumes), np.arange(2))
    on_n1 = fit.pod_volumes(0)
    assert [(c.name, v.name) for c, v in on_n1.static] == [("data", "pv-1")]
    assert [c.name for c in on_n1.provisions] == ["cache"]
    assert fit.bind_conflict.tolist() == [False, True]


def test_claim_volumes_parse_from_the_pod() -> None:
    pod = claim_pod_manifest("db", ["data"], ephemeral=["scratch"])
    parsed = claim_pod("db", ["data"], ephemeral=["scratch"])
    assert [(v.name, v.claim, v.ephemeral) for v in parsed.volumes] == [
        ("v-data", "data", False),
        ("scratch", "db-scratch", True),
    ]
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": "data"}


@pytest.mark.parametrize(
    "selector",
    [
        None,
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n2"]}]}]},
        {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a", "zone-z"]}]},
                {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n2", "n3"]}]},
            ]
        },
        {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": ZONE, "operator": "In", "values": ["zone-a", "zone-b"]},
                        {"key": HOST, "operator": "In", "values": ["n1", "n3"]},
                    ]
                }
            ]
        },
        {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["zone-a"]}]}
            ]
        },
        {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}
            ]
        },
    ],
    ids=["none", "one host", "zone or hosts", "zone and hosts", "NotIn (general path)", "matchFields"],
)
def test_node_lookup_matches_what_the_mask_matches(selector: Any) -> None:
    """The binary-search path agrees with the node-by-node semantics."""
    state = volume_state(ZONED)
    reader = FieldReader("pv test", VolumeSpecError)
    parsed = reader.node_selector(selector, "spec.nodeAffinity.required")
    assert (
        NodeLookup(state).matching(parsed).tolist() == np.flatnonzero(selector_mask(state, parsed)).tolist()
    )
    expected = [
        i for i, node in enumerate(state.nodes) if parsed is None or parsed.matches(node.name, node.labels)
    ]
    assert NodeLookup(state).matching(parsed).tolist() == expected


@pytest.mark.parametrize("seed", range(40))
def test_volume_limits_kept_between_cycles_match_a_fresh_read(seed: int) -> None:
    """NodeVolumeLimits keeps each node's volumes in use between cycles: over random
    histories of pods placed and removed, claims bound to other volumes, deleted or
    assumed, and volumes given other handles, one kept instance gives every node the
    verdict a new instance (which reads everything afresh) gives."""
    rng = np.random.default_rng(seed)
    driver = "ebs.csi.aws.com"
    nodes = [make_node(f"n{i}") for i in range(3)]
    claims = [f"c{i}" for i in range(6)]
    state = volume_state(
        nodes,
        claims=[claim_manifest(c, volume=f"pv-{c}", bound=True) for c in claims],
        volumes=[
            volume_manifest(f"pv-{c}", csi=(driver, f"vol-{i % 4}"), phase="Bound")
            for i, c in enumerate(claims)
        ],
        csi_nodes=[csi_node_manifest(n.name, {driver: 2}) for n in nodes],
    )
    kept = NodeVolumeLimits()
    placed: list[str] = []
    for step in range(30):
        action = int(rng.integers(5))
        picked = [str(c) for c in rng.choice(claims, size=int(rng.integers(1, 3)), replace=False)]
        if action == 0 or not placed:
            pod = claim_pod(f"p{step}", picked)
            state.place(pod, f"n{int(rng.integers(3))}")
            placed.append(pod.key)
        elif action == 1:
            state.remove(placed.pop(int(rng.integers(len(placed)))))
        elif action == 2:
            state.volumes.put_claim(
                claim_from_manifest(claim_manifest(picked[0], volume=f"pv-{picked[-1]}", bound=True))
            )
        elif action == 3:
            handle = f"vol-{int(rng.integers(6))}"
            state.volumes.put_volume(
                volume_from_manifest(volume_manifest(f"pv-{picked[0]}", csi=(driver, handle), phase="Bound"))
            )
        elif rng.random() < 0.5:
            state.volumes.delete_claim(f"default/{picked[0]}")
        else:
            state.volumes.assume_claim(claim_from_manifest(claim_manifest(picked[0], bound=False)))
        incoming = claim_pod(f"in{step}", [str(c) for c in rng.choice(claims, size=2, replace=False)])
        assert verdicts(kept, state, incoming) == verdicts(NodeVolumeLimits(), state, incoming), step
