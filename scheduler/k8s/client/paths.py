"""The collections the scheduler lists and watches, over all namespaces."""

from __future__ import annotations

from scheduler.objects.pod_group import CORE_GROUP, CORE_VERSION, GROUP, PLURAL, VERSION

NODES = "/api/v1/nodes"
NAMESPACES = "/api/v1/namespaces"
PODS = "/api/v1/pods"
PERSISTENT_VOLUME_CLAIMS = "/api/v1/persistentvolumeclaims"
PERSISTENT_VOLUMES = "/api/v1/persistentvolumes"
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
CSI_NODES = "/apis/storage.k8s.io/v1/csinodes"
POD_GROUPS = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
CORE_POD_GROUPS = f"/apis/{CORE_GROUP}/{CORE_VERSION}/{PLURAL}"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
RESOURCE_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
RESOURCE_CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"

# Everything a full listing (``SchedulerRuntime.list_and_apply``) asks for.
LISTED = (
    NODES,
    NAMESPACES,
    PODS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    CSI_NODES,
    POD_GROUPS,
    CORE_POD_GROUPS,
    DEVICE_CLASSES,
    RESOURCE_SLICES,
    RESOURCE_CLAIMS,
)
