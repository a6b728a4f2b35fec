"""The timeline replay on one clock: arrivals and lifetimes scaled alike, the cluster
sized for a load (``cluster_size``), censored pods, and what a platform team watches
(whole free GPU nodes, multi-GPU waits, failed GPU-hours); ``rl-scheduler timeline``
on one clock."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from scheduler.cli import main
from scheduler.errors import SchedulerInputError
from scheduler.sim.cluster_size import cluster_for_load, nested_sample
from scheduler.sim.timeline import TimelineLog, TimelineSpec, replay_timeline
from scheduler.sim.timeline_metrics import timeline_metrics
from scheduler.sim.trace import load_nodes
from tests.sim.test_timeline import TWO_SHAPES, Pod, write_trace

ONE_GPU_NODE = "n1,16000,65536,1,T4\n"


def replay(tmp_path: Path, pods: list[Pod], nodes: str, **options: Any) -> TimelineLog:
    """Every node, policy fgd, seed 42, max wait 3600 s; no pod censored unless
    ``trace_end_s`` says otherwise."""
    trace, node_list = write_trace(tmp_path, pods, nodes)
    options = {"node_fraction": 1.0, "trace_end_s": math.inf, **options}
    return replay_timeline(TimelineSpec(trace, "fgd", 42, node_list, **options))


# One node with one GPU. a runs 0-100; b (arrives 30) waits for it, runs 100-130; c
# (arrives 50) waits for b, runs its 350 s from 130 to 480.
CLOCK_PODS = [("a", 1, 0, 100), ("b", 1, 30, 60), ("c", 1, 50, 400)]
# (id, options, the log's times, the pods' waits), in the replay's seconds
CLOCKS = [
    (
        "the trace's own clock: arrivals and departures at the trace's times",
        {},
        [0, 30, 50, 100, 130, 480],
        [0, 70, 80],
    ),
    (
        "scaled by 10: every time / 10, the same replay in other units",
        {"time_scale": 10.0},
        [0, 3, 5, 10, 13, 48],
        [0, 7, 8],
    ),
    (
        "arrivals compressed 10x, lifetimes not: b and c arrive at 3 and 5 and wait 97 and 125",
        {"compress_arrivals": True, "compression": 10.0},
        [0, 3, 5, 100, 130, 480],
        [0, 97, 125],
    ),
]


@pytest.mark.parametrize(("options", "times", "waits"), [r[1:] for r in CLOCKS], ids=[r[0] for r in CLOCKS])
def test_one_clock_runs_arrivals_and_lifetimes_alike(
    tmp_path: Path, options: dict[str, Any], times: list[float], waits: list[float]
) -> None:
    log = replay(tmp_path, CLOCK_PODS, ONE_GPU_NODE, **options)
    assert log.times.tolist() == pytest.approx(times)
    assert log.allocated_milli.tolist() == [1000] * 5 + [0]
    assert log.wait_s.tolist() == pytest.approx(waits)


def test_a_time_scale_changes_only_units(tmp_path: Path) -> None:
    """The metrics are in the trace's seconds: the same at scale 1 and 10."""
    one = timeline_metrics(replay(tmp_path, CLOCK_PODS, ONE_GPU_NODE)).as_dict()
    ten = timeline_metrics(replay(tmp_path, CLOCK_PODS, ONE_GPU_NODE, time_scale=10.0)).as_dict()
    assert {k: v for k, v in ten.items() if k != "seconds"} == pytest.approx(
        {k: v for k, v in one.items() if k != "seconds"}
    )
    assert one["wait_p99_s"] == pytest.approx(70 + 0.98 * 10)  # of 0, 70, 80 trace seconds


def four_nodes(tmp_path: Path) -> list[Any]:
    path = tmp_path / "four.csv"
    path.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"t{i},16000,65536,2,T4\n" for i in range(4))
    )
    return load_nodes(path)


