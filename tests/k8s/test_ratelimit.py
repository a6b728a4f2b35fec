from dataclasses import dataclass

import pytest

from scheduler.k8s.client.ratelimit import TokenBucket


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def test_burst_is_free_then_qps_paces() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0, 0, 0]
    # the 4th and 5th wait 0.1 s and 0.2 s for tokens at 10 per second
    assert [bucket.reserve() for _ in range(2)] == pytest.approx([0.1, 0.2])


def test_tokens_refill_up_to_burst_only() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=100, burst=2, clock=clock)
    bucket.reserve()
    bucket.reserve()
    clock.now += 60  # a long idle time saves no more than `burst`
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0, 0, 0.01])


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 5), (10, 0)])
def test_refuses_nonsense(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="token bucket needs"):
        TokenBucket(qps, burst)
