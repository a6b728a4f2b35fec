"""InterPodAffinity (filter): required pod affinity and anti-affinity, of the incoming
pod and of the pods already placed.

A term (``topologyKey``, selector, namespaces) matches a pod when the pod's namespace is
in the term's namespaces, or its labels match ``namespaceSelector`` (an empty selector
matches every namespace), and the pod's labels match ``labelSelector`` (a missing one
matches nothing). With neither ``namespaces`` nor ``namespaceSelector`` the term means
the namespace of the pod that owns it. ``matchLabelKeys`` / ``mismatchLabelKeys`` add
``key In (value)`` / ``key NotIn (value)`` with the owner's label values, as the API
server does when the pod is created.

Domains are (topologyKey, value) pairs; pods on nodes without the key count nowhere.
Over all placed pods the cycle counts, per domain:

- affinity: pods matching *all* the incoming pod's affinity terms, once per term;
- anti-affinity: per incoming anti-affinity term, the pods it matches;
- existing: per term of a placed pod's required anti-affinity, 1 if it matches the
  incoming pod.

A node is then rejected, first reason wins (kube's order):

1. ``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable) when it
   lacks a term's topology key, or some term's domain on it has count 0 -- unless no pod
   anywhere counts and the pod matches all its own terms (the first pod of a group with
   affinity to itself);
2. ``node(s) didn't match pod anti-affinity rules`` (Unschedulable) when a term's domain
   on it has a matching pod (a node without the key passes that term);
3. ``node(s) didn't satisfy existing pods anti-affinity rules`` (Unschedulable) when one
   of its labels is a domain with an existing pod's matching anti-affinity term.

Placed pods are read by group (``ClusterState.pod_groups``: pods alike in namespace and
labels, and in their terms): a term is evaluated once per group and the group's pods are
added per node at once; a group's required anti-affinity terms are resolved once.

PreFilter SKIPs when the pod has no required terms and no placed pod's required
anti-affinity matches it. Namespace labels come from ``CycleContext.namespace_labels``;
a namespace missing there has no labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scheduler.framework.plugin import CycleContext, FilterBase, Rejection
from scheduler.framework.status import SKIP, SUCCESS, Code, Status
from scheduler.objects.pod import Pod
from scheduler.objects.selectors import LabelSelector, PodAffinityTerm, Requirement
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.pod_groups import PodGroup, TermsKey

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

NamespaceLabels = Mapping[str, Mapping[str, str]]
# Topology key -> matching pods (or, for the score, signed weights) per domain
# (``label_domains`` ids), then a 0 for id -1.
DomainCounts = dict[str, IntArray]


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A ``PodAffinityTerm`` resolved against the pod that owns it (kube's
    ``framework.AffinityTerm``)."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None

    @classmethod
    def resolve(cls, term: PodAffinityTerm, owner: Pod) -> AffinityTerm:
        selector = term.label_selector
        # The API server leaves a nil selector alone: it matches nothing either way.
        if selector is not None and (term.match_label_keys or term.mismatch_label_keys):
            labels = owner.labels
            extra = tuple(Requirement(k, "In", (labels[k],)) for k in term.match_label_keys if k in labels)
            extra += tuple(
                Requirement(k, "NotIn", (labels[k],)) for k in term.mismatch_label_keys if k in labels
            )
            selector = LabelSelector(selector.match_labels, selector.match_expressions + extra)
        if not term.namespaces and term.namespace_selector is None:
            namespaces = frozenset({owner.namespace})
        else:
            namespaces = frozenset(term.namespaces)
        return cls(term.topology_key, selector, namespaces, term.namespace_selector)

    def matches(self, pod: Pod, namespace_labels: NamespaceLabels) -> bool:
        if self.selector is None:
            return False
        in_namespace = pod.namespace in self.namespaces or (
            self.namespace_selector is not None
            and self.namespace_selector.matches(namespace_labels.get(pod.namespace, {}))
        )
        return in_namespace and self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class _Counts:
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    affinity_counts: DomainCounts
    anti_affinity_counts: DomainCounts
    existing_counts: DomainCounts
    matches_own_affinity: bool


class InterPodAffinity(FilterBase):
    name = "InterPodAffinity"

    def pre_filter(self, ctx: CycleContext) -> Status:
        pod, state, ns_labels = ctx.pod, ctx.state, ctx.namespace_labels
        affinity = tuple(AffinityTerm.resolve(t, pod) for t in pod.pod_affinity.required)
        anti = tuple(AffinityTerm.resolve(t, pod) for t in pod.pod_anti_affinity.required)
        groups = state.pod_groups
        existing: DomainCounts = {}
        for key in groups.with_required_anti:
            group = groups.with_terms[key]
            for term, resolved in zip(
                group.pod.pod_anti_affinity.required, resolved_terms(key, group.pod, "required"), strict=True
            ):
                if resolved.matches(pod, ns_labels):
                    add_group_to_domains(existing, state, term.topology_key, group)
        if not affinity and not anti and not existing:
            return SKIP
        affinity_counts: DomainCounts = {}
        anti_counts: DomainCounts = {}
        if affinity or anti:
            for group in groups.by_labels.values():
                other = group.pod
                if affinity and all(t.matches(other, ns_labels) for t in affinity):
                    for t in affinity:
                        add_group_to_domains(affinity_counts, state, t.topology_key, group)
                for t in anti:
                    if t.matches(other, ns_labels):
                        add_group_to_domains(anti_counts, state, t.topology_key, group)
        matches_own = bool(affinity) and all(t.matches(pod, ns_labels) for t in affinity)
        ctx.data[self.name] = _Counts(affinity, anti, affinity_counts, anti_counts, existing, matches_own)
        return SUCCESS

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        counts: _Counts = ctx.data[self.name]
        state = ctx.state
        no_affinity = np.zeros(nodes.size, np.bool_)
        if counts.affinity:
            has_keys = np.ones(nodes.size, np.bool_)
            pods_exist = np.ones(nodes.size, np.bool_)
            for t in counts.affinity:
                has_keys &= state.label_domains(t.topology_key).ids[nodes] >= 0
                pods_exist &= count_at(counts.affinity_counts, state, t.topology_key, nodes) > 0
            # No pod anywhere counts (entries only ever go up) and the pod matches its own
            # terms: it may be the first of its group, so any node with the keys will do.
            first_of_group = not counts.affinity_counts and counts.matches_own_affinity
            no_affinity = ~has_keys | ~(pods_exist | first_of_group)
        anti = np.zeros(nodes.size, np.bool_)
        for t in counts.anti_affinity:
            anti |= count_at(counts.anti_affinity_counts, state, t.topology_key, nodes) > 0
        existing = np.zeros(nodes.size, np.bool_)
        for key in counts.existing_counts:
            existing |= count_at(counts.existing_counts, state, key, nodes) > 0
        # One reason per node, in kube's order.
        anti &= ~no_affinity
        existing &= ~(no_affinity | anti)
        return [
            Rejection(REASON_AFFINITY, no_affinity, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            Rejection(REASON_ANTI_AFFINITY, anti, Code.UNSCHEDULABLE),
            Rejection(REASON_EXISTING_ANTI_AFFINITY, existing, Code.UNSCHEDULABLE),
        ]


def add_to_domain(counts: DomainCounts, state: ClusterState, key: str, node: int, amount: int = 1) -> None:
    """Add ``amount`` (one pod) to ``node``'s ``key`` domain; nowhere if it lacks the key."""
    domains = state.label_domains(key)
    domain = int(domains.ids[node])
    if domain < 0:
        return
    if key not in counts:
        counts[key] = np.zeros(domains.count + 1, np.int64)
    counts[key][domain] += amount