# (id, load, GPUs of the cluster). The pods offer 3000 milli; four nodes of 2 GPUs, so the
# nested samples hold 2, 4, 6 or 8 GPUs and the target is 3000 / load.
SIZES = [
    ("3000 / 0.75 = 4000: two nodes", 0.75, 4),
    ("3000 / 1.5 = 2000: one node", 1.5, 2),
    ("3000 / 0.5 = 6000: three nodes", 0.5, 6),
    ("3000 / 0.375 = 8000: every node", 0.375, 8),
    ("3000 / 0.6 = 5000: 4000 and 6000 as close, the smaller", 0.6, 4),
    ("3000 / 3 = 1000: one node is the least (load 1.5)", 3.0, 2),
]


@pytest.mark.parametrize(("load", "gpus"), [r[1:] for r in SIZES], ids=[r[0] for r in SIZES])
def test_the_cluster_is_sized_for_the_load(tmp_path: Path, load: float, gpus: int) -> None:
    nodes = four_nodes(tmp_path)
    for seed in (1, 2):
        sized = cluster_for_load(nodes, 3000.0, load, seed)
        assert sized.capacity_milli == 1000 * gpus
        assert nested_sample(nodes, sized.fraction, seed) == sized.nodes  # the fraction names the sample


def test_a_load_below_what_the_whole_list_gives_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SchedulerInputError, match=r"0\.3 is out of reach .* \(8 GPUs\) is offered 0\.3750 x"):
        cluster_for_load(four_nodes(tmp_path), 3000.0, 0.3, 1)  # 10000 milli > 8000


# Twelve nodes of two shapes, six of each (TWO_SHAPES). (id, fraction, nodes of each shape)
NESTED = [
    ("0.5 x 6 = 3 of each", 0.5, {3}),
    ("0.25 x 6 = 1.5: 1 or 2 of each", 0.25, {1, 2}),
    ("0.1 x 6 = 0.6: none or one of each (a shape may be absent)", 0.1, {0, 1}),
    ("1: every node", 1.0, {6}),
]


@pytest.mark.parametrize(("fraction", "per_shape"), [r[1:] for r in NESTED], ids=[r[0] for r in NESTED])
def test_the_nested_sample_keeps_about_the_fraction_of_each_shape(
    tmp_path: Path, fraction: float, per_shape: set[int]
) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + TWO_SHAPES)
    nodes = load_nodes(path)
    for seed in range(6):
        sample = nested_sample(nodes, fraction, seed)
        counts = Counter(n.name[0] for n in sample)
        assert {counts["t"], counts["v"]} <= per_shape
        assert {n.name for n in sample} <= {n.name for n in nested_sample(nodes, fraction + 0.2, seed)}
    assert nested_sample(nodes, 0.5, 1) == nested_sample(nodes, 0.5, 1)
    assert nested_sample(nodes, 0.5, 1) != nested_sample(nodes, 0.5, 2)


def test_the_replay_sizes_its_cluster_from_the_trace_clock_load(tmp_path: Path) -> None:
    """Busy window [0, 1000] (3 pods: the first opens it). On the trace's clock a (2 GPUs)
    is alive all of it, b (1 GPU) 250 s: (2000 x 1000 + 1000 x 250) / 1000 = 2250 milli.
    At load 0.5625 the target is 4000: two of the four 2-GPU nodes."""
    pods = [("a", 2, 0, 1000), ("b", 1, 250, 500), ("cpu", 0, 1000, 1001)]
    nodes = "".join(f"t{i},16000,65536,2,T4\n" for i in range(4))
    log = replay(tmp_path, pods, nodes, node_fraction=None, load=0.5625)
    assert (log.capacity_milli, log.compression) == (4000, 1.0)
    assert log.offered_load == pytest.approx(0.5625)
    assert len(log.node_names) == 2


