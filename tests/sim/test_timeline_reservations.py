"""Reservations in the timeline replay (``--reserve``): a reserved 8-GPU pod starts
before a stream of small pods would let it, backfill follows what the lifetimes say,
and with no pod to reserve for the replay decides as without the option."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.sim.reservations import ReservationConfig
from scheduler.sim.timeline import TimelineLog, TimelineSpec, replay_timeline
from scheduler.sim.timeline_lifetimes import LifetimeSource
from tests.sim.test_timeline import Pod, waits, write_trace

EIGHT_GPU_NODE = "n1,64000,262144,8,T4\n"
# a holds one GPU until 100; big (8 GPUs) arrives at 10; short (1 GPU) at 20 ends at 50;
# then 1-GPU pods of 200 s each: two before a leaves, then one every 100 s until 4050,
# so from 50 on a small pod always runs: big fits only if they are kept off the node.
STREAM: list[Pod] = [
    ("a", 1, 0, 100),
    ("big", 8, 10, 60),
    ("short", 1, 20, 50),
    ("s50", 1, 50, 250),
    ("s90", 1, 90, 290),
    *[(f"s{t}", 1, t, t + 200) for t in range(150, 4100, 100)],
]


def replay(
    tmp_path: Path, pods: list[Pod], nodes: str, config: ReservationConfig | None, source: LifetimeSource
) -> TimelineLog:
    trace, node_list = write_trace(tmp_path, pods, nodes)
    spec = TimelineSpec(
        trace,
        "fgd",
        42,
        node_list,
        max_wait_s=3600,
        node_fraction=1.0,
        trace_end_s=math.inf,
        reservations=config,
        reservation_lifetimes=source,
    )
    return replay_timeline(spec)


# (id, reservations, lifetimes told, waits of the first pods: None for a pod that failed)
CASES = [
    (
        "off: the small pods take every GPU that frees, big fails at its max wait",
        None,
        "hidden",
        {"a": 0.0, "big": None, "short": 0.0, "s50": 0.0, "s90": 0.0, "s150": 0.0},
    ),
    (
        "hidden: n1 is reserved at 10 and no pod may take a GPU there; big starts when a "
        "leaves (100 - 10), the small pods when big leaves at 150",
        ReservationConfig(min_gpus=8),
        "hidden",
        {"a": 0.0, "big": 90.0, "short": 130.0, "s50": 100.0, "s90": 60.0, "s150": 0.0},
    ),
    (
        "oracle: short backfills (it ends at 50, before a at 100); s50 and s90 would "
        "outlast the start and wait",
        ReservationConfig(min_gpus=8),
        "oracle",
        {"a": 0.0, "big": 90.0, "short": 0.0, "s50": 100.0, "s90": 60.0, "s150": 0.0},
    ),
]


@pytest.mark.parametrize(("config", "source", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_reserved_multi_gpu_pod_starts_before_a_stream_of_small_pods(
    tmp_path: Path,
    config: ReservationConfig | None,
    source: LifetimeSource,
    expected: dict[str, float | None],
) -> None:
    log = replay(tmp_path, STREAM, EIGHT_GPU_NODE, config, source)
    got = waits(log)
    assert {name: got[name] for name in expected} == expected
    assert all(w is not None for name, w in got.items() if name != "big")  # no small pod fails


def test_a_reservation_expires_with_the_pods_max_wait(tmp_path: Path) -> None:
    """a holds its GPU for 5000 s: big's reservation keeps the small pods off n1 until
    big fails at 10 + 3600, then they start (s50 at 3610)."""
    pods: list[Pod] = [("a", 1, 0, 5000), ("big", 8, 10, 60), ("s50", 1, 50, 250)]
    log = replay(tmp_path, pods, EIGHT_GPU_NODE, ReservationConfig(min_gpus=8), "hidden")
    assert waits(log) == {"a": 0.0, "big": None, "s50": 3560.0}


MIXED = "n1,16000,65536,2,T4\nn2,64000,262144,8,T4\nn3,32000,131072,4,T4\n"


def test_with_no_pod_to_reserve_for_the_replay_decides_as_without_the_option(tmp_path: Path) -> None:
    """K = 9: no pod asks 9 GPUs, so no reservation is made and every decision (node and
    wait of each pod) is the one made without reservations."""
    pods: list[Pod] = [
        (f"p{i}", gpus, 7 * i, 7 * i + 40 + 13 * (i % 5)) for i, gpus in enumerate([1, 2, 4, 8, 1, 0, 2] * 6)
    ]
    off = replay(tmp_path, pods, MIXED, None, "hidden")
    on = replay(tmp_path, pods, MIXED, ReservationConfig(min_gpus=9), "oracle")
    assert (on.placed_on, waits(on)) == (off.placed_on, waits(off))
    assert any(w is None or w > 0 for w in waits(off).values())  # pods did wait: the queue ran


def test_the_command_pairs_a_profile_with_itself_plus_reservations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--policy fgd --policy fgd+reserve``: the same profile without and with
    reservations, labelled with K and the lifetimes told; big starts only with them."""
    trace, nodes = write_trace(tmp_path, STREAM[:12], EIGHT_GPU_NODE)
    out = tmp_path / "out"
    argv = ["timeline", "--trace", trace, "--nodes", nodes, "--policy", "fgd", "--policy", "fgd+reserve"]
    argv += ["--reserve-gpus", "8", "--reserve-lifetimes", "oracle", "--node-fraction", "1", "--seeds", "42"]
    argv += ["--workers", "1", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "fgd+reserve8[oracle]" in printed
    policies = json.loads((out / "summary.json").read_text())["policies"]
    assert {label: p["multi_gpu_failed"]["median"] for label, p in policies.items()} == {
        "fgd": 1,
        "fgd+reserve8[oracle]": 0,
    }
