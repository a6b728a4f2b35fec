"""A gang's PodGroup, two ways in, one model inside:

- scheduler-plugins' ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``): the gang a pod
  belongs to by its label ``scheduling.x-k8s.io/pod-group``, in the pod's namespace;
- Kubernetes' own ``PodGroup`` (``scheduling.k8s.io/v1alpha2``, the Workload API, alpha
  in 1.36 behind the ``GenericWorkload`` gate): the group a pod names in
  ``spec.schedulingGroup.podGroupName``. ``spec.schedulingPolicy`` is ``gang``
  (``minCount``: what ``minMember`` is to the other) or ``basic`` (no gang: each pod is
  scheduled on its own). Its keys carry the group's API (``scheduling.k8s.io:ns/name``),
  so two groups of the same name in both APIs stay apart.

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
CORE_GROUP: Final = "scheduling.k8s.io"
CORE_VERSION: Final = "v1alpha2"


class PodGroupError(SchedulerInputError):
    """A PodGroup whose spec rl-scheduler cannot follow as written."""


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    min_member: int
    schedule_timeout_s: int | None = None
    api: str = GROUP
    # False for the Workload API's basic policy: its pods are scheduled one by one.
    gang: bool = True

    @property
    def key(self) -> str:
        return group_key(self.namespace, self.name, self.api)


def group_key(namespace: str, name: str, api: str = GROUP) -> str:
    """A group's key: ``namespace/name``, prefixed ``scheduling.k8s.io:`` for the
    Workload API's."""
    return f"{namespace}/{name}" if api == GROUP else f"{api}:{namespace}/{name}"


def pod_group_key(namespace: str, labels: Mapping[str, str] | None, scheduling_group: str = "") -> str:
    """The key of the group a pod is in: the Workload API's PodGroup it names in
    ``spec.schedulingGroup``, else scheduler-plugins' its label names; "" for none."""
    if scheduling_group:
        return group_key(namespace, scheduling_group, CORE_GROUP)
    name = (labels or {}).get(POD_GROUP_LABEL, "")
    return group_key(namespace, name) if name else ""


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


def core_pod_group_from_manifest(manifest: Mapping[str, Any]) -> PodGroup:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup: exactly one of
    ``spec.schedulingPolicy.basic`` and ``.gang`` (with ``minCount`` of at least 1)."""
    metadata = manifest.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    name = str(metadata.get("name") or "")
    reader = FieldReader(f"podgroup.{CORE_GROUP} {namespace}/{name}", PodGroupError)
    spec = reader.mapping(manifest.get("spec"), "spec")
    policy = reader.mapping(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    basic, gang = policy.get("basic"), policy.get("gang")
    if (basic is None) == (gang is None):
        raise reader.fail("spec.schedulingPolicy", "exactly one of basic and gang must be set")
    if basic is not None:
        reader.mapping(basic, "spec.schedulingPolicy.basic")
        return PodGroup(namespace, name, 1, api=CORE_GROUP, gang=False)
    gang = reader.mapping(gang, "spec.schedulingPolicy.gang")
    min_count = reader.integer(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount")
    if min_count < 1:
        raise reader.fail("spec.schedulingPolicy.gang.minCount", f"must be at least 1, got {min_count}")
    return PodGroup(namespace, name, min_count, api=CORE_GROUP)
