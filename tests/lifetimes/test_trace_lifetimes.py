"""openb pod lists as lifetime data: censoring, left truncation, QoS, the time split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scheduler.lifetimes.features import LIFETIME_FEATURES
from scheduler.lifetimes.trace_lifetimes import load_pod_lifetimes

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time\n"
# The window opens at 1000 (the earliest deletion); the list ends at 5000 (the latest).
ROWS = [
    "old,1000,1024,0,0,,LS,Running,0,1000",  # created before the window: enters at age 1000
    "a,1000,1024,1,500,,BE,Failed,1100,1400",
    "b,1000,1024,1,1000,,LS,Running,1200,3000",  # phase Running, yet deleted: ended
    "c,1000,1024,0,0,,Burstable,Running,2000,5000",  # deleted at the end: censored
    "d,1000,1024,0,0,,LS,Pending,4000,4000",  # lifetime 0: counted as 1 s
    "bad,x,1024,0,0,,LS,Running,10,20",  # reported and skipped
]


@pytest.fixture
def trace(tmp_path: Path) -> str:
    path = tmp_path / "openb_pod_list_tiny.csv"
    path.write_text(HEADER + "\n".join(ROWS) + "\n")
    return str(path)


def test_lifetimes_censoring_and_entry(trace: str) -> None:
    pods = load_pod_lifetimes(trace)
    assert len(pods) == 5
    assert pods.observed_s.tolist() == [1000, 300, 1800, 3000, 1]
    assert pods.ended.tolist() == [True, True, True, False, True]
    assert pods.entry_s.tolist() == [1000, 0, 0, 0, 0]
    qos = {
        name: pods.features[:, LIFETIME_FEATURES.index(f"qos_{name}")] for name in ("ls", "be", "burstable")
    }
    assert qos["ls"].tolist() == [1, 0, 1, 0, 1]
    assert qos["be"].tolist() == [0, 1, 0, 0, 0]
    assert qos["burstable"].tolist() == [0, 0, 0, 1, 0]


@pytest.mark.parametrize(
    ("cut", "observed", "ended"),
    [
        (1150.0, [1000, 50], [True, False]),  # a still runs at the cut: censored there
        (2500.0, [1000, 300, 1300, 500], [True, True, False, False]),
        (6000.0, [1000, 300, 1800, 3000, 1], [True, True, True, False, True]),
    ],
)
def test_what_was_known_at_a_cut(trace: str, cut: float, observed: list[float], ended: list[bool]) -> None:
    known = load_pod_lifetimes(trace).before(cut)
    assert known.observed_s.tolist() == observed
    assert known.ended.tolist() == ended
    assert np.all(known.entry_s <= known.observed_s)


def test_pods_created_from_a_cut(trace: str) -> None:
    after = load_pod_lifetimes(trace).created_from(2000.0)
    assert after.creation_s.tolist() == [2000, 4000]
    assert after.ended.tolist() == [False, True]
