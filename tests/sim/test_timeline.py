"""The timeline replay: pods arrive at their creation times, leave after their lifetimes,
wait in a FIFO queue when they fit nowhere, fail after max-wait; the compression that
gives an offered load (``compress_arrivals``); the metrics; ``rl-scheduler timeline``.
The one clock, the cluster sized for a load, censoring and the platform metrics are in
``test_timeline_clock``."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scheduler.cli import main
from scheduler.errors import SchedulerInputError
from scheduler.framework.profile import Decision, schedule_pod
from scheduler.sim import timeline
from scheduler.sim.offered_load import busy_from_index, compression_for_load, offered_gpu_milli
from scheduler.sim.timeline import TimelineLog, TimelineSpec, load_timed_workload, replay_timeline
from scheduler.sim.timeline_metrics import reduce_log, time_weighted_mean, timeline_metrics
from scheduler.state.cluster_state import ClusterState

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
ONE_GPU_NODE = "n1,16000,65536,1,T4\n"

# (name, num_gpu, creation_time, deletion_time); every pod asks 1 CPU and 1 GiB.
Pod = tuple[str, int, int, int]


def write_trace(tmp_path: Path, pods: list[Pod], nodes: str = ONE_GPU_NODE) -> tuple[str, str]:
    trace = tmp_path / "pods.csv"
    trace.write_text(
        POD_HEADER
        + "".join(
            f"{name},1000,1024,{gpus},{1000 if gpus else 0},,LS,Running,{created},{deleted},{created}\n"
            for name, gpus, created, deleted in pods
        )
    )
    node_list = tmp_path / "nodes.csv"
    node_list.write_text(NODE_HEADER + nodes)
    return str(trace), str(node_list)


def replay(tmp_path: Path, pods: list[Pod], max_wait: float, nodes: str = ONE_GPU_NODE) -> TimelineLog:
    """The trace's own clock, every node, policy fgd, seed 42; no pod censored (the one
    deleted last leaves, as the rows say)."""
    trace, node_list = write_trace(tmp_path, pods, nodes)
    spec = TimelineSpec(
        trace, "fgd", 42, node_list, max_wait_s=max_wait, node_fraction=1.0, trace_end_s=math.inf
    )
    return replay_timeline(spec)


def compressed(trace: str, nodes: str, seed: int = 42, **options: Any) -> TimelineLog:
    """The earlier mode: arrivals compressed to meet ``load``, lifetimes as they are; no
    pod censored."""
    return replay_timeline(
        TimelineSpec(trace, "fgd", seed, nodes, compress_arrivals=True, trace_end_s=math.inf, **options)
    )


def waits(log: TimelineLog) -> dict[str, float | None]:
    return {
        name: None if math.isnan(wait) else float(wait)
        for name, wait in zip(log.pod_names, log.wait_s, strict=True)
    }


# (id, pods, max wait, each pod's wait: None for a pod that failed). One node with one GPU.
SEMANTICS = [
    (
        "a pod leaves after its lifetime and frees its room",
        [("a", 1, 0, 100), ("b", 1, 150, 200)],  # without a's departure, b would fail
        3600,
        {"a": 0.0, "b": 0.0},
    ),
    (
        "a pending pod is placed when the pod on its node leaves: waits 100 - 10",
        [("a", 1, 0, 100), ("b", 1, 10, 60)],
        3600,
        {"a": 0.0, "b": 90.0},
    ),
    (
        "its lifetime counts from its placement: c waits for b's 50 s after 100",
        [("a", 1, 0, 100), ("b", 1, 10, 60), ("c", 1, 20, 30)],
        3600,
        {"a": 0.0, "b": 90.0, "c": 130.0},
    ),
    (
        "a pod pending past max-wait fails: b's wait would be 90 > 50",
        [("a", 1, 0, 100), ("b", 1, 10, 60)],
        50,
        {"a": 0.0, "b": None},
    ),
    (
        "a departure at the moment the wait runs out still places the pod (90 = 90)",
        [("a", 1, 0, 100), ("b", 1, 10, 60)],
        90,
        {"a": 0.0, "b": 90.0},
    ),
    (
        "max-wait 0: a pod that fits nowhere on arrival fails at once",
        [("a", 1, 0, 100), ("b", 1, 10, 60), ("c", 1, 100, 110)],
        0,
        {"a": 0.0, "b": None, "c": 0.0},
    ),
    (
        "an arrival at the moment a pod leaves takes its room",
        [("a", 1, 0, 100), ("b", 1, 100, 160)],
        0,
        {"a": 0.0, "b": 0.0},
    ),
    (
        "pending pods are served before an arrival at the same time: b (FIFO) gets the GPU",
        [("a", 1, 0, 100), ("b", 1, 10, 20), ("c", 1, 100, 110)],
        3600,
        {"a": 0.0, "b": 90.0, "c": 10.0},
    ),
    (
        "a pending pod that fits nowhere does not hold up the queue: 2-GPU big is passed over",
        [("a", 1, 0, 100), ("big", 2, 10, 20), ("small", 1, 20, 30)],
        200,
        {"a": 0.0, "big": None, "small": 80.0},
    ),
    (
        "an arrival gets its own cycle while others pend: the CPU-only pod is placed at once",
        [("a", 1, 0, 100), ("b", 1, 10, 20), ("cpu", 0, 20, 30)],
        3600,
        {"a": 0.0, "b": 90.0, "cpu": 0.0},
    ),
]


@pytest.mark.parametrize(
    ("pods", "max_wait", "expected"), [r[1:] for r in SEMANTICS], ids=[r[0] for r in SEMANTICS]
)
def test_semantics(
    tmp_path: Path, pods: list[Pod], max_wait: float, expected: dict[str, float | None]
) -> None:
    log = replay(tmp_path, pods, max_wait)
    assert waits(log) == expected
    assert log.pending[-1] == 0  # the replay runs until every pod is placed or failed


def test_departures_come_before_arrivals_at_the_same_time(tmp_path: Path) -> None:
    """b arrives as a leaves n1: its cycle sees n1 free and FGD prefers it (a whole GPU
    node used whole) to n2 (which it would leave with one GPU idle); an arrival before
    the departure would only see n2."""
    pods = [("a", 1, 0, 100), ("b", 1, 100, 160)]
    log = replay(tmp_path, pods, 0, "n1,16000,65536,1,T4\nn2,16000,65536,2,T4\n")
    assert (log.placed_on, waits(log)) == (["n1", "n1"], {"a": 0.0, "b": 0.0})


def test_a_pending_pod_gets_a_cycle_only_when_it_fits_a_node_a_pod_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cycles: one per arrival; at 100 (a leaves n1) b's, not big's (2 GPUs never pass
    n1's filters) nor c's (b took n1 first); at 150 (b leaves) c's."""
    cycles: Counter[str] = Counter()

    def counted(state: ClusterState, pod: Any, *args: Any, **kwargs: Any) -> Decision:
        cycles[pod.name] += 1
        return schedule_pod(state, pod, *args, **kwargs)

    monkeypatch.setattr(timeline, "schedule_pod", counted)
    log = replay(tmp_path, [("a", 1, 0, 100), ("b", 1, 10, 60), ("big", 2, 10, 30), ("c", 1, 20, 40)], 200)
    assert waits(log) == {"a": 0.0, "b": 90.0, "big": None, "c": 130.0}
    assert cycles == {"a": 1, "b": 2, "big": 1, "c": 2}