def test_censored_pods_stay_running_to_the_end(tmp_path: Path) -> None:
    """The trace ends at 1000, the latest deletion time: a and c are still running then.
    One node of 2 GPUs: a and c hold them to the replay's end (50 + 2000), so d and e
    fail; were a not censored it would leave at 1000 and d would be placed. e's failed
    GPU-hours count its observed 950 s, a lower bound."""
    pods = [("a", 1, 0, 1000), ("b", 1, 10, 20), ("c", 1, 30, 1000), ("d", 1, 40, 50), ("e", 1, 50, 1000)]
    log = replay(tmp_path, pods, "n1,16000,65536,2,T4\n", trace_end_s=None, max_wait_s=2000.0)
    assert log.censored.tolist() == [True, False, True, False, True]
    assert log.failed.tolist() == [False, False, False, True, True]
    assert (log.times[-1], log.allocated_milli[-1]) == (2050.0, 2000)
    assert timeline_metrics(log).gpu_hours_failed == pytest.approx((10 + 950) / 3600)
    uncensored = replay(tmp_path, pods, "n1,16000,65536,2,T4\n", max_wait_s=2000.0)
    assert uncensored.wait_s[3] == 960.0  # d placed when a leaves at 1000


# An 8-GPU node and a 2-GPU node, max wait 100. big (8 GPUs) runs 0-100 on n8; pair (2)
# 10-40 on n2; big2 (8, arrives 20) waits for n8 and runs 100-150; big3 (4, arrives 30)
# fits neither and fails at 130; cpu (no GPU) arrives at 200, the last arrival, so the
# busy window is [0, 200] (5 pods: the first opens it).
METRIC_PODS = [
    ("big", 8, 0, 100),
    ("pair", 2, 10, 40),
    ("big2", 8, 20, 70),
    ("big3", 4, 30, 40),
    ("cpu", 0, 200, 210),
]
NODES_8_AND_2 = "n8,64000,262144,8,T4\nn2,16000,65536,2,T4\n"
# (metric, value, arithmetic)
METRICS = [
    ("gpu_alloc_mean", 63.0, "(8 x 10 + 10 x 30 + 8 x 60 + 8 x 50 + 0 x 50) / 200 of 10 GPUs"),
    ("whole_free_8gpu_pct", 25.0, "n8 whole free 150-200: 50 / 200"),
    ("whole_free_2gpu_pct", 85.0, "n2 whole free 0-10 and 40-200: 170 / 200"),
    ("whole_free_nodes_pct", 55.0, "(50 + 170) / (2 nodes x 200)"),
    ("multi_gpu_pods", 3, "big, big2, big3 ask 4 GPUs or more"),
    ("multi_gpu_failed", 1, "big3"),
    ("multi_gpu_wait_p50_s", 80.0, "waits 0, 80 and 100 (big3 failed after the max wait)"),
    ("multi_gpu_wait_p90_s", 96.0, "80 + 0.8 x (100 - 80)"),
    ("multi_gpu_wait_gpu_hours", (8 * 0 + 8 * 80 + 4 * 100) / 3600, "GPUs x wait"),
    ("pods_failed", 1, "big3"),
    ("gpu_hours_failed", 4 * 10 / 3600, "big3: 4 GPUs x its 10 s lifetime"),
]


@pytest.mark.parametrize(("key", "value"), [r[:2] for r in METRICS], ids=[f"{r[0]}: {r[2]}" for r in METRICS])
@pytest.mark.parametrize("scale", [1.0, 10.0], ids=["trace clock", "scaled by 10"])
def test_what_a_platform_team_watches(tmp_path: Path, key: str, value: float, scale: float) -> None:
    log = replay(tmp_path, METRIC_PODS, NODES_8_AND_2, max_wait_s=100.0, time_scale=scale)
    assert log.placed_on == ["n8", "n2", "n8", "", log.placed_on[4]]
    assert timeline_metrics(log).as_dict()[key] == pytest.approx(value)


