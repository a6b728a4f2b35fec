"""kube-scheduler's queueing hints for a pod that lands on a node, changes there or is
deleted from it: which unschedulable pods it may help, so that only those are tried
again.

- InterPodAffinity (``isSchedulableAfterPodChange``): a pod added on a node helps a pod
  whose required affinity terms it matches, all of them; a pod whose labels change helps
  a pod whose required affinity terms it now matches and did not, or whose required
  anti-affinity terms it matched and no longer does.
- PodTopologySpread (``isSchedulableAfterPodChange``): a pod of the same namespace that a
  constraint's selector matches, added, or with its labels changed (before or after).

A pod deleted from its node (``deletion_helped``) helps a pod whose nodes rejected it
for a reason a deletion may lift: room (NodeResourcesFit queues on any deletion), a
host port the deleted pod held (NodePorts), anti-affinity either way (InterPodAffinity:
the deleted pod matched the pod's anti-affinity terms, or the pod matched the deleted
pod's), a spread constraint's selector the deleted pod matched (PodTopologySpread),
a ``ReadWriteOncePod`` claim or an inline disk the deleted pod held
(VolumeRestrictions), other volumes, and any reason no hint here knows. Taints, node affinity and name, an
unschedulable node, a missing topology label, required affinity and volume zones are
not lifted by a deletion (kube's plugins register no pod deletion for them, or their
hint skips it).

A node added or changed (``node_change_helped``, kube's plugins' node hints) helps a
pod its nodes rejected: for node affinity or selector, when the node matches them now
and did not before; for taints, when the pod tolerates the node's (``NoSchedule``,
``NoExecute``) now and did not before; for an unschedulable node, when the node turned
schedulable (or the pod tolerates its taint) and was not; for a node name, when the
node is that one, added; for room (``Insufficient <resource>``), when the node alone
has room for the pod's request and is new or has more of it allocatable; for ``Too
many pods``, when the node is new or allows more; for spreading, inter-pod affinity
and volume zones, when the node is new or its labels changed; and for any reason no
hint here knows. A new node counts as failing each verdict before it was added. So a
node whose taints change while the pod tolerates them all along (the node lifecycle
controller adds and removes its own) retries no pod for the taints.

A volume object added or changed (a claim, a volume, a storage class, a CSINode;
``volume_change_helped``) helps a pod rejected for any reason but those no volume
decides: room, host ports, taints, node affinity and name, an unschedulable node,
spreading and inter-pod affinity (kube registers those objects' events only for its
volume plugins). A claim's change helps only a pod that uses the claim (each volume
plugin's claim hint checks that), and only a claim's change may lift a
VolumeRestrictions conflict.

A ResourceClaim added, or changed in its spec or status (``claim_change_helped``,
DynamicResources' ``isSchedulableAfterClaimChange``), helps only a pod that uses it;
a claim whose allocation is dropped or replaced frees devices, and like a DeviceClass or
ResourceSlice change it may help any pod (the runtime moves them all).

A term's namespaces are checked where they are named; a ``namespaceSelector`` is taken
as matching (the namespaces' labels are the filters' business): a hint may let a pod be
tried once too often, never keep one waiting that could go. Pure logic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scheduler.objects.node import Node
from scheduler.objects.pod import Pod
from scheduler.objects.selectors import PodAffinityTerm
from scheduler.plugins.filters import (
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    pod_topology_spread,
    taint_toleration,
    volume_restrictions,
    volume_zone,
)

# What the queue keeps of an unschedulable pod is why its nodes said no (the filters'
# reasons): those of the two plugins whose rejections a pod may lift.
AFFINITY_REASONS = frozenset(
    {
        inter_pod_affinity.REASON_AFFINITY,
        inter_pod_affinity.REASON_ANTI_AFFINITY,
        inter_pod_affinity.REASON_EXISTING_ANTI_AFFINITY,
    }
)
SPREAD_REASONS = frozenset({pod_topology_spread.REASON_SKEW})
HINTED_REASONS = AFFINITY_REASONS | SPREAD_REASONS
NOT_LIFTED_BY_DELETION = frozenset(
    {
        taint_toleration.REASON,
        node_affinity.REASON,
        node_name.REASON,
        node_unschedulable.REASON,
        pod_topology_spread.REASON_MISSING_LABEL,
        inter_pod_affinity.REASON_AFFINITY,
        volume_zone.REASON,
    }
)
ANTI_AFFINITY_REASONS = frozenset(
    {inter_pod_affinity.REASON_ANTI_AFFINITY, inter_pod_affinity.REASON_EXISTING_ANTI_AFFINITY}
)


def _term_matches(term: PodAffinityTerm, owner: Pod, other: Pod) -> bool:
    if term.label_selector is None:
        return False
    if term.namespace_selector is None:
        in_namespace = (
            other.namespace in term.namespaces if term.namespaces else other.namespace == owner.namespace
        )
        if not in_namespace:
            return False
    return term.label_selector.matches(other.labels)


def _matches_all(terms: Iterable[PodAffinityTerm], owner: Pod, other: Pod) -> bool:
    listed = tuple(terms)
    return bool(listed) and all(_term_matches(t, owner, other) for t in listed)


def _matches_any(terms: Iterable[PodAffinityTerm], owner: Pod, other: Pod) -> bool:
    return any(_term_matches(t, owner, other) for t in terms)


def affinity_helped(pending: Pod, before: Pod | None, after: Pod) -> bool:
    """Whether ``after`` (``before`` it changed; None: just placed) may lift an
    InterPodAffinity rejection of ``pending``."""
    terms = pending.pod_affinity.required
    if before is None:
        return _matches_all(terms, pending, after)
    if not _matches_all(terms, pending, before) and _matches_all(terms, pending, after):
        return True
    anti = pending.pod_anti_affinity.required
    return _matches_any(anti, pending, before) and not _matches_any(anti, pending, after)


def spread_helped(pending: Pod, before: Pod | None, after: Pod) -> bool:
    """Whether ``after`` (``before`` it changed; None: just placed) may lift a
    PodTopologySpread rejection of ``pending``."""
    if after.namespace != pending.namespace:
        return False
    selectors = [c.label_selector for c in pending.topology_spread if c.label_selector is not None]

    def matched(pod: Pod) -> bool:
        return any(s.matches(pod.labels) for s in selectors)

    if before is None:
        return matched(after)
    return dict(before.labels) != dict(after.labels) and (matched(before) or matched(after))


def helped(pending: Pod, reasons: frozenset[str] | None, before: Pod | None, after: Pod) -> bool:
    """Whether a pod its nodes rejected for ``reasons`` (None: not known yet, any) may be
    helped by ``after`` landing on its node (``before`` None) or changing there."""

    def rejected_for(plugin_reasons: frozenset[str]) -> bool:
        return reasons is None or not reasons.isdisjoint(plugin_reasons)

    return (rejected_for(AFFINITY_REASONS) and affinity_helped(pending, before, after)) or (
        rejected_for(SPREAD_REASONS) and spread_helped(pending, before, after)
    )


def _reason_lifted_by_deletion(reason: str, pending: Pod, deleted: Pod) -> bool:
    if reason in NOT_LIFTED_BY_DELETION:
        return False
    if reason == node_ports.REASON:
        return any(mine.conflicts(theirs) for mine in pending.host_ports for theirs in deleted.host_ports)
    if reason in ANTI_AFFINITY_REASONS:
        return _matches_any(pending.pod_anti_affinity.required, pending, deleted) or _matches_any(
            deleted.pod_anti_affinity.required, deleted, pending
        )
    if reason in SPREAD_REASONS:
        return spread_helped(pending, None, deleted)
    if reason == volume_restrictions.READ_WRITE_ONCE_POD_CONFLICT:
        return volume_restrictions.shares_a_claim(pending, deleted)
    if reason == volume_restrictions.DISK_CONFLICT:
        return volume_restrictions.disk_conflict(pending, deleted)
    return True  # room, volume counts, devices, and reasons no hint here knows


def deletion_helped(pending: Pod, reasons: frozenset[str] | None, deleted: Pod) -> bool:
    """Whether ``deleted`` leaving its node may help a pod its nodes rejected for
    ``reasons`` (None: not known yet, any)."""
    if reasons is None:
        return True
    return any(_reason_lifted_by_deletion(reason, pending, deleted) for reason in reasons)


# Rejections a node's labels decide, beyond node affinity: lifted by a new node or new labels.
LABEL_REASONS = (
    AFFINITY_REASONS | SPREAD_REASONS | {pod_topology_spread.REASON_MISSING_LABEL, volume_zone.REASON}
)
INSUFFICIENT = node_resources_fit.insufficient("")


def _more_allocatable(resource: str, before: Node, after: Node) -> bool:
    return after.allocatable.get(resource, 0) > before.allocatable.get(resource, 0)


def _room_for(pending: Pod, resource: str, before: Node | None, after: Node) -> bool:
    """The node, empty, has room for the pod's request of ``resource``, and is new or
    has more of it than before (kube's NodeResourcesFit: ``isFit`` on the node alone,
    then ``haveAnyRequestedResourcesIncreased``)."""
    if after.allocatable.get(resource, 0) < pending.requests.get(resource, 0):
        return False
    return before is None or _more_allocatable(resource, before, after)


def _tolerated(pending: Pod, node: Node) -> bool:
    return taint_toleration.tolerates(pending.tolerations, node.taints)


def _schedulable_for(pending: Pod, node: Node) -> bool:
    return not node.unschedulable or node_unschedulable.tolerates_cordon(pending)


def _turned_yes(verdict: Callable[[Pod, Node], bool], pending: Pod, before: Node | None, after: Node) -> bool:
    """kube's node hints for a verdict of the node alone: it helps only when it turns
    from no to yes (a new node counts as no before); a node that passed the filter
    before the change and still does, whatever else changed on it, lifts nothing."""
    return verdict(pending, after) and (before is None or not verdict(pending, before))


def _reason_lifted_by_node(reason: str, pending: Pod, before: Node | None, after: Node) -> bool:
    if reason == node_affinity.REASON:
        return _turned_yes(node_affinity.required_affinity_matches, pending, before, after)
    if reason == taint_toleration.REASON:
        return _turned_yes(_tolerated, pending, before, after)
    if reason == node_unschedulable.REASON:
        return _turned_yes(_schedulable_for, pending, before, after)
    if reason == node_name.REASON:
        return before is None and after.name == pending.node_name
    if reason == node_resources_fit.TOO_MANY_PODS:
        return before is None or _more_allocatable("pods", before, after)
    if reason.startswith(INSUFFICIENT):
        return _room_for(pending, reason.removeprefix(INSUFFICIENT), before, after)
    if reason in LABEL_REASONS:
        return before is None or dict(before.labels) != dict(after.labels)
    return True  # host ports, volumes, GPUs, devices, and reasons no hint here knows


def node_change_helped(
    pending: Pod, reasons: frozenset[str] | None, before: Node | None, after: Node
) -> bool:
    """Whether node ``after`` (``before`` it changed; None: just added) may help a pod
    its nodes rejected for ``reasons`` (None: not known yet, any)."""
    if reasons is None:
        return True
    return any(_reason_lifted_by_node(reason, pending, before, after) for reason in reasons)


# Rejections no volume object decides (kube's volume events reach only its volume plugins).
NOT_LIFTED_BY_VOLUMES = (
    NOT_LIFTED_BY_DELETION - {volume_zone.REASON}
    | AFFINITY_REASONS
    | SPREAD_REASONS
    | {node_ports.REASON, node_resources_fit.TOO_MANY_PODS}
)


# VolumeRestrictions' conflicts: only a PersistentVolumeClaim's event (of a claim the pod
# uses) reaches that plugin; a volume, storage class or CSINode does not.
CONFLICT_REASONS = frozenset(
    {volume_restrictions.DISK_CONFLICT, volume_restrictions.READ_WRITE_ONCE_POD_CONFLICT}
)


def uses_claim(pending: Pod, claim: str) -> bool:
    """Whether the pod mounts the PersistentVolumeClaim ``claim`` (namespace/name), its
    generic ephemeral volumes' claims included."""
    return any(f"{pending.namespace}/{volume.claim}" == claim for volume in pending.volumes)


def volume_change_helped(pending: Pod, reasons: frozenset[str] | None, claim: str | None = None) -> bool:
    """Whether a volume object's change may help a pod its nodes rejected for
    ``reasons`` (None: not known yet, any). ``claim``: the change was to that
    PersistentVolumeClaim (namespace/name), which helps only a pod that uses it (the
    claim hints of VolumeBinding, VolumeRestrictions, VolumeZone and NodeVolumeLimits);
    any other volume object never lifts a conflict of VolumeRestrictions."""
    if claim is not None and not uses_claim(pending, claim):
        return False
    if reasons is None:
        return True
    kept = NOT_LIFTED_BY_VOLUMES if claim is not None else NOT_LIFTED_BY_VOLUMES | CONFLICT_REASONS
    return any(r not in kept and not r.startswith(INSUFFICIENT) for r in reasons)


def claim_change_helped(pending: Pod, claim: str) -> bool:
    """Whether a change of the claim ``claim`` (namespace/name) that freed no device may
    help ``pending``: only when the pod uses that claim (by name, its template's claims
    once made)."""
    names = pending.resource_claims
    return any(name is not None and f"{pending.namespace}/{name}" == claim for name in names)
