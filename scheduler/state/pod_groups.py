"""Placed pods grouped by what inter-pod affinity reads of them, with their nodes.

InterPodAffinity asks, every cycle, which placed pods a term matches (by namespace and
labels) and which placed pods' terms match the incoming pod. Pods with the same
namespace and labels answer the first alike, and pods that also carry the same affinity
terms answer the second alike, so the state keeps them in groups, each with how many of
its pods sit on each node row: a cycle evaluates a term once per group instead of once
per pod (kube-scheduler keeps per-node ``PodsWithAffinity`` lists for the same reason;
workloads of many replicas make groups few). ``ClusterState`` updates the groups on
every place, remove, relabel and node removal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.objects.pod import Pod
from scheduler.objects.selectors import PodAffinity

IntArray = npt.NDArray[np.int64]
LabelsKey = tuple[str, frozenset[tuple[str, str]]]
TermsKey = tuple[str, frozenset[tuple[str, str]], PodAffinity, PodAffinity]


@dataclass(slots=True)
class PodGroup:
    """Placed pods alike in namespace and labels (and, in ``PodGroups.with_terms``, in
    their affinity terms): ``pod`` is one of them; ``on_node`` counts them per node row."""

    pod: Pod
    on_node: dict[int, int] = field(default_factory=dict)
    _arrays: tuple[IntArray, IntArray] | None = None

    def arrays(self) -> tuple[IntArray, IntArray]:
        """``(node rows, pods on each)``, computed once per change."""
        if self._arrays is None:
            nodes = np.fromiter(self.on_node.keys(), np.int64, len(self.on_node))
            counts = np.fromiter(self.on_node.values(), np.int64, len(self.on_node))
            self._arrays = (nodes, counts)
        return self._arrays

    def _add(self, node: int, amount: int) -> None:
        count = self.on_node.get(node, 0) + amount
        if count:
            self.on_node[node] = count
        else:
            del self.on_node[node]
        self._arrays = None


def labels_key(pod: Pod) -> LabelsKey:
    return pod.namespace, frozenset(pod.labels.items())


def terms_key(pod: Pod) -> TermsKey:
    return pod.namespace, frozenset(pod.labels.items()), pod.pod_affinity, pod.pod_anti_affinity


@dataclass(slots=True)
class _Member:
    labels: LabelsKey
    terms: TermsKey | None
    node: int


class PodGroups:
    """``by_labels``: every placed pod; ``with_terms``: the placed pods with any pod
    affinity or anti-affinity term (kube's ``PodsWithAffinity``); ``with_required_anti``:
    the keys of ``with_terms`` whose pods have required anti-affinity
    (``PodsWithRequiredAntiAffinity``). Empty groups are dropped."""

    def __init__(self) -> None:
        self.by_labels: dict[LabelsKey, PodGroup] = {}
        self.with_terms: dict[TermsKey, PodGroup] = {}
        self.with_required_anti: set[TermsKey] = set()
        self._members: dict[str, _Member] = {}

    def __contains__(self, pod_key: str) -> bool:
        return pod_key in self._members

    def add(self, pod: Pod, node: int) -> None:
        key = labels_key(pod)
        self.by_labels.setdefault(key, PodGroup(pod))._add(node, 1)
        terms: TermsKey | None = None
        if pod.has_pod_affinity_terms:
            terms = terms_key(pod)
            self.with_terms.setdefault(terms, PodGroup(pod))._add(node, 1)
            if pod.pod_anti_affinity.required:
                self.with_required_anti.add(terms)
        self._members[pod.key] = _Member(key, terms, node)

    def remove(self, pod_key: str) -> None:
        member = self._members.pop(pod_key)
        group = self.by_labels[member.labels]
        group._add(member.node, -1)
        if not group.on_node:
            del self.by_labels[member.labels]
        if member.terms is not None:
            group = self.with_terms[member.terms]
            group._add(member.node, -1)
            if not group.on_node:
                del self.with_terms[member.terms]
                self.with_required_anti.discard(member.terms)

    def move(self, pod: Pod, node: int) -> None:
        """``pod`` (placed) now reads as given, on row ``node``."""
        self.remove(pod.key)
        self.add(pod, node)
