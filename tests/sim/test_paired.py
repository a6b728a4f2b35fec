"""Paired per-seed differences and their 95% Student-t interval, by hand."""

import math

import pytest

from scheduler.sim.paired import (
    across_traces,
    paired_difference,
    paired_rows,
    paired_synthetic,
    paired_traces,
)

# t(0.975, 2) = 4.302653, t(0.975, 9) = 2.262157 (tables; scipy.stats.t.ppf gives them).


@pytest.mark.parametrize(
    ("ours", "theirs", "mean", "low", "high", "ahead_tied_behind"),
    [
        # differences 1, 2, 3: mean 2, sd 1, half-width 4.302653 * 1 / sqrt(3) = 2.484138
        pytest.param(
            {1: 11, 2: 12, 3: 13}, {1: 10, 2: 10, 3: 10}, 2.0, -0.484138, 4.484138, (3, 0, 0), id="n=3"
        ),
        # differences -1, 0, 0, 1 (and a NaN seed left out): mean 0, sd 0.816497,
        # half-width 3.182446 * 0.816497 / 2 = 1.299235
        pytest.param(
            {1: 1, 2: 2, 3: 3, 4: 5, 5: math.nan},
            {1: 2, 2: 2, 3: 3, 4: 4, 5: 1},
            0.0,
            -1.299235,
            1.299235,
            (1, 2, 1),
            id="ties, a NaN seed",
        ),
        # ten seeds, differences five 0s and five 1s: mean 0.5, sd sqrt(10 * 0.25 / 9) =
        # 0.527046, half-width 2.262157 * 0.527046 / sqrt(10) = 2.262157 / 6 = 0.377026
        pytest.param(
            {s: 90.0 + (s >= 47) for s in range(42, 52)},
            dict.fromkeys(range(42, 52), 90.0),
            0.5,
            0.122974,
            0.877026,
            (5, 5, 0),
            id="ten seeds, as evaluate runs by default",
        ),
        pytest.param({1: 5, 2: 6}, {1: 4.5, 2: 5.5}, 0.5, 0.5, 0.5, (2, 0, 0), id="equal differences"),
        pytest.param({1: 5, 2: 6}, {2: 5.5, 3: 1}, 0.5, None, None, (1, 0, 0), id="one shared seed"),
    ],
)
def test_paired_difference(
    ours: dict[int, float],
    theirs: dict[int, float],
    mean: float,
    low: float | None,
    high: float | None,
    ahead_tied_behind: tuple[int, int, int],
) -> None:
    found = paired_difference("gnn", "fgd", "gpu_alloc_100", ours, theirs)
    assert found is not None
    assert found.mean == pytest.approx(mean)
    assert (found.low, found.high) == (
        (None, None) if low is None else (pytest.approx(low, abs=1e-5), pytest.approx(high, abs=1e-5))
    )
    assert (found.ahead, found.tied, found.behind) == ahead_tied_behind


def test_no_shared_seed_is_no_difference() -> None:
    assert paired_difference("gnn", "fgd", "m", {1: 1.0}, {2: 1.0}) is None


def _entry(values: dict[int, float]) -> dict[str, object]:
    return {"per_seed": {str(s): {"gpu_alloc_100": v, "gpu_alloc_130": v + 0.1} for s, v in values.items()}}


def test_paired_traces_compares_with_each_baseline_present() -> None:
    summary = {
        "traces": {
            "default": {
                "gnn": _entry({42: 95.5, 43: 95.9}),
                "fgd-reserve": _entry({42: 95.5, 43: 95.7}),
                "fgd": _entry({42: 95.0, 43: 95.1}),
            }
        }
    }
    by_trace = paired_traces(summary, "gnn", ["fgd-reserve", "gnn-network-off", "fgd"])
    rows = [(d.baseline, d.metric, round(d.mean, 2)) for d in by_trace["default"]]
    assert rows == [
        ("fgd-reserve", "gpu_alloc_100", 0.1),
        ("fgd-reserve", "gpu_alloc_130", 0.1),
        ("fgd", "gpu_alloc_100", 0.65),
        ("fgd", "gpu_alloc_130", 0.65),
    ]
    header, table = paired_rows(by_trace)
    assert header[:3] == ["trace", "comparison", "metric"]
    # 0.0 and 0.2: mean 0.1, sd 0.141421, half-width 12.706205 * 0.141421 / sqrt(2) = 1.270620
    assert table[0] == ["default", "gnn - fgd-reserve", "alloc@100%", "+0.10", "[-1.17, +1.37]", "1/1/0", "2"]


def test_paired_synthetic_reads_the_per_seed_counts() -> None:
    summary = {
        "policies": {
            "gnn": {"placed_before_first_failure_by_seed": {"42": 650, "43": 500, "44": 700}},
            "fgd-reserve": {"placed_before_first_failure_by_seed": {"42": 618, "43": 500, "44": 690}},
        }
    }
    (found,) = paired_synthetic(summary, "gnn", ["fgd-reserve", "gnn-network-off"])
    assert (found.baseline, found.differences, (found.ahead, found.tied, found.behind)) == (
        "fgd-reserve",
        (32.0, 0.0, 10.0),
        (2, 1, 0),
    )


def test_across_traces_is_the_median_of_the_trace_means() -> None:
    summary = {
        "traces": {
            "a": {"gnn": _entry({1: 1.0, 2: 1.0}), "fgd": _entry({1: 0.0, 2: 0.0})},  # mean +1
            "b": {"gnn": _entry({1: 0.0, 2: 0.0}), "fgd": _entry({1: 0.0, 2: 0.0})},  # mean 0
            "c": {"gnn": _entry({1: 0.0, 2: 0.0}), "fgd": _entry({1: 0.5, 2: 0.5})},  # mean -0.5
        }
    }
    header, rows = across_traces(paired_traces(summary, "gnn", ["fgd"]))
    assert header[2:] == ["median of trace means", "traces ahead/tied/behind", "traces"]
    assert rows == [
        ["gnn - fgd", "alloc@100%", "+0.00", "1/1/1", "3"],
        ["gnn - fgd", "alloc@130%", "+0.00", "1/1/1", "3"],
    ]
