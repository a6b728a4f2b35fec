"""kube-scheduler's queueing hints for a pod that lands on a node or changes there: which
unschedulable pods it may help, so that only those are tried again.

- InterPodAffinity (``isSchedulableAfterPodChange``): a pod added on a node helps a pod
  whose required affinity terms it matches, all of them; a pod whose labels change helps
  a pod whose required affinity terms it now matches and did not, or whose required
  anti-affinity terms it matched and no longer does.
- PodTopologySpread (``isSchedulableAfterPodChange``): a pod of the same namespace that a
  constraint's selector matches, added, or with its labels changed (before or after).

A term's namespaces are checked where they are named; a ``namespaceSelector`` is taken
as matching (the namespaces' labels are the filters' business): a hint may let a pod be
tried once too often, never keep one waiting that could go. Pure logic.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.objects.pod import Pod
from scheduler.objects.selectors import PodAffinityTerm
from scheduler.plugins.filters import inter_pod_affinity, pod_topology_spread

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
