"""The evaluate and train commands on a small synthetic pod list."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scheduler.lifetimes import evaluate, train
from scheduler.lifetimes.model_file import MANIFEST_FILE, load_lifetime_model

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time\n"


@pytest.fixture
def trace(tmp_path: Path) -> str:
    """400 pods over 10 days; GPU pods live 10x longer; those past the end are censored."""
    rng = np.random.default_rng(0)
    rows = []
    end = 864_000
    for i in range(400):
        created = int(rng.uniform(0, end - 1000))
        gpu = i % 2
        life = int(rng.exponential(30_000 if gpu else 3000)) + 1
        deleted = min(created + life, end)
        rows.append(f"p{i},1000,1024,{gpu},{1000 * gpu},,LS,Running,{created},{deleted}")
    rows.append(f"last,1000,1024,0,0,,LS,Running,0,{end}")
    path = tmp_path / "openb_pod_list_synthetic.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return str(path)


def test_evaluate_prints_every_table(trace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    no_times = tmp_path / "openb_pod_list_untimed.csv"
    no_times.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,0,0\n")
    assert evaluate.main(["--fit", trace, "--test", f"{trace},{no_times}", "--split", "0.6"]) == 0
    out = capsys.readouterr().out
    assert "time split at" in out
    assert f"{no_times}: skipped:" in out
    assert "creation_time" in out
    assert out.count("lifetimes  ") >= 4
    assert "speed:" in out


def test_evaluate_refuses_a_bad_split(trace: str) -> None:
    with pytest.raises(SystemExit):
        evaluate.main(["--fit", trace, "--split", "1.5"])


def test_evaluate_reports_an_unknown_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert evaluate.main(["--fit", "no-such-trace"]) == 2
    assert "no-such-trace" in capsys.readouterr().out


def test_train_writes_a_loadable_model_with_its_record(trace: str, tmp_path: Path) -> None:
    out = tmp_path / "model"
    assert train.main(["--trace", trace, "--out", str(out)]) == 0
    model = load_lifetime_model(out)
    gpu = np.zeros((1, model.features))
    gpu[0, 0:2] = np.log(2.0), np.log(2.0)  # 1 core, 1 GiB
    cpu = gpu.copy()
    cpu[0, 2] = 1.0  # cpu_only
    medians = [model.remaining_quantiles(x, np.zeros(1), (0.5,))[0, 0] for x in (cpu, gpu)]
    assert medians[1] > 3 * medians[0]  # the GPU pods live longer
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["training"]["pods"] == 401
    assert manifest["evaluation"]["time_split"]["scores"]
