"""Start-up against an API server that does not answer: the first listing is retried
with a logged backoff, and ``/healthz`` fails once the caches have not synced within
``startup_timeout_s`` (so a kubelet restarts a scheduler stuck at start)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from scheduler.k8s.process.settings import load_settings
from scheduler.k8s.process.startup import describe, sync_until_served
from scheduler.k8s.serving.http import StartupDeadline


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("waited_s", "synced", "healthy", "says"),
    [
        pytest.param(0.0, False, True, "ok (starting: caches not synced for 0 s)", id="just started"),
        pytest.param(119.0, False, True, "ok (starting: caches not synced for 119 s)", id="119 s < 120 s"),
        pytest.param(
            120.0,
            False,
            False,
            "caches not synced 120 s after start (startup_timeout_s: 120)",
            id="120 s: deadline passed",
        ),
        pytest.param(30.0, True, True, "ok", id="synced in time"),
        pytest.param(3600.0, True, True, "ok", id="synced: healthy ever after"),
    ],
)
def test_healthz_fails_when_caches_have_not_synced_by_the_deadline(
    waited_s: float, synced: bool, healthy: bool, says: str
) -> None:
    clock = Clock()
    deadline = StartupDeadline(120.0, lambda: synced, clock)
    clock.now += waited_s
    assert deadline.check() == (healthy, says)


def test_the_deadline_is_a_setting_of_120_s_by_default() -> None:
    assert load_settings().startup_timeout_s == 120.0
    assert load_settings(startup_timeout_s=30).startup_timeout_s == 30.0


def unreachable() -> TimeoutError:
    return TimeoutError("connecting to 10.96.0.1:443 timed out after 5 s")  # as BlockingClient says it


def test_a_failed_first_listing_is_logged_and_retried_with_a_capped_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = 7
    calls = 0
    delays: list[float] = []

    async def sync() -> dict[str, str]:
        nonlocal calls
        calls += 1
        if calls <= failures:
            raise unreachable()
        return {"pods": "42"}

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    with caplog.at_level(logging.WARNING, logger="scheduler.k8s.process.startup"):
        versions = asyncio.run(sync_until_served(sync, "https://10.96.0.1:443", sleep=sleep))
    assert versions == {"pods": "42"}
    assert delays == [1, 2, 4, 8, 16, 30, 30]
    assert len(caplog.records) == failures
    assert caplog.records[0].getMessage() == (
        "listing the cluster from https://10.96.0.1:443 failed (attempt 1): TimeoutError: "
        "connecting to 10.96.0.1:443 timed out after 5 s; retrying in 1 s"
    )
    assert (
        caplog.records[-1]
        .getMessage()
        .endswith("(attempt 7): " + describe(unreachable()) + "; retrying in 30 s")
    )
