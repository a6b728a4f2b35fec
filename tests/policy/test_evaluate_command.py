"""``rl-scheduler evaluate`` end to end on a tiny trace (42 pods, 12 nodes, two seeds):
the learned policy is replayed beside its teacher, beside itself with the network
switched off and beside the baseline asked for, and the paired table's numbers are
the per-seed differences of the replays it printed."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.learn.ablation import HEAD_OUTPUT, NETWORK_OFF
from scheduler.plugins import profiles
from scheduler.policy.weights import load_weights
from tests.policy.test_plugin import write_trace

SEEDS = (42, 43)
REPLAYED = ("gnn", "fgd-reserve", NETWORK_OFF, "fgd")
COMPARED = ("fgd-reserve", NETWORK_OFF, "fgd")  # what gnn is paired with, in this order
# Only allocation at 100% arrived: the tiny trace's inflation ends short of 130% (a
# pod asks for up to 2,000 of the 42,000 GPU milli, 4.8%, so the arrived share can jump
# past 129-131% or stop before it) and a metric with no value is not paired.
METRICS = ("gpu_alloc_100",)


@pytest.fixture(autouse=True)
def _process_profiles_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one worker evaluate replays in this process and registers ``gnn`` as the
    training tools' profile for every checkpoint kind; other tests expect the preset."""
    monkeypatch.setattr(profiles, "_EXTRA", dict(profiles._EXTRA))


def test_evaluate_prints_every_policy_and_the_paired_differences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods, nodes = write_trace(tmp_path)
    out = tmp_path / "out"
    argv = ["evaluate", "--trace", str(pods), "--nodes", str(nodes), "--policy", "fgd"]
    argv += ["--seeds", "42-43", "--workers", "1", "--out", str(out), "--quiet"]

    assert main(argv) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())

    # The first table: one row per policy, all four replayed on the trace.
    replayed = summary["traces"][str(pods)]
    assert sorted(replayed) == sorted(REPLAYED)
    for policy in REPLAYED:
        assert any(line.split()[1:2] == [policy] for line in printed.splitlines()), policy

    # The paired table says which interval it is, and pairs gnn with each comparison.
    assert "95% t-interval" in printed
    assert "Student-t" in printed
    paired = summary["paired"][str(pods)]
    assert [(row["baseline"], row["metric"]) for row in paired] == [
        (baseline, metric) for baseline in COMPARED for metric in METRICS
    ]
    for row in paired:
        # The differences are the replays' own per-seed values, gnn minus the baseline.
        ours, theirs = replayed["gnn"]["per_seed"], replayed[row["baseline"]]["per_seed"]
        expected = [ours[str(s)][row["metric"]] - theirs[str(s)][row["metric"]] for s in SEEDS]
        assert row["seeds"] == list(SEEDS)
        assert row["differences"] == pytest.approx(expected, abs=1e-4)
        mean = statistics.fmean(expected)
        assert row["mean"] == pytest.approx(mean, abs=1e-4)
        assert row["low"] <= row["mean"] <= row["high"]
        shown = f"gnn - {row['baseline']}"
        assert any(shown in line and f"{mean:+.2f}" in line for line in printed.splitlines()), shown

    # The ablation ran from a checkpoint written beside the outputs, head output zeroed.
    ablated = load_weights(out / "network-off-checkpoint")
    assert all(not ablated.arrays[name].any() for name in HEAD_OUTPUT)
    assert (out / "curves.png").stat().st_size > 0


def test_evaluate_synthetic_pairs_gnn_with_the_named_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No GPUs, so no FGD: gnn is paired with its teacher, its ablation and the
    baseline named, on pods placed before the first failure."""
    argv = ["evaluate", "--synthetic", "--policy", "most-allocated", "--seeds", "42-43"]
    argv += ["--workers", "1", "--out", str(tmp_path), "--quiet"]

    assert main(argv) == 0
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())

    policies = summary["policies"]
    assert sorted(policies) == sorted(["gnn", "fgd-reserve", NETWORK_OFF, "most-allocated"])
    assert [row["baseline"] for row in summary["paired"]] == ["fgd-reserve", NETWORK_OFF, "most-allocated"]
    for row in summary["paired"]:
        ours = policies["gnn"]["placed_before_first_failure_by_seed"]
        theirs = policies[row["baseline"]]["placed_before_first_failure_by_seed"]
        assert row["differences"] == [ours[str(s)] - theirs[str(s)] for s in SEEDS]
        assert f"gnn - {row['baseline']}" in printed
    assert "95% t-interval" in printed
