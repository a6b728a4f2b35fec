"""The serving port's connection cap: who is admitted, who gives way."""

from __future__ import annotations

import pytest

from scheduler.k8s.serving.connections import ConnectionTable


def table(limit: int, idle: list[str], busy: list[str]) -> ConnectionTable[str]:
    """Connections admitted in the order given (idle ones first, oldest first)."""
    connections: ConnectionTable[str] = ConnectionTable(limit)
    for name in idle + busy:
        assert connections.admit(name) == (True, None)
    for name in busy:
        assert connections.busy(name)
    return connections


@pytest.mark.parametrize(
    ("limit", "idle", "busy", "admitted", "evicted"),
    [
        pytest.param(3, ["a"], ["b"], True, None, id="below the cap: admitted"),
        pytest.param(3, ["a", "b"], ["c"], True, "a", id="at the cap: the longest idle gives way"),
        pytest.param(2, [], ["a", "b"], False, None, id="at the cap, all busy: refused"),
        pytest.param(1, ["a"], [], True, "a", id="a cap of one"),
    ],
)
def test_admission(limit: int, idle: list[str], busy: list[str], admitted: bool, evicted: str | None) -> None:
    connections = table(limit, idle, busy)
    assert connections.admit("new") == (admitted, evicted)
    assert ("new" in connections) is admitted
    assert len(connections) == min(limit, len(idle) + len(busy) + 1)


def test_a_connection_idle_again_is_the_newest_idle() -> None:
    connections = table(3, ["a", "b", "c"], [])
    connections.busy("a")
    connections.idle("a")  # answered; waits for its next request
    assert connections.admit("d") == (True, "b")


def test_an_evicted_connection_cannot_become_busy() -> None:
    connections = table(1, ["a"], [])
    assert connections.admit("b") == (True, "a")
    assert not connections.busy("a")
    assert "a" not in connections


def test_a_flood_of_idle_connections_stays_at_the_cap() -> None:
    connections: ConnectionTable[int] = ConnectionTable(256)
    evicted = [connections.admit(i)[1] for i in range(2000)]
    assert len(connections) == 256
    assert evicted[256:] == list(range(2000 - 256))  # oldest first
    assert connections.admit(-1) == (True, 2000 - 256)  # a probe still gets in