def test_the_command_on_one_clock_sizes_each_seeds_cluster_and_pairs_the_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """30 pods of 1 GPU, one every 10 s, living 25-64 s; 4 nodes of 2 GPUs. --load 1:
    each seed's cluster is the nested sample closest to what the pods offer."""
    pods = [(f"p{i:02d}", 1, 10 * i, 10 * i + 25 + (i * 13) % 40) for i in range(30)]
    trace, nodes = write_trace(tmp_path, pods, "".join(f"n{i},16000,65536,2,T4\n" for i in range(4)))
    out = tmp_path / "out"
    argv = ["timeline", "--trace", trace, "--nodes", nodes, "--policy", "fgd", "--policy", "default"]
    argv += [
        "--seeds",
        "1,2",
        "--load",
        "1",
        "--max-wait",
        "20",
        "--workers",
        "1",
        "--quiet",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = json.loads((out / "summary.json").read_text())
    protocol = summary["protocol"]
    clusters = protocol["clusters"]
    offered = clusters["1"]["offered_load"] * clusters["1"]["gpus"]
    assert lines[0].startswith(
        f"{trace}: one clock (the trace's seconds / 1, arrivals and lifetimes alike): the pods offer "
        f"{offered:.1f} GPUs over the busy window (0.08 h); clusters sized for --load 1: the seeds' "
        "samples hold "
    )
    assert lines[0].endswith("censored (running at the trace's end): 1 pods; max wait 20 s")
    assert (protocol["clock"], protocol["compression"], protocol["censored_pods"]) == ("one clock", 1.0, 1)
    for cluster in clusters.values():  # the closest of 2, 4, 6, 8 GPUs to what is offered
        assert abs(cluster["gpus"] - offered) <= 1.0
        assert cluster["offered_load"] == pytest.approx(offered / cluster["gpus"])
    assert [line.split()[0] for line in lines[3:5]] == ["fgd", "default"]
    metrics = {p["metric"] for p in summary["paired"]}
    assert {"gpu_alloc_mean", "whole_free_nodes_pct", "whole_free_2gpu_pct", "gpu_hours_failed"} <= metrics
    assert (out / "curves.png").stat().st_size > 0


def test_the_command_refuses_a_load_the_whole_list_cannot_be_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """a (1 GPU) alive all the window [0, 1000]: 1000 milli, 0.25 of one 4-GPU node."""
    trace, nodes = write_trace(tmp_path, [("a", 1, 0, 2000), ("b", 0, 1000, 1001)], "n1,16000,65536,4,T4\n")
    argv = ["timeline", "--trace", trace, "--nodes", nodes, "--policy", "fgd", "--load", "0.2", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "rl-scheduler timeline: error: argument --load: 0.2 is out of reach on the trace's clock: the whole "
        "node list (4 GPUs) is offered 0.2500 x its GPUs, the lowest load it can be given"
    ]


# (id, options, the error's line after "rl-scheduler timeline: error: argument ")
CLASHES = [
    (
        "on one clock --load sizes the cluster: not with --node-fraction",
        ["--load", "0.5", "--node-fraction", "1"],
        "--load: on the trace's clock --load sizes the cluster; with --node-fraction the load follows "
        "from it (and is reported): give one of the two",
    ),
    (
        "compressed arrivals are not a scale of both",
        ["--compress-arrivals", "--time-scale", "2"],
        "--time-scale: scales arrivals and lifetimes alike; not with --compress-arrivals",
    ),
]


@pytest.mark.parametrize(("options", "error"), [r[1:] for r in CLASHES], ids=[r[0] for r in CLASHES])
def test_options_that_clash_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], error: str
) -> None:
    trace, nodes = write_trace(tmp_path, [("a", 1, 0, 2000), ("b", 0, 1000, 1001)], "n1,16000,65536,4,T4\n")
    argv = ["timeline", "--trace", trace, "--nodes", nodes, "--policy", "fgd", "--quiet", *options]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"rl-scheduler timeline: error: argument {error}"]
