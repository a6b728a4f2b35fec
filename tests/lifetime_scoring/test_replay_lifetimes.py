"""Lifetimes in the timeline replay: with hidden lifetimes (or weight 0)
fgd-reserve-lifetime decides exactly as fgd-reserve, pod for pod; the oracle is told
each pod's own lifetime and each node's residents' time left on the replay's clock;
the reports label the policy with what it was told."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pytest

from scheduler.objects.pod import Pod
from scheduler.plugins.remaining_lifetimes import (
    FloatArray,
    OracleLifetimes,
    RemainingLifetimes,
    ResidentClock,
    node_free_in_s,
)
from scheduler.sim.timeline import TimelineLog, TimelineSpec, replay_timeline
from scheduler.sim.timeline_lifetimes import LifetimeSource, spec_label, uses_lifetimes
from scheduler.state.cluster_state import ClusterState, IntArray

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
# Two 8-GPU and two 2-GPU nodes: 20 GPUs.
TIGHT_NODES = (
    "a,96000,393216,8,V100M32\nb,96000,393216,8,V100M32\nc,64000,262144,2,P100\nd,64000,262144,2,P100\n"
)


def write_trace(tmp_path: Path, pods: int, seed: int, nodes: str) -> tuple[str, str]:
    """``pods`` pods 20 minutes apart (plus up to 30 s), of 1, 2, 4 or 8 GPUs or a share,
    living 10 minutes to 40 hours (log-uniform), none censored."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(pods):
        created = 1200 * i + int(rng.integers(0, 30))
        lifetime = int(np.exp(rng.uniform(np.log(600), np.log(40 * 3600))))
        gpus, milli = [(1, 1000), (1, 1000), (1, 500), (2, 1000), (4, 1000), (8, 1000)][
            int(rng.integers(0, 6))
        ]
        rows.append(
            f"p{i:03d},4000,16384,{gpus},{milli},,LS,Succeeded,{created},{created + lifetime},{created}\n"
        )
    trace, node_list = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    trace.write_text(POD_HEADER + "".join(rows))
    node_list.write_text(NODE_HEADER + nodes)
    return str(trace), str(node_list)


def replay(
    trace: str,
    nodes: str,
    policy: str,
    lifetimes: LifetimeSource = "hidden",
    lifetime_args: tuple[tuple[str, str], ...] = (),
) -> TimelineLog:
    """Every node, seed 42, a max wait of 30 minutes, no pod censored."""
    spec = TimelineSpec(
        trace,
        policy,
        42,
        nodes,
        max_wait_s=1800.0,
        node_fraction=1.0,
        trace_end_s=math.inf,
        lifetimes=lifetimes,
        lifetime_args=lifetime_args,
    )
    return replay_timeline(spec)


def decisions(log: TimelineLog) -> tuple[list[str], list[float], list[int]]:
    return log.placed_on, np.nan_to_num(log.wait_s, nan=-1.0).tolist(), log.allocated_milli.tolist()


@pytest.mark.parametrize(
    ("case", "lifetimes", "args"),
    [
        ("hidden lifetimes", "hidden", ()),
        ("hidden lifetimes, a weight given", "hidden", (("weight", "50"),)),
        ("the oracle at weight 0", "oracle", (("weight", "0"),)),
    ],
)
def test_told_nothing_it_replays_as_fgd_reserve(
    tmp_path: Path, case: str, lifetimes: LifetimeSource, args: tuple[tuple[str, str], ...]
) -> None:
    trace, nodes = write_trace(tmp_path, 300, 7, TIGHT_NODES)
    base = replay(trace, nodes, "fgd-reserve")
    assert base.failed.any(), "the trace is tight enough that pods wait and fail"
    assert decisions(replay(trace, nodes, "fgd-reserve-lifetime", lifetimes, args)) == decisions(base), case


def test_the_oracle_changes_decisions(tmp_path: Path) -> None:
    trace, nodes = write_trace(tmp_path, 300, 7, TIGHT_NODES)
    base = replay(trace, nodes, "fgd-reserve")
    oracle = replay(trace, nodes, "fgd-reserve-lifetime", "oracle")
    assert oracle.placed_on != base.placed_on