def test_the_log_records_allocation_and_pending_after_each_time(tmp_path: Path) -> None:
    log = replay(tmp_path, [("a", 1, 0, 100), ("b", 1, 10, 60), ("c", 1, 20, 25)], 3600)
    rows = list(zip(log.times.tolist(), log.allocated_milli.tolist(), log.pending.tolist(), strict=True))
    assert rows == [
        (0.0, 1000, 0),  # a placed
        (10.0, 1000, 1),  # b pending
        (20.0, 1000, 2),  # c pending
        (100.0, 1000, 1),  # a left, b placed (leaves at 150)
        (150.0, 1000, 0),  # b left, c placed (leaves at 155)
        (155.0, 0, 0),
    ]
    assert log.placed_on == ["n1", "n1", "n1"]


def test_lifetimes_are_at_least_one_second(tmp_path: Path) -> None:
    """A pod deleted when it was created still holds its GPU for 1 s: b waits 1 s."""
    log = replay(tmp_path, [("a", 1, 0, 0), ("b", 1, 0, 5)], 3600)
    assert waits(log) == {"a": 0.0, "b": 1.0}


# (creation, lifetime, GPU milli, target offered milli, k). Two pods, span 1000:
# offered(k) = 1000 * min(100k, 1000) / 1000 = min(100k, 1000).
# Three pods, span 200: offered(k) = (1000 min(50k, 200) + 500 min(400k, 100) + 0) / 200.
TWO = ([0.0, 1000.0], [100.0, 50.0], [1000.0, 1000.0])
THREE = ([0.0, 100.0, 200.0], [50.0, 400.0, 10.0], [1000.0, 500.0, 2000.0])
COMPRESSIONS = [
    pytest.param(*TWO, 400.0, 4.0, id="two pods: 400 milli at k 4"),
    pytest.param(*TWO, 250.0, 2.5, id="two pods: 250 milli at k 2.5"),
    pytest.param(*TWO, 1000.0, 10.0, id="two pods: all they can offer, first reached at k 10"),
    pytest.param(*THREE, 500.0, 1.0, id="three pods: (50000 + 50000) / 200 at k 1"),
    pytest.param(*THREE, 312.5, 0.25, id="three pods: (12500 + 50000) / 200 at k 1/4"),
    pytest.param(*THREE, 1250.0, 4.0, id="three pods: (200000 + 50000) / 200 at k 4, the most"),
]


