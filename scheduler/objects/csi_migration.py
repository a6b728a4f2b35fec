"""In-tree volume plugins that kube-scheduler's NodeVolumeLimits (CSILimits) counts as
the CSI driver they migrated to, and how a volume of each is named there, after
``k8s.io/csi-translation-lib`` (v1.36): ``isCSIMigrationOn`` is true for these five on
any node with a CSINode, so their persistent volumes, and claims whose class names the
in-tree provisioner, count against the CSI driver's limit.

The handle only has to tell volumes apart as kube's translated handle does (two pods on
one volume count once): the volume's ID, with AWS EBS's ``aws://<zone>/vol-...`` form
cut to ``vol-...`` and GCE PD's disk name qualified by its zone label, as the
translations do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# in-tree plugin -> (PersistentVolume source field, CSI driver, the source's ID field)
IN_TREE: Final[dict[str, tuple[str, str, str]]] = {
    "kubernetes.io/aws-ebs": ("awsElasticBlockStore", "ebs.csi.aws.com", "volumeID"),
    "kubernetes.io/gce-pd": ("gcePersistentDisk", "pd.csi.storage.gke.io", "pdName"),
    "kubernetes.io/azure-disk": ("azureDisk", "disk.csi.azure.com", "diskURI"),
    "kubernetes.io/cinder": ("cinder", "cinder.csi.openstack.org", "volumeID"),
    "kubernetes.io/portworx-volume": ("portworxVolume", "pxd.portworx.com", "volumeID"),
}
ZONE_LABELS: Final = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")


def migrated_driver(provisioner: str) -> str:
    """The CSI driver an in-tree provisioner migrated to; the provisioner itself otherwise."""
    entry = IN_TREE.get(provisioner)
    return entry[1] if entry is not None else provisioner


def in_tree_identity(spec: Mapping[str, Any], labels: Mapping[str, str]) -> tuple[str, str]:
    """(CSI driver, handle) of a PersistentVolume spec with a migrated in-tree source
    whose ID is a non-empty string; ("", "") otherwise."""
    for plugin, (source, driver, id_field) in IN_TREE.items():
        raw = spec.get(source)
        if not isinstance(raw, Mapping):
            continue
        volume_id = raw.get(id_field)
        if not isinstance(volume_id, str) or not volume_id:
            return "", ""
        if plugin == "kubernetes.io/aws-ebs" and volume_id.startswith("aws://"):
            volume_id = volume_id.removeprefix("aws://").strip("/").rpartition("/")[2]
        elif plugin == "kubernetes.io/gce-pd":
            zone = next((labels[key] for key in ZONE_LABELS if labels.get(key)), "UNSPECIFIED")
            volume_id = f"zones/{zone}/disks/{volume_id}"
        return driver, volume_id
    return "", ""
