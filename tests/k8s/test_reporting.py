"""``Reporter.failed``: which of the event and the condition a failed attempt writes.
The API is a stand-in that records calls: what is written is the API client's
business, tested against a real kube-apiserver in tests/e2e/test_api_writes.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.k8s.scheduling.reporting import Reporter
from scheduler.objects.pod import Pod
from tests.builders import make_pod


class RecordingApi:
    """Records the writes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def post_event(self, _pod: Pod, **fields: Any) -> None:
        self.calls.append(("event", fields["note"]))

    async def set_pod_scheduled_condition(self, _pod: Pod, **fields: Any) -> None:
        self.calls.append(("condition", f"{fields['message']} nominated={fields['nominated_node']}"))


# (id, attempts as (seconds since the first, message, nominated node), the writes)
FIRST = [("event", "m"), ("condition", "m nominated=None")]
ATTEMPTS = [
    ("a first failure writes both", [(0, "m", None)], FIRST),
    ("the same message again soon writes nothing", [(0, "m", None), (10, "m", None)], FIRST),
    (
        "the same message after repeat_after_s: the event only",
        [(0, "m", None), (301, "m", None)],
        [*FIRST, ("event", "m")],
    ),
    (
        "a new message writes both",
        [(0, "m", None), (10, "n", None)],
        [*FIRST, ("event", "n"), ("condition", "n nominated=None")],
    ),
    (
        "a nomination writes both, even unchanged",
        [(0, "m", None), (10, "m", "node-1")],
        [*FIRST, ("event", "m"), ("condition", "m nominated=node-1")],
    ),
]


@pytest.mark.parametrize(("attempts", "writes"), [a[1:] for a in ATTEMPTS], ids=[a[0] for a in ATTEMPTS])
def test_failed_writes(attempts: list[tuple[float, str, str | None]], writes: list[tuple[str, str]]) -> None:
    api = RecordingApi()
    now = [0.0]
    reporter = Reporter(api, clock=lambda: now[0])  # type: ignore[arg-type]
    pod = make_pod("p")

    async def attempt_all() -> None:
        for at, message, nominated in attempts:
            now[0] = at
            await reporter.failed(pod, message, nominated_node=nominated)

    asyncio.run(attempt_all())
    assert api.calls == writes