# A snapshot: pod 0 (1 GPU, lives 1000 s) long before the rest; 99 CPU pods at 1000 (they
# live 1 s), one of them 0.5 GPU for 100 s, and the last at 2000. 101 pods, so the busy
# window opens at pod 1's arrival: [1000, 2000], span 1000. Pod 0 counts only inside it:
# offered(k) = 1000 max(0, min(1000k, 2000) - 1000) / 1000 + 500 min(100k, 1000) / 1000
# (from the first arrival it would be 1000 min(1000k, 2000) / 2000 + 500 min(100k, 1000) / 2000).
SNAPSHOT = (
    [0.0] + [1000.0] * 99 + [2000.0],
    [1000.0] + [100.0] + [1.0] * 99,
    [1000.0] + [500.0] + [0.0] * 99,
)
COMPRESSIONS += [
    pytest.param(
        *SNAPSHOT, 50.0, 1.0, id="snapshot: at k 1 pod 0 ends as the window opens; 500 x 100 / 1000"
    ),
    pytest.param(*SNAPSHOT, 575.0, 1.5, id="snapshot: 1000 x 500 / 1000 + 500 x 150 / 1000 at k 1.5"),
    pytest.param(*SNAPSHOT, 1500.0, 10.0, id="snapshot: pod 0 all window long + 500 x 1000 / 1000, the most"),
]


@pytest.mark.parametrize(
    ("pods", "index"),
    [
        (1, 0),
        (100, 0),  # floor(99 / 100): the first pod opens the window of 100 pods or fewer
        (101, 1),  # floor(100 / 100)
        (201, 2),
        (8152, 81),  # default: floor(8151 / 100)
    ],
)
def test_the_busy_window_opens_at_the_pod_at_the_first_percentile(pods: int, index: int) -> None:
    assert busy_from_index(pods) == index


@pytest.mark.parametrize(("creation", "lifetime", "gpu", "target", "k"), COMPRESSIONS)
def test_bisection_finds_the_compression_of_a_load(
    creation: list[float], lifetime: list[float], gpu: list[float], target: float, k: float
) -> None:
    arrays = (np.array(creation), np.array(lifetime), np.array(gpu))
    found = compression_for_load(*arrays, target)
    assert found == pytest.approx(k, rel=1e-9)
    assert offered_gpu_milli(*arrays, found) == pytest.approx(target, rel=1e-9)


def test_a_load_past_what_the_trace_offers_is_refused_saying_how_much_it_can(tmp_path: Path) -> None:
    # One node of 4 GPUs: the two pods above offer at most 1000 milli = 0.25 x capacity.
    trace, nodes = write_trace(tmp_path, [("a", 1, 0, 100), ("b", 1, 1000, 1050)], "n1,16000,65536,4,T4\n")
    workload = load_timed_workload(trace, nodes)
    assert workload.compression_for(0.1) == pytest.approx(4.0, rel=1e-9)  # 400 milli
    with pytest.raises(
        SchedulerInputError, match=r"0\.3 is out of reach: .* at most 0\.250 x the cluster's 4 GPUs \(every"
    ):
        workload.compression_for(0.3)


