"""The ES loss of a lifetime head on one seed, against fgd-reserve on that seed."""

from __future__ import annotations

import pytest

from scheduler.learn.lifetime_es import Args, seed_loss
from scheduler.sim.timeline_metrics import TimelineMetrics


def metrics(
    wait: float, failed: float, whole: float, alloc: float, whole_8gpu: float = 1.0
) -> TimelineMetrics:
    return TimelineMetrics(
        gpu_alloc_mean=alloc,
        whole_free_nodes_pct=whole,
        whole_free_pct_by_gpus={2: whole, 8: whole_8gpu},
        multi_gpu_pods=10,
        multi_gpu_failed=0,
        multi_gpu_wait_p50_s=None,
        multi_gpu_wait_p90_s=None,
        multi_gpu_wait_gpu_hours=wait,
        pods_failed=0,
        gpu_hours_failed=failed,
        gpu_hours_failed_pct=None,
        wait_p50_s=None,
        wait_p99_s=None,
        peak_pending=0,
        pending_mean=0.0,
        seconds=0.0,
    )


BASE = metrics(wait=100.0, failed=100.0, whole=10.0, alloc=75.0)


@pytest.mark.parametrize(
    ("case", "ours", "args", "expected"),
    [
        ("fgd-reserve itself", BASE, Args(), 1.0),
        # (50 + 50) / 200 = 0.5
        ("half the GPU-hours", metrics(50.0, 50.0, 10.0, 75.0), Args(), 0.5),
        # 1 - 20 / 100 = 0.8
        ("20 points more whole free nodes", metrics(100.0, 100.0, 30.0, 75.0), Args(), 0.8),
        # 1 - 3 x 20 / 100 = 0.4
        ("whole free nodes weighed 3", metrics(100.0, 100.0, 30.0, 75.0), Args(whole_free_coef=3.0), 0.4),
        # only the 8-GPU nodes count: 1 - 5 x (6 - 1) / 100 = 0.75, the 2-GPU ones' 20 points not
        (
            "whole free 8-GPU nodes weighed 5",
            metrics(100.0, 100.0, 30.0, 75.0, whole_8gpu=6.0),
            Args(whole_free_coef=5.0, whole_free_gpus=8),
            0.75,
        ),
        # no node of that many GPUs: nothing counts
        ("no 4-GPU nodes", metrics(100.0, 100.0, 30.0, 75.0), Args(whole_free_gpus=4), 1.0),
        # every GPU node weighed 10 up to +2 points, beside the 8-GPU term: 1 - 10 x 1 / 100 = 0.9
        (
            "1 point more over every node",
            metrics(100.0, 100.0, 11.0, 75.0),
            Args(whole_free_coef=5.0, whole_free_gpus=8, all_nodes_coef=10.0),
            0.9,
        ),
        # past the cap nothing more is earned: 1 - 10 x 2 / 100 = 0.8
        (
            "20 points more over every node, capped at 2",
            metrics(100.0, 100.0, 30.0, 75.0),
            Args(whole_free_coef=5.0, whole_free_gpus=8, all_nodes_coef=10.0),
            0.8,
        ),
        # a loss costs in full: 1 + 10 x 5 / 100 = 1.5
        (
            "5 points fewer over every node",
            metrics(100.0, 100.0, 5.0, 75.0),
            Args(whole_free_coef=5.0, whole_free_gpus=8, all_nodes_coef=10.0),
            1.5,
        ),
        # within 0.05 points of allocation: no cost
        ("0.05 points less allocated", metrics(100.0, 100.0, 10.0, 74.95), Args(), 1.0),
        # 1 + (75 - 73 - 0.05) = 2.95
        ("2 points less allocated", metrics(100.0, 100.0, 10.0, 73.0), Args(), 2.95),
        # 1 + 0.5 x 1.95 = 1.975
        ("allocation weighed 0.5", metrics(100.0, 100.0, 10.0, 73.0), Args(alloc_coef=0.5), 1.975),
    ],
)
def test_seed_loss(case: str, ours: TimelineMetrics, args: Args, expected: float) -> None:
    assert seed_loss(ours, BASE, args) == pytest.approx(expected), case
