"""Predicted starts in the timeline replay (``--predict-starts``): each pod that fits
nowhere on arrival is forecast, and the forecasts are held against what happened;
with the oracle and the queue the forecast is exact on a small replay."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from scheduler.cli import main
from scheduler.sim.timeline import TimelineSpec, replay_timeline
from scheduler.sim.timeline_starts import StartRecords, coverage, start_sources, start_variants
from tests.sim.test_timeline import write_trace

# One 1-GPU node: a holds it 0-100; b (10-60: lives 50) and c (20-40: lives 20) wait;
# d (30, lives 5) waits too and gives up after the max wait of 200 s.
PODS = [("a", 1, 0, 100), ("b", 1, 10, 60), ("c", 1, 20, 40), ("d", 1, 30, 35)]


def replay(tmp_path: Path, variants: tuple[str, ...], max_wait: float = 200) -> dict[str, StartRecords]:
    trace, nodes = write_trace(tmp_path, PODS)
    spec = TimelineSpec(
        trace,
        "fgd",
        42,
        nodes,
        max_wait_s=max_wait,
        node_fraction=1.0,
        trace_end_s=math.inf,
        predict_starts=variants,
    )
    return replay_timeline(spec).starts


def test_with_the_oracle_and_the_queue_the_forecast_is_the_start(tmp_path: Path) -> None:
    starts = replay(tmp_path, ("oracle", "oracle+queue"))
    queued = starts["oracle+queue"]
    # b, c and d are forecast at their arrival: b starts when a leaves (100), c when b
    # leaves (150), d when c leaves (170, within its max wait: it would give up at 230).
    assert queued.pod == [1, 2, 3]
    np.testing.assert_allclose(queued.wait_s, [90.0, 130.0, 140.0])
    np.testing.assert_allclose(queued.p50_s, [90.0, 130.0, 140.0])
    np.testing.assert_allclose(queued.p90_s, queued.p50_s)
    # Without the queue each is forecast to start when a leaves.
    np.testing.assert_allclose(starts["oracle"].p50_s, [90.0, 80.0, 70.0])
    full = coverage([queued])
    assert (full.pods, full.started, full.never_started) == (3, 3, 0)
    assert full.covered_started == {0.5: 1.0, 0.9: 1.0}
    alone = coverage([starts["oracle"]])
    assert alone.covered_started[0.9] == pytest.approx(1 / 3)


def test_a_pod_that_never_starts_is_censored_at_its_max_wait(tmp_path: Path) -> None:
    # A max wait of 100: c (waits 130) and d (140) give up at 120 and 130.
    queued = replay(tmp_path, ("oracle+queue",), max_wait=100)["oracle+queue"]
    np.testing.assert_allclose(queued.wait_s, [90.0, np.nan, np.nan])
    np.testing.assert_allclose(queued.censor_s, [100.0, 100.0, 100.0])
    result = coverage([queued])
    assert (result.started, result.never_started) == (1, 2)
    # c is forecast at 130; for d, c gives up before it could start (its max wait runs
    # out at 120, its start would be 150), so d comes after b: 150 - 30 = 120. Both are
    # past the 100 s they were seen waiting: unknown, not misses.
    assert result.never_missed[0.9] == 0
    assert result.never_unknown[0.9] == 2
    assert (result.coverage_low[0.9], result.coverage_high[0.9]) == (pytest.approx(1 / 3), 1.0)


def test_coverage_counts_misses_infinities_and_unknowns() -> None:
    records = StartRecords(
        pod=[0, 1, 2, 3, 4],
        p50_s=[10.0, 10.0, 10.0, math.inf, 500.0],
        p90_s=[20.0, 20.0, 50.0, math.inf, 800.0],
        wait_s=np.array([15.0, 30.0, np.nan, np.nan, np.nan]),
        censor_s=np.array([100.0, 100.0, 100.0, 100.0, 100.0]),
        level=np.array([0.6, 0.95, 1.0, 0.0, 0.0]),
        gpu_milli=np.array([1000, 1000, 1000, 8000, 1000]),
    )
    result = coverage([records])
    assert result.covered_started == {0.5: 0.0, 0.9: 0.5}
    # pod 2 missed (p90 50 < 100 seen), pod 3 covered (never, and it never did), pod 4
    # unknown (p90 800 past the 100 s seen).
    assert (result.never_missed[0.9], result.never_covered[0.9], result.never_unknown[0.9]) == (1, 1, 1)
    assert result.coverage_low[0.9] == pytest.approx(2 / 5)
    assert result.coverage_high[0.9] == pytest.approx(3 / 5)
    assert coverage([records], (8000, 8000)).pods == 1


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert start_sources("oracle,model,oracle") == ("oracle", "model")
    assert start_variants(("oracle",), "both") == ("oracle", "oracle+queue")
    trace, nodes = write_trace(tmp_path, PODS)
    out = tmp_path / "out"
    argv = ["timeline", "--trace", trace, "--nodes", nodes, "--policy", "fgd", "--seeds", "42"]
    argv += ["--node-fraction", "1", "--max-wait", "200", "--predict-starts", "oracle", "--workers", "1"]
    assert main([*argv, "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "predicted starts of the pods that fit nowhere on arrival" in printed
    summary = json.loads((out / "summary.json").read_text())
    pooled = summary["start_coverage"]["policies"]["fgd"]["oracle+queue"]["pooled"]["all"]
    assert pooled["pods"] == 3
    assert main([*argv[:-4], "--predict-starts", "nothing"]) == 2
    assert "--predict-starts" in capsys.readouterr().err
    assert main([*argv, "--time-scale", "2", "--predict-starts", "model"]) == 2
