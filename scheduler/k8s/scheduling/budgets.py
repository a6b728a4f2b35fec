"""PodDisruptionBudgets kept from a listing and a watch, as kube-scheduler's informer
keeps them for DefaultPreemption: a preemption decision reads them from here and makes
no API call (listing them for each decision cost 80 to 870 ms per preemptor at 50
nodes, with 50 preemptors waiting on the client at once).

A budget that cannot be read (``budget_from_manifest`` raises) is skipped and counted
like any other unreadable object (``scheduler.k8s.client.unreadable``); its previous
version goes too, as a listing for each decision left it out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.framework.preemption_victims import PodDisruptionBudget
from scheduler.k8s.client.unreadable import Skipped, log_unreadable, skipping
from scheduler.objects.fields import FieldReader

KIND = "poddisruptionbudget"  # for log lines, the unreadable-objects metric and the watch thread
PATH = "/apis/policy/v1/poddisruptionbudgets"  # listed and watched over all namespaces
PLURAL = "poddisruptionbudgets"  # the listing's key in ``SchedulerRuntime.list_and_apply``


def budget_key(manifest: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name): the API server's listing order."""
    metadata = manifest.get("metadata") or {}
    return str(metadata.get("namespace") or "default"), str(metadata.get("name"))


def budget_from_manifest(manifest: Mapping[str, Any]) -> PodDisruptionBudget:
    """A ``policy/v1`` PodDisruptionBudget as preemption reads it (raises
    ``SchedulerInputError`` naming the budget and the field)."""
    namespace, name = budget_key(manifest)
    reader = FieldReader(f"poddisruptionbudget {namespace}/{name}")
    spec = reader.mapping(manifest.get("spec"), "spec")
    status = reader.mapping(manifest.get("status"), "status")
    selector = reader.label_selector(spec.get("selector"), "spec.selector")
    allowed = reader.integer(status.get("disruptionsAllowed"), "status.disruptionsAllowed")
    disrupted = reader.mapping(status.get("disruptedPods"), "status.disruptedPods")
    return PodDisruptionBudget(namespace, name, selector, allowed, frozenset(str(k) for k in disrupted))


class DisruptionBudgets:
    """The cluster's budgets by (namespace, name), from watch events and listings."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], PodDisruptionBudget] = {}
        self._listed: list[PodDisruptionBudget] | None = None  # ``all()``'s answer until a change

    def apply(self, event_type: str, manifest: Mapping[str, Any]) -> None:
        """One watch event; a budget that cannot be read raises (``SchedulerInputError``)
        after its previous version is dropped."""
        key = budget_key(manifest)
        self._listed = None
        self._by_key.pop(key, None)
        if event_type != "DELETED":
            self._by_key[key] = budget_from_manifest(manifest)

    def replace(self, manifests: list[dict[str, Any]], skipped: Skipped = log_unreadable) -> None:
        """A listing: exactly its readable budgets (a deletion a restarted watch missed
        goes); each unreadable one goes to ``skipped``."""
        self._by_key.clear()
        self._listed = None
        for manifest in manifests:
            with skipping(KIND, manifest, skipped):
                self.apply("ADDED", manifest)

    def all(self) -> list[PodDisruptionBudget]:
        """Every budget, in the API server's listing order."""
        if self._listed is None:
            self._listed = [self._by_key[key] for key in sorted(self._by_key)]
        return self._listed

    def __len__(self) -> int:
        return len(self._by_key)


async def list_budgets(
    list_with_version: Callable[..., Any], budgets: DisruptionBudgets, skipped: Skipped = log_unreadable
) -> str:
    """List the budgets into ``budgets``; returns the listing's resourceVersion (where
    their watch starts)."""
    items, version = await list_with_version(PATH)
    budgets.replace(items, skipped)
    return str(version)