def test_with_room_for_every_pod_the_headline_is_the_offered_load(tmp_path: Path) -> None:
    """Nothing waits, so the GPU allocated over the arrival span is what the pods offer."""
    pods = [(f"p{i}", 1 + i % 2, 100 * i, 100 * i + 30 + 70 * (i % 3)) for i in range(12)]
    trace, nodes = write_trace(tmp_path, pods, "n1,64000,262144,8,T4\nn2,64000,262144,8,T4\n")
    log = compressed(trace, nodes, load=0.2)
    assert log.offered_load == pytest.approx(0.2, rel=1e-9)
    assert np.all(log.wait_s == 0)
    assert timeline_metrics(log).gpu_alloc_mean == pytest.approx(20.0, rel=1e-9)


def test_early_pods_run_from_time_zero_but_the_headline_averages_over_the_busy_window(tmp_path: Path) -> None:
    """Pod 0 (2 GPUs) arrives at 0, long before the 120 others: it is placed at 0 and
    runs, but the load and the GPU allocated are averaged from pod 1's arrival, where the
    busy window of 121 pods opens (floor(120 / 100) = 1). With room for every pod the
    headline is the offered load; averaged from time 0 it would be far less."""
    pods = [("early", 2, 0, 100_000)]
    pods += [
        (f"p{i:03d}", 1 + i % 2, 50_000 + 100 * i, 50_000 + 100 * i + 30 + 70 * (i % 3)) for i in range(120)
    ]
    trace, nodes = write_trace(tmp_path, pods, "n1,64000,262144,8,T4\nn2,64000,262144,8,T4\n")
    log = compressed(trace, nodes, load=0.4)
    assert log.busy_from_s == log.arrival_s[1] == 50_000 / log.compression
    assert (log.arrival_s[0], log.wait_s[0]) == (0.0, 0.0)
    assert log.offered_load == pytest.approx(0.4, rel=1e-9)
    assert np.all(log.wait_s == 0)
    assert timeline_metrics(log).gpu_alloc_mean == pytest.approx(40.0, rel=1e-9)
    assert reduce_log(log, points=3).curve_s[0] == log.busy_from_s  # the curves start there too


@pytest.mark.parametrize(
    ("start", "stop", "mean"),
    [
        (0.0, 30.0, (2 * 10 + 4 * 20) / 30),
        (5.0, 20.0, (2 * 5 + 4 * 10) / 15),
        (-10.0, 10.0, (0 * 10 + 2 * 10) / 20),  # 0 before the first row
        (20.0, 40.0, (4 * 10 + 0 * 10) / 20),
        (12.0, 12.0, 4.0),  # one instant: the value then
    ],
)
def test_time_weighted_mean_of_the_step_function(start: float, stop: float, mean: float) -> None:
    times, values = np.array([0.0, 10.0, 30.0]), np.array([2, 4, 0])
    assert time_weighted_mean(times, values, start, stop) == pytest.approx(mean)


def test_metrics_of_a_replay(tmp_path: Path) -> None:
    # a runs 0-100, b waits 90 then runs 100-150, big (2 GPUs) fails at 210, c waits 130.
    pods = [("a", 1, 0, 100), ("b", 1, 10, 60), ("big", 2, 10, 30), ("c", 1, 20, 40)]
    metrics = timeline_metrics(replay(tmp_path, pods, 200))
    assert metrics.pods_failed == 1
    # big: 2000 milli x 20 s of (1000 x 100 + 1000 x 50 + 2000 x 20 + 1000 x 20)
    assert metrics.gpu_hours_failed_pct == pytest.approx(100 * 40_000 / 210_000)
    assert (metrics.wait_p50_s, metrics.wait_p99_s) == pytest.approx((90.0, 90 + 0.98 * 40))  # of 0, 90, 130
    # over the arrival span 0-20: a's GPU all along; pending 0 (0-10), 2 (10-20)
    assert (metrics.gpu_alloc_mean, metrics.peak_pending, metrics.pending_mean) == (100.0, 3, 1.0)


