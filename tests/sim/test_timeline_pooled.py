"""The pooled replay (``scheduler.sim.timeline_pooled``): the timeline replay's events on
a cluster without node boundaries, with the replay's backfilling queue or a strict FIFO."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scheduler.sim.timeline import TimelineLog, TimelineSpec
from scheduler.sim.timeline_metrics import timeline_metrics
from scheduler.sim.timeline_pooled import Queue, replay_pooled
from tests.sim.test_timeline import NODE_HEADER, POD_HEADER, SEMANTICS, Pod, replay, waits, write_trace

TWO_ONE_GPU_NODES = "n1,16000,65536,1,T4\nn2,16000,65536,1,T4\n"

# (name, CPU milli, GPUs, gpu_spec, creation, deletion)
Row = tuple[str, int, int, str, int, int]


def pooled(tmp_path: Path, pods: list[Pod], max_wait: float, nodes: str, queue: Queue) -> TimelineLog:
    """As ``test_timeline.replay`` (every node, no pod censored), pooled."""
    trace, node_list = write_trace(tmp_path, pods, nodes)
    spec = TimelineSpec(
        trace, "fgd", 42, node_list, max_wait_s=max_wait, node_fraction=1.0, trace_end_s=math.inf
    )
    return replay_pooled(spec, queue)


@pytest.mark.parametrize(
    ("pods", "max_wait", "expected"), [r[1:] for r in SEMANTICS], ids=[r[0] for r in SEMANTICS]
)
def test_one_node_pooled_is_the_timeline_replay(
    tmp_path: Path, pods: list[Pod], max_wait: float, expected: dict[str, float | None]
) -> None:
    """With one node there are no boundaries to remove: the backfilling queue waits as
    the timeline replay does, case for case."""
    log = pooled(tmp_path, pods, max_wait, "n1,16000,65536,1,T4\n", "backfill")
    assert waits(log) == expected


# (id, pods, max wait, waits on the nodes, pooled with backfill, pooled FIFO).
# Two nodes of one GPU each.
QUEUES = [
    (
        "a 2-GPU pod takes one GPU of each node; on nodes it fits nowhere",
        [("big", 2, 0, 100)],
        0,
        {"big": None},
        {"big": 0.0},
        {"big": 0.0},
    ),
    (
        "backfill starts c ahead of the waiting big pod; FIFO holds c until big has started",
        [("a", 1, 0, 100), ("big", 2, 10, 110), ("c", 1, 20, 120)],
        3600,
        {"a": 0.0, "big": None, "c": 0.0},
        {"a": 0.0, "big": 110.0, "c": 0.0},
        {"a": 0.0, "big": 90.0, "c": 180.0},
    ),
    (
        "FIFO: when the oldest fails at its max wait, the next starts then",
        [("a", 1, 0, 1000), ("big", 2, 10, 20), ("c", 1, 20, 30)],
        50,
        {"a": 0.0, "big": None, "c": 0.0},
        {"a": 0.0, "big": None, "c": 0.0},
        {"a": 0.0, "big": None, "c": 40.0},
    ),
]


@pytest.mark.parametrize(
    ("pods", "max_wait", "on_nodes", "backfill", "fifo"), [r[1:] for r in QUEUES], ids=[r[0] for r in QUEUES]
)
def test_queues_on_a_pooled_cluster(
    tmp_path: Path,
    pods: list[Pod],
    max_wait: float,
    on_nodes: dict[str, float | None],
    backfill: dict[str, float | None],
    fifo: dict[str, float | None],
) -> None:
    assert waits(replay(tmp_path, pods, max_wait, TWO_ONE_GPU_NODES)) == on_nodes
    assert waits(pooled(tmp_path, pods, max_wait, TWO_ONE_GPU_NODES, "backfill")) == backfill
    assert waits(pooled(tmp_path, pods, max_wait, TWO_ONE_GPU_NODES, "fifo")) == fifo


def write_rows(tmp_path: Path, rows: list[Row], nodes: str) -> TimelineSpec:
    trace = tmp_path / "pods.csv"
    trace.write_text(
        POD_HEADER
        + "".join(
            f"{name},{cpu},1024,{gpus},{1000 if gpus else 0},{spec},LS,Running,{made},{deleted},{made}\n"
            for name, cpu, gpus, spec, made, deleted in rows
        )
    )
    node_list = tmp_path / "nodes.csv"
    node_list.write_text(NODE_HEADER + nodes)
    return TimelineSpec(
        str(trace), "fgd", 42, str(node_list), max_wait_s=0, node_fraction=1.0, trace_end_s=math.inf
    )


# (id, pods, waits): nodes of 2 T4s and of 2 V100M16s, 16 cores each; max wait 0.
POOLS = [
    ("GPUs pool per model, not across them: 3 GPUs fit neither", [("p", 1000, 3, "", 0, 10)], {"p": None}),
    ("a pod that names a model takes that model's pool", [("p", 1000, 2, "V100M16", 0, 10)], {"p": 0.0}),
    (
        "once the named model's pool is taken, the other model's does not serve it",
        [("a", 1000, 2, "V100M16", 0, 10), ("p", 1000, 1, "V100M16", 1, 10)],
        {"a": 0.0, "p": None},
    ),
    ("CPU pools over the nodes: 20 cores fit two nodes of 16", [("p", 20000, 0, "", 0, 10)], {"p": 0.0}),
    ("but not more than their sum", [("p", 33000, 0, "", 0, 10)], {"p": None}),
]


@pytest.mark.parametrize(("rows", "expected"), [r[1:] for r in POOLS], ids=[r[0] for r in POOLS])
def test_pools(tmp_path: Path, rows: list[Row], expected: dict[str, float | None]) -> None:
    spec = write_rows(tmp_path, rows, "t,16000,65536,2,T4\nv,16000,65536,2,V100M16\n")
    assert waits(replay_pooled(spec)) == expected


def test_the_log_has_allocation_and_pending_and_no_nodes(tmp_path: Path) -> None:
    log = pooled(
        tmp_path, [("a", 1, 0, 100), ("big", 2, 10, 110), ("c", 1, 20, 120)], 3600, TWO_ONE_GPU_NODES, "fifo"
    )
    rows = list(zip(log.times.tolist(), log.allocated_milli.tolist(), log.pending.tolist(), strict=True))
    assert rows == [
        (0.0, 1000, 0),  # a started
        (10.0, 1000, 1),  # big waits for a second GPU
        (20.0, 1000, 2),  # c waits behind big
        (100.0, 2000, 1),  # a left: big started on both GPUs
        (200.0, 1000, 0),  # big left: c started
        (300.0, 0, 0),
    ]
    assert log.placed_on == ["NVIDIA-T4"] * 3  # the GPU pool each took from
    metrics = timeline_metrics(log)
    assert metrics.whole_free_nodes_pct is None
    assert metrics.multi_gpu_pods == 0  # 2 GPUs: under the 4 that make a multi-GPU pod


def test_compressed_arrivals_are_refused(tmp_path: Path) -> None:
    trace, node_list = write_trace(tmp_path, [("a", 1, 0, 100)])
    spec = TimelineSpec(trace, "fgd", 42, node_list, compress_arrivals=True, compression=2.0)
    with pytest.raises(ValueError, match="one clock"):
        replay_pooled(spec)
