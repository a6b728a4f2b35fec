"""The scheduler_perf benchmark's storage objects (a claim and a volume bound to each
other, a CSINode from nodeAllocatableStrategy) and its independent check of the volume
constraints of a placement."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from scheduler_perf_ops import NodesOp
from scheduler_perf_volume_checks import broken_volume_constraints
from scheduler_perf_volumes import claim_and_volume, csi_node

CLAIM = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "true"}},
    "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}}},
}
CSI = {
    "kind": "PersistentVolume",
    "spec": {"capacity": {"storage": "1Gi"}, "csi": {"driver": "ebs.csi.aws.com"}},
}
EBS = {"kind": "PersistentVolume", "spec": {"awsElasticBlockStore": {"volumeID": "<volume-id>"}}}


def test_claim_and_volume_name_each_other() -> None:
    claim, volume = claim_and_volume(CLAIM, CSI, "p-1", "ns", {"run": "r"})
    assert claim["metadata"]["name"] == "p-1"
    assert claim["metadata"]["namespace"] == "ns"
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"] == "ns-p-1"
    assert volume["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": "ns",
        "name": "p-1",
    }
    assert volume["spec"]["csi"]["volumeHandle"] == "ns-p-1"
    assert claim["metadata"]["labels"] == volume["metadata"]["labels"] == {"run": "r"}
    assert "volumeName" not in CLAIM["spec"]  # the template is left alone


def test_ebs_volume_id_is_the_volume_name() -> None:
    _, volume = claim_and_volume(CLAIM, EBS, "p-2", "ns", {})
    assert volume["spec"]["awsElasticBlockStore"]["volumeID"] == "ns-p-2"


def test_csi_node_from_the_strategy() -> None:
    op = NodesOp(
        1, {}, csi_allocatable={"ebs.csi.aws.com": {"count": 39}}, migrated_plugins=("kubernetes.io/aws-ebs",)
    )
    manifest = csi_node("n1", op, {})
    assert manifest is not None
    assert manifest["metadata"]["annotations"] == {
        "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"
    }
    assert manifest["spec"]["drivers"] == [
        {"name": "ebs.csi.aws.com", "nodeID": "n1", "allocatable": {"count": 39}}
    ]
    assert csi_node("n1", NodesOp(1, {}), {}) is None


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def pod(name: str, on: str | None, *claims: str) -> dict[str, Any]:
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"nodeName": on, "volumes": volumes}}


def claim(name: str, *modes: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"volumeName": f"pv-{name}", "accessModes": list(modes) or ["ReadOnlyMany"]},
    }


def volume(claim_name: str, source: str = "csi", zone: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = (
        {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"h-{claim_name}"}}
        if source == "csi"
        else {"awsElasticBlockStore": {"volumeID": f"h-{claim_name}"}}
    )
    if zone:
        term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {"metadata": {"name": f"pv-{claim_name}"}, "spec": spec}


def csi(name: str, count: int, migrated: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": migrated}},
        "spec": {"drivers": [{"name": "ebs.csi.aws.com", "allocatable": {"count": count}}]},
    }


NODES = [node("n1", zone="a"), node("n2", zone="b")]


@pytest.mark.parametrize(
    ("pods", "claims", "volumes", "csi_nodes", "broken"),
    [
        pytest.param([pod("p", "n1", "c")], [claim("c")], [volume("c")], [csi("n1", 1)], 0, id="one of one"),
        # two distinct CSI volumes on n1, limit 1
        pytest.param(
            [pod("p", "n1", "c"), pod("q", "n1", "d")],
            [claim("c"), claim("d")],
            [volume("c"), volume("d")],
            [csi("n1", 1)],
            1,
            id="over the CSI limit",
        ),
        # one volume used twice counts once
        pytest.param(
            [pod("p", "n1", "c"), pod("q", "n1", "c")],
            [claim("c")],
            [volume("c")],
            [csi("n1", 1)],
            0,
            id="shared",
        ),
        # in-tree EBS counts only where the CSINode says it is migrated
        pytest.param(
            [pod("p", "n1", "c"), pod("q", "n1", "d")],
            [claim("c"), claim("d")],
            [volume("c", "ebs"), volume("d", "ebs")],
            [csi("n1", 1)],
            0,
            id="in-tree, not migrated",
        ),
        pytest.param(
            [pod("p", "n1", "c"), pod("q", "n1", "d")],
            [claim("c"), claim("d")],
            [volume("c", "ebs"), volume("d", "ebs")],
            [csi("n1", 1, "kubernetes.io/aws-ebs")],
            1,
            id="in-tree, migrated",
        ),
        pytest.param([pod("p", "n1", "c")], [], [], [], 1, id="claim missing"),
        pytest.param([pod("p", None, "c")], [], [], [], 0, id="pending pods do not count"),
        pytest.param(
            [pod("p", "n1", "c"), pod("q", "n2", "c")],
            [claim("c", "ReadWriteOncePod")],
            [volume("c")],
            [],
            1,
            id="ReadWriteOncePod twice",
        ),
        pytest.param(
            [pod("p", "n1", "c")], [claim("c")], [volume("c", zone="b")], [], 1, id="volume in another zone"
        ),
        pytest.param(
            [pod("p", "n2", "c")], [claim("c")], [volume("c", zone="b")], [], 0, id="volume in its zone"
        ),
    ],
)
def test_broken_volume_constraints(
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    csi_nodes: list[dict[str, Any]],
    broken: int,
) -> None:
    assert len(broken_volume_constraints(pods, NODES, claims, volumes, csi_nodes)) == broken
