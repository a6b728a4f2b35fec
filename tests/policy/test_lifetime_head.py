"""The gnn-lifetime policy: its lifetime features on a small table of nodes and
residents (the oracle's lifetimes), the unknown encoding, the head's file, and that
with nothing known it decides as gnn."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from scheduler.framework.profile import schedule_pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.remaining_lifetimes import HiddenLifetimes, OracleLifetimes, ResidentClock
from scheduler.plugins.scores.fgd_reserve_lifetime import Blocked
from scheduler.policy.lifetime_features import LIFETIME_PAIR_FEATURES, lifetime_pair_rows
from scheduler.policy.lifetime_head import LifetimeHead, load_head, save_head
from scheduler.policy.weights import CheckpointError
from scheduler.sim.replay import trace_typical_pods
from scheduler.state.cluster_state import ClusterState
from tests.builders import all_nodes, make_node, make_pod
from tests.lifetime_scoring.test_fgd_reserve_lifetime import HOUR, RESIDENTS, cluster

HORIZON_S = 168 * HOUR


def lg(x: float) -> float:
    return math.log2(1.0 + x)


def oracle(clock: ResidentClock, new_h: float) -> OracleLifetimes:
    hours = {**RESIDENTS, "new": new_h}
    return OracleLifetimes({f"default/{n}": h * HOUR for n, h in hours.items()}, clock)


@pytest.mark.parametrize(
    ("feature", "expected"),
    [
        # A 1-GPU pod of 4 h; nodes busy (free in 8 h), short (1 h), free, small, cpu.
        ("lifetime_known", [1, 1, 1, 1, 1]),
        ("pod_remaining", [lg(4)] * 5),
        ("node_free_in", [lg(8), lg(1), 0, 0, 0]),
        # One of 8 GPUs busy: mean 8/8 = 1 h on busy, 1/8 h on short.
        ("gpu_free_in_mean", [lg(1), lg(1 / 8), 0, 0, 0]),
        # GPUs x (4 - free in)+: 0, 8 x 3, 8 x 4, 2 x 4, 0 GPUs (the hand rule's term).
        ("blocked_gpu_hours", [0, lg(24), lg(32), lg(8), 0]),
        ("blocked_node_hours", [0, lg(3), lg(4), lg(4), 0]),
        ("outlived_by_node", [lg(4), 0, 0, 0, 0]),
        ("whole_free_now", [0, 0, 1, 1, 0]),
    ],
)
def test_lifetime_features(feature: str, expected: list[float]) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    rows = lifetime_pair_rows(
        oracle(clock, 4.0), state, make_pod("new", cpu="4", gpus=1), all_nodes(state), HORIZON_S
    )
    assert rows is not None
    np.testing.assert_allclose(rows[:, LIFETIME_PAIR_FEATURES.index(feature)], expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("case", "lifetimes", "pod"),
    [
        ("hidden lifetimes", "hidden", make_pod("new", cpu="4", gpus=1)),
        ("a CPU-only pod", "oracle", make_pod("new", cpu="4")),
    ],
)
def test_unknown_encoding_adds_nothing(case: str, lifetimes: str, pod: object) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    source = HiddenLifetimes() if lifetimes == "hidden" else oracle(clock, 4.0)
    assert lifetime_pair_rows(source, state, pod, all_nodes(state), HORIZON_S) is None, case  # type: ignore[arg-type]
    assert LifetimeHead.teacher().correction(source, state, pod, all_nodes(state)) is None, case


@pytest.mark.parametrize(
    ("blocked", "hours"),
    [
        # -10 x log2(1 + blocked hours): fgd-reserve-lifetime's term, in the node's
        # GPU-hours or in node-hours (the features' table above).
        ("GPUHours", [0, 24, 32, 8, 0]),
        ("NodeHours", [0, 3, 4, 4, 0]),
    ],
)
def test_teacher_head_is_the_hand_rule(blocked: Blocked, hours: list[float]) -> None:
    clock = ResidentClock()
    state = cluster(clock)
    term = LifetimeHead.teacher(blocked=blocked).correction(
        oracle(clock, 4.0), state, make_pod("new", cpu="4", gpus=1), all_nodes(state)
    )
    assert term is not None
    np.testing.assert_allclose(term, -10 * np.log2(1 + np.array(hours)), rtol=1e-6)


def test_head_round_trip_and_refusals(tmp_path: Path) -> None:
    head = LifetimeHead(np.arange(len(LIFETIME_PAIR_FEATURES), dtype=np.float32), 24 * HOUR, {"stage": "t"})
    folder = save_head(tmp_path / "h", head)
    loaded = load_head(folder)
    np.testing.assert_array_equal(loaded.weights, head.weights)
    assert loaded.horizon_s == 24 * HOUR
    assert loaded.training == {"stage": "t"}
    manifest = json.loads((folder / "manifest.json").read_text())
    for key, value, field in [
        ("lifetime_schema_version", 99, "lifetime_schema_version"),
        ("features", ["x"], "features"),
        ("weights", {"sha256": "0" * 64}, "weights.sha256"),
    ]:
        bad = tmp_path / f"bad-{key}"
        save_head(bad, head)
        (bad / "manifest.json").write_text(json.dumps({**manifest, key: value}))
        with pytest.raises(CheckpointError, match=field):
            load_head(bad)


def test_shipped_head_loads() -> None:
    assert load_head().weights.shape == (len(LIFETIME_PAIR_FEATURES),)


def test_hidden_lifetimes_decide_as_gnn() -> None:
    """With nothing known, gnn-lifetime places every pod where gnn does."""
    pods = [
        make_pod(f"p{i}", cpu=str(2 + i % 5), gpus=1, gpu_milli=500)
        if i % 4 == 0
        else make_pod(f"p{i}", cpu=str(2 + i % 5), gpus=i % 3)
        for i in range(30)
    ]
    typical = trace_typical_pods(pods)
    chosen: dict[str, list[str]] = {}
    for policy in ("gnn", "gnn-lifetime"):
        state = ClusterState(
            [make_node(f"n{i}", cpu="64", memory="256Gi", gpus=(8 if i % 2 else 4)) for i in range(6)]
        )
        ctx = ProfileContext(rng=np.random.default_rng(0), typical_pods=typical, lifetimes=HiddenLifetimes())
        profile = build_profile(policy, ctx)
        rng = np.random.default_rng(0)
        chosen[policy] = []
        for pod in pods:
            decision = schedule_pod(state, pod, profile, rng)
            if decision.scheduled:
                state.place(pod, decision.node, decision.gpu_indices)
            chosen[policy].append(decision.node if decision.scheduled else "")
    assert chosen["gnn-lifetime"] == chosen["gnn"]
    assert any(chosen["gnn"])
