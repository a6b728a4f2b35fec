"""``simulate`` and ``evaluate`` on a local Ray cluster (``--ray-address``) print and
write what local processes do: the same summary, replay by replay (all but the time a
replay took), and the same pods counted by the progress bar."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.cli import main
from scheduler.plugins import profiles
from scheduler.sim.sweep import expand, run_sweep, run_trace
from tests.policy.test_plugin import write_trace

pytestmark = pytest.mark.slow

TIMINGS = ("seconds_per_replay",)


@pytest.fixture(autouse=True)
def _process_profiles_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """evaluate registers ``gnn`` as the training tools' profile in this process."""
    monkeypatch.setattr(profiles, "_EXTRA", dict(profiles._EXTRA))


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


# (command, its options; "{pods}" and "{nodes}" are the tiny trace's files)
COMMANDS = [
    pytest.param(
        ["simulate", "--trace", "{pods}", "--nodes", "{nodes}", "--policy", "fgd", "--policy", "gnn"],
        id="simulate, trace",
    ),
    pytest.param(
        ["simulate", "--synthetic", "--synthetic-nodes", "8", "--synthetic-pods", "150", "--policy", "gnn"],
        id="simulate, synthetic",
    ),
    pytest.param(
        ["evaluate", "--trace", "{pods}", "--nodes", "{nodes}", "--policy", "best-fit"],
        id="evaluate, trace",
    ),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_sweep_on_ray_writes_the_local_summary(
    tmp_path: Path, ray_cluster: str, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    pods, nodes = write_trace(tmp_path)
    argv = [a.replace("{pods}", str(pods)).replace("{nodes}", str(nodes)) for a in command]
    argv += ["--seeds", "42-44", "--quiet"]
    summaries = []
    for where in (["--workers", "2"], ["--ray-address", ray_cluster]):
        out = tmp_path / where[0].strip("-")
        assert main([*argv, *where, "--out", str(out)]) == 0, capsys.readouterr().err
        summaries.append(json.loads((out / "summary.json").read_text()))
    local, on_ray = summaries
    assert without_timings(on_ray) == without_timings(local)
    assert local["traces" if "traces" in local else "policies"]  # not two empty summaries


def test_progress_on_ray_counts_every_pod_replayed(tmp_path: Path, ray_cluster: str) -> None:
    pods, nodes = write_trace(tmp_path)
    specs = expand([str(pods)], ["fgd", "best-fit"], [42, 43], nodes=str(nodes))
    counted: dict[str, list[int]] = {"local": [], "ray": []}
    local = run_sweep(specs, run_trace, 2, counted["local"].append)
    on_ray = run_sweep(specs, run_trace, 2, counted["ray"].append, ray_cluster)
    assert [r.pods for r in on_ray] == [r.pods for r in local]
    assert sum(counted["ray"]) == sum(counted["local"]) == sum(r.pods for r in local)  # every arrival