def test_the_same_seed_gives_the_same_replay_and_another_seed_another(tmp_path: Path) -> None:
    nodes = "".join(f"n{i},16000,65536,2,T4\n" for i in range(6))
    pods = [(f"p{i:02d}", 1, 7 * i, 7 * i + 40 + (i * 37) % 90) for i in range(40)]
    trace, node_list = write_trace(tmp_path, pods, nodes)

    def run(seed: int) -> TimelineLog:
        return replay_timeline(TimelineSpec(trace, "default", seed, node_list, max_wait_s=60, load=0.9))

    first, again, other = run(1), run(1), run(2)
    assert first.placed_on == again.placed_on
    assert np.array_equal(first.wait_s, again.wait_s, equal_nan=True)
    assert np.array_equal(first.allocated_milli, again.allocated_milli)
    assert first.placed_on != other.placed_on  # the seed does choose the nodes


# Twelve nodes of two shapes, six of each (2 x T4; 4 x V100M16, more CPU and memory).
TWO_SHAPES = "".join(f"t{i},16000,65536,2,T4\n" for i in range(6)) + "".join(
    f"v{i},32000,131072,4,V100M16\n" for i in range(6)
)
ALL_NODES = [f"t{i}" for i in range(6)] + [f"v{i}" for i in range(6)]


def sampled_replay(tmp_path: Path, fraction: float, seed: int, load: float = 0.3) -> TimelineLog:
    pods = [(f"p{i:02d}", 1 + i % 2, 10 * i, 10 * i + 30 + (i * 17) % 50) for i in range(40)]
    trace, nodes = write_trace(tmp_path, pods, TWO_SHAPES)
    return compressed(trace, nodes, seed, load=load, node_fraction=fraction)


# (id, fraction, two seeds, whether their clusters are the same, nodes of each shape)
NODE_FRACTIONS = [
    ("the same seed draws the same nodes", 0.5, (1, 1), True, 3),  # 0.5 x 6 = 3 of each shape
    ("another seed draws other nodes", 0.5, (1, 2), False, 3),
    ("fraction 1 keeps every node, whatever the seed", 1.0, (1, 2), True, 6),
    ("a small fraction keeps one node of each shape", 0.01, (1, 2), False, 1),  # 0.06 rounds to 0 or 1
]


@pytest.mark.parametrize(
    ("fraction", "seeds", "same", "per_shape"),
    [r[1:] for r in NODE_FRACTIONS],
    ids=[r[0] for r in NODE_FRACTIONS],
)
def test_the_cluster_is_a_sample_of_the_node_list_drawn_with_the_seed(
    tmp_path: Path, fraction: float, seeds: tuple[int, int], same: bool, per_shape: int
) -> None:
    first, second = (sampled_replay(tmp_path, fraction, seed) for seed in seeds)
    assert (first.node_names == second.node_names) is same
    for log in (first, second):
        assert Counter(name[0] for name in log.node_names) == {"t": per_shape, "v": per_shape}
        assert set(log.placed_on) - {""} <= set(log.node_names)  # pods go only to the sample
        assert log.capacity_milli == 1000 * 6 * per_shape  # 2 + 4 GPUs per pair of shapes
    if fraction == 1.0:
        assert first.node_names == ALL_NODES


def test_the_load_is_a_multiple_of_the_fraction_of_the_node_list(tmp_path: Path) -> None:
    """0.3 x a quarter of the 36 GPUs (9) is 0.075 x all of them: the same k. A quarter
    of six nodes is 1.5, so each shape keeps 1 or 2: the sample holds 6, 8, 10 or 12 GPUs,
    never 9, and the log reports the load offered to what it holds."""
    quarter = sampled_replay(tmp_path, 0.25, 1, load=0.3)
    whole = sampled_replay(tmp_path, 1.0, 1, load=0.075)
    assert quarter.compression == pytest.approx(whole.compression, rel=1e-9)
    assert quarter.capacity_milli in (6000, 8000, 10_000, 12_000)
    assert quarter.offered_load == pytest.approx(0.3 * 9000 / quarter.capacity_milli, rel=1e-9)
    assert whole.offered_load == pytest.approx(0.075, rel=1e-9)


