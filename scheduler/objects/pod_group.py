"""scheduler-plugins' ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``): the gang a pod
belongs to by its label ``scheduling.x-k8s.io/pod-group``, in the pod's namespace.

Only ``spec.minMember`` decides what rl-scheduler does: no member binds until that
many of the group's pods (those already placed count) can be placed at once.
``spec.scheduleTimeoutSeconds`` is read and checked; rl-scheduler holds no place
between scheduling cycles, so there is nothing for it to time out (docs/scheduling.md, "Gang
scheduling"). ``spec.minResources`` is Coscheduling's quick check of the cluster's
total room before it tries members one by one; placing the members themselves is the
exact check, so it adds nothing here and is not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from scheduler.errors import SchedulerInputError
from scheduler.objects.fields import FieldReader

GROUP: Final = "scheduling.x-k8s.io"
VERSION: Final = "v1alpha1"
PLURAL: Final = "podgroups"
POD_GROUP_LABEL: Final = f"{GROUP}/pod-group"


class PodGroupError(SchedulerInputError):
    """A PodGroup whose spec rl-scheduler cannot follow as written."""


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    min_member: int
    schedule_timeout_s: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_group_key(namespace: str, labels: Mapping[str, str] | None) -> str:
    """``namespace/name`` of the group a pod's labels put it in; "" for none."""
    name = (labels or {}).get(POD_GROUP_LABEL, "")
    return f"{namespace}/{name}" if name else ""


def pod_group_from_manifest(manifest: Mapping[str, Any]) -> PodGroup:
    metadata = manifest.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    name = str(metadata.get("name") or "")
    reader = FieldReader(f"podgroup {namespace}/{name}", PodGroupError)
    spec = reader.mapping(manifest.get("spec"), "spec")
    # The CRD's default and minimum is 1 (omitempty: an absent minMember is 0 in Go,
    # which Coscheduling treats as "any one pod").
    min_member = reader.integer(spec.get("minMember"), "spec.minMember", default=1)
    if min_member < 1:
        raise reader.fail("spec.minMember", f"must be at least 1, got {min_member}")
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None:
        timeout = reader.integer(timeout, "spec.scheduleTimeoutSeconds")
        if timeout < 0:
            raise reader.fail("spec.scheduleTimeoutSeconds", f"must not be negative, got {timeout}")
    return PodGroup(namespace, name, min_member, timeout)
