"""The throughput benchmark's latency quantiles: Prometheus' histogram_quantile, and
the text format it reads them from."""

import math

import pytest

from benchmarks.throughput_schedulers import (
    bucketed,
    histogram_quantile,
    latency_from_buckets,
    scheduled_buckets,
)

INF = math.inf


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        # rank 10 of 20 ends the first bucket: its upper bound
        (0.5, [(0.1, 10), (0.2, 20), (INF, 20)], 0.1),
        # rank 15: half way through (0.1, 0.2]
        (0.75, [(0.1, 10), (0.2, 20), (INF, 20)], 0.15),
        # the first bucket starts at 0: rank 2.5 of 10 in (0, 0.4] -> 0.1
        (0.25, [(0.4, 10), (INF, 10)], 0.1),
        # rank 18 falls in +Inf: the highest finite bound
        (0.9, [(0.1, 10), (INF, 20)], 0.1),
        # no observations, or no +Inf bucket: undefined
        (0.5, [(0.1, 0), (INF, 0)], math.nan),
        (0.5, [(0.1, 5)], math.nan),
    ],
    ids=["bucket-edge", "interpolated", "from-zero", "in-inf", "empty", "no-inf"],
)
def test_histogram_quantile_as_prometheus(
    q: float, buckets: list[tuple[float, float]], expected: float
) -> None:
    result = histogram_quantile(q, buckets)
    assert (math.isnan(result) and math.isnan(expected)) or result == pytest.approx(expected)


def test_scheduled_buckets_read_one_profile_from_the_text_format() -> None:
    text = "\n".join([
        "# HELP scheduler_scheduling_attempt_duration_seconds [STABLE] Scheduling attempt latency",
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="scheduled",le="0.001"} 1',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="scheduled",le="+Inf"} 4',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="error",le="+Inf"} 9',
        'scheduler_scheduling_attempt_duration_seconds_bucket{profile="b",result="scheduled",le="+Inf"} 7',
        'scheduler_scheduling_attempt_duration_seconds_count{profile="a",result="scheduled"} 4',
    ])  # fmt: skip
    assert scheduled_buckets(text, "a") == [(0.001, 1.0), (INF, 4.0)]


def test_measured_latencies_go_through_the_same_buckets() -> None:
    # 100 latencies of 3 ms: all in (2 ms, 4 ms], so p50 interpolates to 3 ms
    latency = latency_from_buckets(bucketed([0.003] * 100))
    assert latency.count == 100
    assert latency.p50_s == pytest.approx(0.003)