class Recording(OracleLifetimes):
    """The oracle, remembering what it told: (now, pod, its time left) and (now, per node
    name its time until whole free)."""

    def __init__(self, lifetimes_s: dict[str, float], clock: ResidentClock) -> None:
        super().__init__(lifetimes_s, clock)
        self.pods: list[tuple[float, str, float]] = []
        self.nodes: list[tuple[float, dict[str, float]]] = []

    def pod_remaining_s(self, pod: Pod) -> float | None:
        left = super().pod_remaining_s(pod)
        assert left is not None
        self.pods.append((self.clock.now, pod.key, left))
        return left

    def gpu_free_in_s(self, state: ClusterState, nodes: IntArray) -> FloatArray | None:
        free_in = super().gpu_free_in_s(state, nodes)
        assert free_in is not None
        names = [state.nodes[int(row)].name for row in nodes]
        self.nodes.append((self.clock.now, dict(zip(names, node_free_in_s(free_in).tolist(), strict=True))))
        return free_in


def test_the_oracle_is_told_each_lifetime_and_what_is_left_of_the_residents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 24 8-GPU nodes: every pod is placed on arrival, so residents are read off the log.
    trace, nodes = write_trace(tmp_path, 120, 3, "".join(f"n{i},96000,393216,8,V100M32\n" for i in range(24)))
    recorded: list[Recording] = []

    def recording_source(
        source: LifetimeSource,
        _trace: str,
        keys: Sequence[str],
        lifetimes_s: Iterable[float],
        clock: ResidentClock,
    ) -> RemainingLifetimes:
        assert source == "oracle"
        recorded.append(Recording(dict(zip(keys, lifetimes_s, strict=True)), clock))
        return recorded[-1]

    monkeypatch.setattr("scheduler.sim.timeline.lifetime_source", recording_source)
    log = replay(trace, nodes, "fgd-reserve-lifetime", "oracle")
    assert not log.failed.any()
    np.testing.assert_array_equal(log.wait_s, 0.0)
    oracle = recorded[0]
    index = {name: i for i, name in enumerate(log.pod_names)}
    gpu_pods = [(f"openb/{n}", i) for n, i in index.items()]
    # Each GPU pod is asked about once, at its arrival, with its whole lifetime.
    assert [(now, key) for now, key, _ in oracle.pods] == [(log.arrival_s[i], key) for key, i in gpu_pods]
    np.testing.assert_allclose([left for _, _, left in oracle.pods], log.lifetime_s)
    # Each node's time until whole free: the latest end among the pods on it then, less now.
    ends = log.arrival_s + log.lifetime_s
    for (now, free_in), (_, key, _) in zip(oracle.nodes, oracle.pods, strict=True):
        me = index[key.removeprefix("openb/")]
        for node, seconds in free_in.items():
            here = [j for j in range(me) if log.placed_on[j] == node and ends[j] > now]
            assert seconds == pytest.approx(max((ends[j] - now for j in here), default=0.0)), (key, node)


@pytest.mark.parametrize(
    ("policy", "lifetimes", "args", "label"),
    [
        ("fgd-reserve-lifetime", "hidden", (), "fgd-reserve-lifetime"),
        ("fgd-reserve-lifetime", "oracle", (), "fgd-reserve-lifetime[oracle]"),
        ("fgd-reserve-lifetime", "oracle", (("weight", "30"),), "fgd-reserve-lifetime[oracle,weight=30]"),
        (
            "fgd-reserve-lifetime",
            "hidden",
            (("blocked", "NodeHours"),),
            "fgd-reserve-lifetime[blocked=NodeHours]",
        ),
    ],
)
def test_the_label_says_what_the_policy_was_told(
    policy: str, lifetimes: str, args: tuple[tuple[str, str], ...], label: str
) -> None:
    assert spec_label(policy, lifetimes, args) == label  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "uses"),
    [("fgd-reserve-lifetime", True), ("fgd-reserve", False), ("default", False), ("nosuch", False)],
)
def test_which_presets_read_lifetimes(policy: str, uses: bool) -> None:
    assert uses_lifetimes(policy) is uses
