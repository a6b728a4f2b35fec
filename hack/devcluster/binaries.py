"""Where the pinned control-plane binaries live, and building them when missing.

The build itself is hack/build-binaries.sh (plain bash + go, usable without Python);
this module runs it and turns its exit codes into typed errors.
"""

from __future__ import annotations

import collections
import gzip
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from devcluster.errors import BuildFailedError, ToolchainMissingError

HACK_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = HACK_DIR.parent
BUILD_SCRIPT = HACK_DIR / "build-binaries.sh"
VERSIONS_FILE = HACK_DIR / "versions.env"
CLUSTER_GROUPS = ("kubernetes", "etcd", "kwok")
# kubelet, kube-proxy, containerd and the DRA test driver: only a real node needs them.
ALL_GROUPS = (*CLUSTER_GROUPS, "node", "containerd", "dra", "helm")
# Exit codes of build-binaries.sh (documented in its header).
_EXIT_NO_TOOLCHAIN = 3


def cache_dir() -> Path:
    """The git-ignored cache: binaries, Go caches and cluster state.

    RL_DEVCLUSTER_CACHE moves it, e.g. to a home-directory folder that outlives a
    fresh clone so CI does not rebuild Kubernetes on every run.
    """
    return Path(os.environ.get("RL_DEVCLUSTER_CACHE", REPO_ROOT / ".cache")).resolve()


def openb_file(stem: str) -> Path:
    """An openb CSV by name (``openb_node_list_gpu_node``): from $RL_OPENB_DIR if set,
    else the gzipped copy the scheduler package ships in scheduler/data/openb."""
    if "RL_OPENB_DIR" in os.environ:
        return Path(os.environ["RL_OPENB_DIR"]) / f"{stem}.csv"
    return REPO_ROOT / "scheduler" / "data" / "openb" / f"{stem}.csv.gz"


def open_csv(path: Path) -> TextIO:
    """A CSV file for reading, gzipped or not."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="")
    return path.open(newline="")


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """KEY=VALUE pairs of hack/versions.env (comments and blank lines skipped)."""
    versions: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of the built binaries (they may not exist yet)."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    kwok: Path
    kwokctl: Path
    helm: Path
    kubelet: Path
    kube_proxy: Path
    containerd: Path
    dra_test_driver: Path

    @classmethod
    def in_cache(cls, cache: Path | None = None) -> Binaries:
        v = read_versions()
        bin_root = (cache or cache_dir()) / "bin"
        kube = bin_root / f"kubernetes-{v['KUBERNETES_VERSION']}"
        kwok = bin_root / f"kwok-{v['KWOK_VERSION']}"
        node = bin_root / f"node-{v['KUBERNETES_VERSION']}"
        return cls(
            etcd=bin_root / f"etcd-{v['ETCD_VERSION']}" / "etcd",
            kube_apiserver=kube / "kube-apiserver",
            kube_controller_manager=kube / "kube-controller-manager",
            kube_scheduler=kube / "kube-scheduler",
            kubectl=kube / "kubectl",
            kwok=kwok / "kwok",
            kwokctl=kwok / "kwokctl",
            helm=bin_root / f"helm-{v['HELM_VERSION']}" / "helm",
            kubelet=node / "kubelet",
            kube_proxy=node / "kube-proxy",
            containerd=bin_root / f"containerd-{v['CONTAINERD_VERSION']}" / "containerd",
            dra_test_driver=bin_root / f"dra-{v['KUBERNETES_VERSION']}" / "dra-test-driver",
        )


def ensure_binaries(
    groups: tuple[str, ...] = CLUSTER_GROUPS,
    *,
    env: dict[str, str] | None = None,
    out: TextIO | None = None,
) -> Binaries:
    """Build whatever of ``groups`` is not cached yet, streaming the script's progress.

    Raises ToolchainMissingError when Go is absent or too old, BuildFailedError otherwise.
    A fully cached set returns without calling Go at all.
    """
    out = out or sys.stderr
    run_env = dict(os.environ if env is None else env)
    run_env.setdefault("RL_DEVCLUSTER_CACHE", str(cache_dir()))
    # Keep the last lines: they say what went wrong if the build fails.
    tail: collections.deque[str] = collections.deque(maxlen=20)
    with subprocess.Popen(
        ["bash", str(BUILD_SCRIPT), *groups],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=run_env,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            out.write(line)
            out.flush()
    detail = "\n".join(tail)
    if proc.returncode == _EXIT_NO_TOOLCHAIN:
        last = detail.splitlines()[-1] if detail else "no Go toolchain"
        raise ToolchainMissingError(last.removeprefix("build-binaries: error: "))
    if proc.returncode != 0:
        raise BuildFailedError(f"{BUILD_SCRIPT.name} exited {proc.returncode}:\n{detail}")
    return Binaries.in_cache(Path(run_env["RL_DEVCLUSTER_CACHE"]))
