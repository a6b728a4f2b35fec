"""The one retry schedule of the scheduler's API calls: 1 s doubling to 30 s, without
end. Listings at start, dropped watches and kopf's requests all wait by it."""

from __future__ import annotations

from collections.abc import Iterator

BACKOFF_MIN_S, BACKOFF_MAX_S = 1.0, 30.0


def backoff_delays() -> Iterator[float]:
    """1, 2, 4, ... 30, 30, ... seconds: a fresh one starts the schedule over."""
    delay = BACKOFF_MIN_S
    while True:
        yield delay
        delay = min(delay * 2, BACKOFF_MAX_S)
