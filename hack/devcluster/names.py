"""Label, annotation and resource names shared by the dev-cluster tools.

The GPU names are the project's conventions: HAMi's device protocol, from
``scheduler.resources.gpu`` and ``scheduler.resources.hami``.
"""

from typing import Final

from scheduler.objects import topology
from scheduler.resources.gpu import (
    GPU_CORES_RESOURCE,
    GPU_MEMORY_PERCENT_RESOURCE,
    GPU_RESOURCE,
    USE_GPU_TYPE,
)
from scheduler.resources.hami import REGISTER_ANNOTATION

__all__ = [
    "GPU_CORES_RESOURCE",
    "GPU_MEMORY_PERCENT_RESOURCE",
    "GPU_RESOURCE",
    "REGISTER_ANNOTATION",
    "USE_GPU_TYPE",
]

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
# The learned policy's graph links nodes by these (scheduler.objects.topology).
ZONE_LABEL: Final = topology.ZONE_LABEL
RACK_LABEL: Final = topology.RACK_LABEL
# KWOK's documented node conventions: the annotation makes the kwok controller
# manage the node; the label and taint keep real workloads off fake nodes.
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE: Final = "fake"
KWOK_TYPE_LABEL: Final = "type"
KWOK_TYPE_VALUE: Final = "kwok"
KWOK_TAINT_KEY: Final = "kwok.x-k8s.io/node"

# Everything the tools create carries this label, so `clean` removes only that.
GENERATED_BY_LABEL: Final = "rl-scheduler.io/generated-by"
GENERATED_BY_VALUE: Final = "devcluster"
GENERATED_SELECTOR: Final = f"{GENERATED_BY_LABEL}={GENERATED_BY_VALUE}"
# One workload run; lets two generators share a namespace.
RUN_LABEL: Final = "rl-scheduler.io/workload-run"
# When a generated pod should go away (RFC 3339), for `clean --expired`.
EXPIRES_ANNOTATION: Final = "rl-scheduler.io/expires-at"

DEFAULT_SCHEDULER: Final = "default-scheduler"
DEFAULT_NAMESPACE: Final = "rl-workload"
# Never pulled: KWOK pretends to run containers.
PLACEHOLDER_IMAGE: Final = "registry.k8s.io/pause:3.10"
