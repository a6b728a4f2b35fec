"""PodDisruptionBudgets kept from their listing and watch, as preemption reads them."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from scheduler.errors import SchedulerInputError
from scheduler.k8s.scheduling.budgets import PATH, DisruptionBudgets, list_budgets


def budget(namespace: str, name: str, allowed: Any = 1) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}},
        "status": {"disruptionsAllowed": allowed},
    }


class Skips:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, kind: str, manifest: Any, error: Exception) -> None:
        assert isinstance(error, SchedulerInputError)
        self.seen.append((kind, f"{manifest['metadata']['namespace']}/{manifest['metadata']['name']}"))


Event = tuple[str, dict[str, Any]]


@pytest.mark.parametrize(
    ("events", "kept"),
    [
        pytest.param([("ADDED", budget("b", "x")), ("ADDED", budget("a", "y"))],
                     [("a", "y", 1), ("b", "x", 1)], id="listed in the API's order: namespace, name"),
        pytest.param([("ADDED", budget("a", "x")), ("MODIFIED", budget("a", "x", 0))],
                     [("a", "x", 0)], id="an update replaces the budget"),
        pytest.param([("ADDED", budget("a", "x")), ("DELETED", budget("a", "x"))], [], id="a deletion"),
        pytest.param([("ADDED", budget("a", "x")), ("MODIFIED", budget("a", "x", "one"))],
                     [], id="an unreadable update drops the previous version too"),
    ],
)  # fmt: skip
def test_watch_events_keep_the_budgets(events: list[Event], kept: list[tuple[str, str, int]]) -> None:
    budgets = DisruptionBudgets()
    for event_type, manifest in events:
        # An unreadable one raises; the runtime skips and counts it (test_async_preemption.py).
        with contextlib.suppress(SchedulerInputError):
            budgets.apply(event_type, manifest)
    assert [(b.namespace, b.name, b.disruptions_allowed) for b in budgets.all()] == kept


def test_a_listing_keeps_exactly_its_readable_budgets() -> None:
    budgets = DisruptionBudgets()
    budgets.apply("ADDED", budget("a", "gone"))  # deleted while no watch ran
    skips = Skips()
    items = [budget("a", "x"), budget("a", "bad", "one"), budget("b", "y")]

    async def list_with_version(path: str) -> tuple[list[dict[str, Any]], str]:
        assert path == PATH
        return items, "42"

    version = asyncio.run(list_budgets(list_with_version, budgets, skips))
    assert version == "42"
    assert [(b.namespace, b.name) for b in budgets.all()] == [("a", "x"), ("b", "y")]
    assert skips.seen == [("poddisruptionbudget", "a/bad")]
