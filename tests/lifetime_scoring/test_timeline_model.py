"""The replay's lifetime model (``--lifetimes model``): no pod is forecast by a model
fitted on its own lifetime, and a replay runs with it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from scheduler.objects.pod import Pod
from scheduler.sim.timeline import TimelineSpec, replay_timeline
from scheduler.sim.timeline_model import FOLDS, cross_fitted
from scheduler.sim.trace import load_timed_pods

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
NODES = "sn,cpu_milli,memory_mib,gpu,model\na,96000,393216,8,V100M32\nb,64000,262144,2,P100\n"


def write_trace(path: Path, lifetime_of_p007: int) -> str:
    """60 pods 10 minutes apart; 1-GPU pods live 2 h, 2-GPU pods 20 min, CPU pods 1 h (plus
    up to 5 min), except ``p007``, whose lifetime is given, and ``p059``, deleted last
    (censored: still running when the list was taken)."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(60):
        gpus = (0, 1, 2)[i % 3]
        lifetime = (3600, 7200, 1200)[gpus] + int(rng.integers(0, 300))
        if i == 7:
            lifetime = lifetime_of_p007
        if i == 59:  # the list's end (its latest deletion), the same in both lists
            lifetime = 1_000_000
        created = 600 * i
        milli = 1000 if gpus else 0
        rows.append(
            f"p{i:03d},2000,8192,{gpus},{milli},,LS,Running,{created},{created + lifetime},{created}\n"
        )
    path.mkdir()
    (path / "pods.csv").write_text(POD_HEADER + "".join(rows))
    (path / "nodes.csv").write_text(NODES)
    return str(path / "pods.csv")


def forecast(trace: str, pods: list[Pod]) -> list[float]:
    return [float(v) for v in cross_fitted(trace)(pods, np.zeros(len(pods)))[:, 0]]


def test_a_pods_forecast_does_not_depend_on_its_own_lifetime(tmp_path: Path) -> None:
    short, long = write_trace(tmp_path / "short", 60), write_trace(tmp_path / "long", 400_000)
    pods = [p.pod for p in load_timed_pods(Path(short))]
    p007 = [pods[7]]  # a 1-GPU pod: fold 7 % 2 = 1
    assert pods[7].name == "p007"
    assert FOLDS == 2
    # Its forecast is its fold's model's, fitted without it: the same either way.
    assert forecast(short, p007) == forecast(long, p007)
    # A 1-GPU pod of the other fold (4 % 2 = 0) is forecast by a model that saw p007.
    p004 = [pods[4]]
    assert forecast(short, p004) != forecast(long, p004)
    # And the forecast tells the shapes apart: 2-GPU pods (20 min) < CPU (1 h) < 1-GPU (2 h).
    two, cpu, one = forecast(short, [pods[2], pods[3], pods[4]])
    assert two < cpu < one


def test_a_replay_runs_with_the_model(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", 7200)
    spec = TimelineSpec(
        trace,
        "fgd-reserve-lifetime",
        42,
        str(tmp_path / "t" / "nodes.csv"),
        node_fraction=1.0,
        trace_end_s=math.inf,
        lifetimes="model",
    )
    log = replay_timeline(spec)
    assert log.spec.label == "fgd-reserve-lifetime[model]"
    assert not log.failed.any()
