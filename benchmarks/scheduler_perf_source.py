"""Where kube's scheduler_perf workloads live: ``test/integration/scheduler_perf`` of the
``k8s.io/kubernetes`` module of the release hack/versions.env pins, in the Go module cache
hack/build-binaries.sh uses (``.cache/go/mod``, or ``GOMODCACHE_OVERRIDE``). When the
module is not there (the build cleans its caches) it is fetched with ``go mod download``,
verified against go.sum's checksum database as the build does. Nothing is copied into
the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pinned_version() -> str:
    for line in (ROOT / "hack" / "versions.env").read_text().splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("hack/versions.env names no KUBERNETES_VERSION")


@cache
def scheduler_perf_dir() -> Path:
    """``test/integration/scheduler_perf`` of the pinned module, fetched when missing."""
    cache_dir = Path(os.environ.get("RL_DEVCLUSTER_CACHE", ROOT / ".cache"))
    mod_cache = Path(os.environ.get("GOMODCACHE_OVERRIDE", cache_dir / "go" / "mod"))
    version = pinned_version()
    module = mod_cache / "k8s.io" / f"kubernetes@{version}"
    if not module.is_dir():
        env = {**os.environ, "GOMODCACHE": str(mod_cache), "GOFLAGS": "-modcacherw", "GOTOOLCHAIN": "local"}
        out = subprocess.run(
            ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
            cwd=ROOT / "hack" / "tools" / "kubernetes",
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        module = Path(json.loads(out)["Dir"])
    return module / "test" / "integration" / "scheduler_perf"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())