def test_the_curves_share_one_grid(tmp_path: Path) -> None:
    log = replay(tmp_path, [("a", 1, 0, 100), ("b", 1, 10, 60)], 3600)
    result = reduce_log(log, points=5)
    assert result.curve_s.tolist() == [0.0, 902.5, 1805.0, 2707.5, 3610.0]  # first arrival to 10 + 3600
    assert result.allocation_pct.tolist() == [100.0, 0.0, 0.0, 0.0, 0.0]
    assert result.pending.tolist() == [0.0] * 5


def test_the_command_prints_the_compression_the_table_and_the_pairs_and_writes_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --compress-arrivals (the earlier mode; the one clock's command line is in
    test_timeline_clock)."""
    pods = [(f"p{i:02d}", 1, 10 * i, 10 * i + 25 + (i * 13) % 40) for i in range(30)]
    trace, nodes = write_trace(tmp_path, pods, "".join(f"n{i},16000,65536,2,T4\n" for i in range(4)))
    out = tmp_path / "out"
    argv = ["timeline", "--trace", trace, "--nodes", nodes, "--policy", "fgd", "--policy", "default"]
    argv += [
        "--compress-arrivals",
        "--seeds",
        "1,2",
        "--load",
        "0.8",
        "--node-fraction",
        "0.5",
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
    assert lines[0] == (
        f"{trace}: arrivals compressed k = {protocol['compression']:.6g}x; offered GPU load 0.800 x the "
        "4 GPUs of 0.5 of the node list's 8 (the seeds' samples hold 4, offered 0.800 x theirs); "
        "max wait 20 s"
    )
    assert protocol["node_fraction"] == 0.5
    assert protocol["clusters"] == {
        seed: {"node_fraction": 0.5, "gpus": 4, "offered_load": pytest.approx(0.8)} for seed in ("1", "2")
    }  # two of the four nodes each
    assert protocol["clock"] == "compressed arrivals"
    header = "policy GPU alloc % whole-free nodes % whole-free 2-GPU % >=4-GPU wait p50 s p90 s wait GPU-h "
    header += ">=4-GPU failed failed GPU-h failed s/replay"
    assert lines[1].split() == header.split()
    assert [line.split()[0] for line in lines[3:5]] == ["fgd", "default"]
    policies = summary["policies"]
    assert list(policies) == ["fgd", "default"]
    for line, policy in zip(lines[3:5], policies, strict=True):
        per_seed = [policies[policy]["per_seed"][s]["gpu_alloc_mean"] for s in ("1", "2")]
        assert line.split()[1] == f"{np.median(per_seed):.2f}"
        assert policies[policy]["gpu_alloc_mean"]["median"] == pytest.approx(np.median(per_seed))
    pair = summary["paired"][0]
    assert (pair["policy"], pair["baseline"], pair["metric"], pair["seeds"]) == (
        "fgd",
        "default",
        "gpu_alloc_mean",
        [1, 2],
    )
    # no pod asks 4 GPUs: the multi-GPU waits have no value to pair
    assert [p["metric"] for p in summary["paired"]] == [
        *("gpu_alloc_mean", "whole_free_nodes_pct", "whole_free_2gpu_pct", "multi_gpu_wait_gpu_hours"),
        *("multi_gpu_failed", "pods_failed", "gpu_hours_failed"),
    ]
    assert any(line.split()[1:4] == ["fgd", "-", "default"] for line in lines[5:])
    assert lines[-1] == f"wrote {out / 'summary.json'} and {out / 'curves.png'}"
    assert (out / "curves.png").stat().st_size > 0


def test_the_command_refuses_a_load_out_of_reach_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, nodes = write_trace(tmp_path, [("a", 1, 0, 100), ("b", 1, 1000, 1050)], "n1,16000,65536,4,T4\n")
    argv = ["timeline", "--trace", trace, "--nodes", nodes, "--policy", "fgd", "--load", "0.5", "--quiet"]
    argv += ["--node-fraction", "1", "--compress-arrivals"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err.splitlines()) == (
        "",
        [
            "rl-scheduler timeline: error: argument --load: 0.5 is out of reach: at any compression "
            "this trace offers at most 0.250 x the cluster's 4 GPUs (every pod alive from its arrival, "
            "or the busy window's start, to the last arrival)"
        ],
    )
