"""The lifetime ablation's paired metrics and its table row."""

from __future__ import annotations

import pytest

from scheduler.learn.lifetime_ablation import BASELINE, arms, main, paired_metrics, table
from tests.policy.test_lifetime_es import metrics

# 2-GPU nodes whole free 30% of the time, 8-GPU nodes 6%.
OURS = metrics(wait=50.0, failed=80.0, whole=30.0, alloc=76.5, whole_8gpu=6.0)


@pytest.mark.parametrize(
    ("metric", "largest", "expected"),
    [
        ("gpu_alloc_mean", 8, 76.5),
        ("whole_free_nodes_pct", 8, 30.0),
        ("whole_free_largest_pct", 8, 6.0),
        ("whole_free_largest_pct", 2, 30.0),
        # a cluster without nodes of that many GPUs: none whole free
        ("whole_free_largest_pct", 4, 0.0),
        ("multi_gpu_failed", 8, 0.0),
    ],
)
def test_paired_metrics(metric: str, largest: int, expected: float) -> None:
    assert paired_metrics(largest)[metric](OURS) == pytest.approx(expected)


def test_table_row_names_the_largest_nodes() -> None:
    row = {
        "load": 0.8,
        "policy": "gnn-lifetime[model]",
        "largest_gpus": 8,
        "gpu_alloc_mean": [1.5, 0.5, 2.5],
        "whole_free_nodes_pct": [17.0, 12.0, 22.0],
        "whole_free_largest_pct": [3.1, None, None],
        "multi_gpu_failed": [-8.0, -10.0, -6.0],
        "multi_gpu_wait_gpu_hours_ratio": 0.77,
        "gpu_hours_failed_ratio": 0.69,
    }
    lines = table([{**row, "policy": "fgd-reserve"}, row]).splitlines()
    assert len(lines) == 3  # the baseline is not a row of its own
    assert lines[2] == (
        "| 0.8 | gnn-lifetime[model] | +1.50 [+0.50, +2.50] | +17.00 [+12.00, +22.00] | +3.10 (8) "
        "| -8.00 [-10.00, -6.00] | 0.77x | 0.69x |"
    )


@pytest.mark.parametrize(
    ("only", "labels"),
    [
        (None, None),  # every arm
        (["gnn-lifetime[model]"], [BASELINE, "gnn-lifetime[model]"]),
        (
            ["gnn-lifetime[oracle]", "gnn-lifetime[model]"],
            [BASELINE, "gnn-lifetime[oracle]", "gnn-lifetime[model]"],
        ),
        ([BASELINE], [BASELINE]),
    ],
)
def test_arms_chosen_by_label_keep_the_baseline(only: list[str] | None, labels: list[str] | None) -> None:
    every = [label for label, *_ in arms("h")]
    assert [label for label, *_ in arms("h", only)] == (every if labels is None else labels)


def test_an_unknown_arm_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--arms", "gnn-lifetime[psychic]"])
    assert done.value.code == 2
    assert "no arm gnn-lifetime[psychic]" in capsys.readouterr().err
