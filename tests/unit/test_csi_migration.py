"""Which in-tree volume sources count as which CSI driver's volume, and under what name
(kube's csi-translation-lib, as NodeVolumeLimits reads it)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.objects.csi_migration import in_tree_identity, migrated_driver

EBS = "ebs.csi.aws.com"


@pytest.mark.parametrize(
    ("spec", "labels", "identity"),
    [
        pytest.param({"awsElasticBlockStore": {"volumeID": "vol-1"}}, {}, (EBS, "vol-1"), id="ebs"),
        pytest.param(
            {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}, {}, (EBS, "vol-1"),
            id="ebs, kube's aws:// form",
        ),
        pytest.param(
            {"gcePersistentDisk": {"pdName": "disk-1"}}, {"topology.kubernetes.io/zone": "z1"},
            ("pd.csi.storage.gke.io", "zones/z1/disks/disk-1"), id="gce pd, in its zone",
        ),
        pytest.param(
            {"azureDisk": {"diskURI": "/subscriptions/s/disks/d"}}, {},
            ("disk.csi.azure.com", "/subscriptions/s/disks/d"), id="azure disk",
        ),
        pytest.param({"cinder": {"volumeID": "c-1"}}, {}, ("cinder.csi.openstack.org", "c-1"), id="cinder"),
        pytest.param({"portworxVolume": {"volumeID": "p-1"}}, {}, ("pxd.portworx.com", "p-1"), id="portworx"),
        pytest.param({"hostPath": {"path": "/mnt"}}, {}, ("", ""), id="not migrated: not counted"),
        pytest.param({"awsElasticBlockStore": {"volumeID": ""}}, {}, ("", ""), id="no ID: not counted"),
        pytest.param({"awsElasticBlockStore": "vol-1"}, {}, ("", ""), id="not a mapping: not counted"),
    ],
)  # fmt: skip
def test_in_tree_sources_are_named_as_their_csi_driver_names_them(
    spec: dict[str, Any], labels: dict[str, str], identity: tuple[str, str]
) -> None:
    assert in_tree_identity(spec, labels) == identity


@pytest.mark.parametrize(
    ("provisioner", "driver"),
    [("kubernetes.io/aws-ebs", EBS), ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"), (EBS, EBS),
     ("kubernetes.io/no-provisioner", "kubernetes.io/no-provisioner")],
)  # fmt: skip
def test_an_in_tree_provisioner_counts_as_its_csi_driver(provisioner: str, driver: str) -> None:
    assert migrated_driver(provisioner) == driver