def add_group_to_domains(
    counts: DomainCounts, state: ClusterState, key: str, group: PodGroup, sign: int = 1
) -> None:
    """Add ``sign`` per pod of ``group`` to its nodes' ``key`` domains (nowhere on nodes
    without the key; no entry for ``key`` when none of its nodes has it, as
    ``add_to_domain`` pod by pod)."""
    domains = state.label_domains(key)
    nodes, pods = group.arrays()
    ids = domains.ids[nodes]
    has_key = ids >= 0
    if not has_key.any():
        return
    if key not in counts:
        counts[key] = np.zeros(domains.count + 1, np.int64)
    np.add.at(counts[key], ids[has_key], sign * pods[has_key])


_RESOLVED: dict[tuple[TermsKey, str], tuple[AffinityTerm, ...]] = {}
_MAX_RESOLVED = 4096


def resolved_terms(group_key: TermsKey, owner: Pod, kind: str) -> tuple[AffinityTerm, ...]:
    """The required (``kind`` "required") or preferred ("affinity", "anti") terms of
    ``owner``, a placed pod of the group ``group_key``, resolved once for the group: its
    pods share namespace, labels and terms, so they resolve alike."""
    found = _RESOLVED.get((group_key, kind))
    if found is None:
        if kind == "required":
            terms = owner.pod_anti_affinity.required
        elif kind == "required-affinity":
            terms = owner.pod_affinity.required
        elif kind == "affinity":
            terms = tuple(w.term for w in owner.pod_affinity.preferred)
        else:
            terms = tuple(w.term for w in owner.pod_anti_affinity.preferred)
        if len(_RESOLVED) >= _MAX_RESOLVED:
            _RESOLVED.clear()
        found = _RESOLVED[(group_key, kind)] = tuple(AffinityTerm.resolve(t, owner) for t in terms)
    return found


def count_at(counts: DomainCounts, state: ClusterState, key: str, nodes: IntArray) -> IntArray:
    """The count of each node's ``key`` domain (0 without the key or without pods)."""
    per_domain = counts.get(key)
    if per_domain is None:
        return np.zeros(nodes.size, np.int64)
    # Id -1 (no key) reads the trailing 0.
    result: IntArray = per_domain[state.label_domains(key).ids[nodes]]
    return result
