"""The schedulers the throughput benchmark compares, each run as a process of its own:
kube-scheduler (built from source, with a KubeSchedulerConfiguration), rl-scheduler
with a profile, and the null binder. Also what is measured about a process: CPU time
and peak memory from /proc, and scheduling-attempt latency quantiles from a
Prometheus histogram, interpolated as Prometheus' ``histogram_quantile`` does.
"""

from __future__ import annotations

import compileall
import json
import math
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

import scheduler
from scheduler.resources.gpu import PER_GPU_RESOURCES

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
# kube-scheduler's and rl-scheduler's buckets (client_golang ExponentialBuckets(0.001, 2, 15)).
ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))
ATTEMPT_HISTOGRAM = "scheduler_scheduling_attempt_duration_seconds"
STOP_GRACE_S = 20.0
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class SchedulerExitedError(RuntimeError):
    """The scheduler under test exited before the run was over."""


# ---- measuring a process ---------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_memory_mib(pid: int) -> float:
    """VmHWM: the most resident memory the process has had."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return math.nan


# ---- latency quantiles -----------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    p50_s: float
    p99_s: float
    count: int
    method: str  # "histogram" (interpolated) or "exact"


def parse_series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Samples of metric ``name`` in Prometheus text format, as (labels, value)."""
    samples = []
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        metric, _, label_text = series.partition("{")
        if metric == name:
            samples.append((dict(_LABEL.findall(label_text)), float(value)))
    return samples


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile on (upper bound, cumulative count) pairs sorted
    by bound and ending with +Inf: linear interpolation inside the bucket that holds
    the rank, the first bucket starting at 0, and the highest finite bound when the
    rank falls in the +Inf bucket."""
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]) or buckets[-1][1] == 0:
        return math.nan
    rank = q * buckets[-1][1]
    index = next(i for i, (_, count) in enumerate(buckets) if count >= rank)
    if index == len(buckets) - 1:
        return buckets[-2][0]
    upper, count = buckets[index]
    lower, below = (0.0, 0.0) if index == 0 else buckets[index - 1]
    if count == below:
        return upper
    return lower + (upper - lower) * (rank - below) / (count - below)


def scheduled_buckets(text: str, profile: str) -> list[tuple[float, float]]:
    """The ``result="scheduled"`` attempt histogram of ``profile``, as cumulative buckets."""
    by_bound: dict[float, float] = {}
    for labels, value in parse_series(text, ATTEMPT_HISTOGRAM + "_bucket"):
        if labels.get("result") == "scheduled" and labels.get("profile") == profile:
            bound = float(labels["le"])  # "+Inf" parses as inf
            by_bound[bound] = by_bound.get(bound, 0.0) + value
    return sorted(by_bound.items())


def bucketed(latencies_s: Iterable[float]) -> list[tuple[float, float]]:
    """Latencies into the attempt histogram's buckets (so quantiles are comparable)."""
    values = sorted(latencies_s)
    return [(bound, float(sum(v <= bound for v in values))) for bound in (*ATTEMPT_BUCKETS, math.inf)]


def latency_from_buckets(buckets: list[tuple[float, float]], method: str = "histogram") -> Latency:
    count = int(buckets[-1][1]) if buckets else 0
    return Latency(histogram_quantile(0.5, buckets), histogram_quantile(0.99, buckets), count, method)


# ---- the processes ---------------------------------------------------------------


@dataclass(frozen=True)
class RunContext:
    """What every scheduler under test is started with."""

    kubeconfig: Path
    qps: float
    burst: int
    workdir: Path  # this run's folder: logs, configuration, results
    port: int  # for /metrics


class SchedulerUnderTest:
    """One scheduler process: start, watch for an early exit, measure, stop."""

    kind = "scheduler"

    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.context: RunContext | None = None
        self.cwd = REPO

    @property
    def label(self) -> str:
        return self.kind

    def command(self, context: RunContext) -> list[str]:
        raise NotImplementedError

    def start(self, context: RunContext) -> int:
        self.context = context
        self.log_path = context.workdir / f"{self.scheduler_name}.log"
        environment = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            # rl-scheduler's /metrics open on 127.0.0.1, as kube-scheduler's here (below).
            "RL_SCHEDULER_SERVING__ALWAYS_ALLOW_PATHS": '["/healthz", "/readyz", "/livez", "/metrics"]',
        }
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(context), stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=self.cwd
            )
        return self.process.pid

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise SchedulerExitedError(
                f"{self.label} exited with code {self.process.returncode}; last lines of its log "
                f"({self.log_path}):\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def latency(self, bound: int, timeout_s: float = 15.0) -> Latency:
        """p50/p99 of the attempts that bound a pod, once ``bound`` are counted."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = latency_from_buckets(scheduled_buckets(self.scrape(), self.scheduler_name))
            if result.count >= bound or time.monotonic() > deadline:
                return result
            time.sleep(0.2)

    def serving_get(self, path: str) -> str:
        """GET ``path`` of the serving port: kube-scheduler and rl-scheduler both serve
        HTTPS on 127.0.0.1 here, with a self-signed certificate."""
        assert self.context is not None, "not started"
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        return _get(f"https://127.0.0.1:{self.context.port}{path}", insecure)

    def scrape(self) -> str:
        return self.serving_get("/metrics")

    def wait_ready(self, timeout_s: float) -> float:
        """Until /readyz answers 200 (kube-scheduler: its informers synced and handlers
        registered; rl-scheduler: its caches synced and a profile loaded); the seconds
        it took. A scheduler that exits meanwhile raises ``SchedulerExitedError``."""
        started = time.monotonic()
        while True:
            self.check_alive()
            try:
                self.serving_get("/readyz")
                return time.monotonic() - started
            except OSError:  # not listening yet, or 500 while not ready (HTTPError)
                if time.monotonic() - started > timeout_s:
                    raise
            time.sleep(0.05)

    def what_ran(self) -> str:
        return self.label

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _get(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        text: str = response.read().decode()
        return text


class KubeScheduler(SchedulerUnderTest):
    """kube-scheduler with one profile named after this benchmark's pods; /metrics is
    open to anonymous requests on 127.0.0.1 (no authentication-kubeconfig, so every
    request is anonymous, and /metrics is among the always-allowed paths)."""

    kind = "kube-scheduler"

    def __init__(self, scheduler_name: str, binary: Path) -> None:
        super().__init__(scheduler_name)
        self.binary = binary

    def configuration(self, context: RunContext) -> dict[str, object]:
        return {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {
                "kubeconfig": str(context.kubeconfig),
                "qps": context.qps,
                "burst": context.burst,
            },
            "leaderElection": {"leaderElect": False},
            "profiles": [
                {
                    "schedulerName": self.scheduler_name,
                    # What HAMi's chart configures: the per-GPU amounts of a share are the
                    # device plugin's, no node advertises them.
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {"ignoredResources": list(PER_GPU_RESOURCES)},
                        }
                    ],
                }
            ],
        }

    def command(self, context: RunContext) -> list[str]:
        config_path = context.workdir / "kube-scheduler.yaml"
        config_path.write_text(yaml.safe_dump(self.configuration(context)))
        return [
            str(self.binary),
            f"--config={config_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={context.port}",
            f"--cert-dir={context.workdir / 'kube-scheduler-certs'}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--v=1",
        ]


class RlScheduler(SchedulerUnderTest):
    """``rl-scheduler run --profile <profile>`` without leader election (as kube-scheduler),
    from this checkout or from ``checkout`` (another worktree, to compare two versions of
    the scheduler in one run; same virtualenv)."""

    kind = "rl-scheduler"

    def __init__(
        self, scheduler_name: str, profile: str, checkpoint: Path | None = None, checkout: Path | None = None
    ) -> None:
        super().__init__(scheduler_name)
        self.profile = profile
        self.checkpoint = checkpoint
        self.checkout = checkout
        if checkout is not None:
            self.cwd = checkout
        self._ran = ""

    @property
    def label(self) -> str:
        where = f"@{self.checkout}" if self.checkout is not None else ""
        return f"rl-scheduler {self.profile}{where}"

    def start(self, context: RunContext) -> int:
        compile_sources(self.cwd / "scheduler")
        return super().start(context)

    def command(self, context: RunContext) -> list[str]:
        command = [
            sys.executable, "-m", "scheduler.cli", "run",
            "--kubeconfig", str(context.kubeconfig),
            "--scheduler-name", self.scheduler_name,
            "--profile", self.profile,
            "--metrics-address", f"127.0.0.1:{context.port}",
            "--qps", str(context.qps),
            "--burst", str(context.burst),
            "--no-leader-elect",
        ]  # fmt: skip
        if self.checkpoint is not None:
            command += ["--checkpoint", str(self.checkpoint)]
        return command

    def latency(self, bound: int, timeout_s: float = 15.0) -> Latency:
        result = super().latency(bound, timeout_s)
        self._ran = self._policy_in_use()
        return result

    def _policy_in_use(self) -> str:
        """From ``rl_scheduler_policy_info``: which profile scored, and whether it was the
        configured one (source "policy") or the heuristic fallback."""
        active = [
            labels for labels, value in parse_series(self.scrape(), "rl_scheduler_policy_info") if value
        ]
        if not active:
            return f"{self.label} (policy unknown)"
        info = active[0]
        if info.get("source") == "fallback":
            return f"{self.label} -> fallback {info.get('profile')}"
        version = info.get("version", "")
        return f"{self.label}" + (f" ({version})" if version and version != "heuristic" else "")

    def what_ran(self) -> str:
        return self._ran or self.label


def compile_sources(package: Path | None = None) -> None:
    """The scheduler package's bytecode, as the image has it (pip compiles what it
    installs): with ``PYTHONDONTWRITEBYTECODE`` set, a source checkout would otherwise
    compile every module at each start (0.3 s of CPU before the first bind). Modules
    whose bytecode is current are skipped. Where it cannot be written (a read-only
    checkout), the run goes on and says that its starts include compiling."""
    package = Path(scheduler.__file__).parent if package is None else package
    if not compileall.compile_dir(package, quiet=2):
        print(
            f"\n  warning: {package}: bytecode not written; rl-scheduler's starts include compiling it",
            flush=True,
        )


class NullBinder(SchedulerUnderTest):
    """benchmarks/null_binder.py; it measures its own latencies and writes them on SIGTERM.
    With ``events`` it also posts the ``Scheduled`` event kube-scheduler posts."""

    def __init__(self, scheduler_name: str, events: bool = False) -> None:
        super().__init__(scheduler_name)
        self.events = events

    @property
    def label(self) -> str:
        return "null binder + events" if self.events else "null binder"

    def command(self, context: RunContext) -> list[str]:
        command = [
            sys.executable, str(BENCHMARKS / "null_binder.py"),
            "--kubeconfig", str(context.kubeconfig),
            "--scheduler-name", self.scheduler_name,
            "--qps", str(context.qps),
            "--burst", str(context.burst),
            "--result", str(self.result_path(context)),
        ]  # fmt: skip
        return [*command, "--events"] if self.events else command

    def result_path(self, context: RunContext) -> Path:
        return context.workdir / "null-binder.json"

    def latency(self, bound: int, timeout_s: float = 15.0) -> Latency:  # noqa: ARG002
        """Stops the binder (it writes its latencies on the way out): measure its CPU
        and memory before this."""
        assert self.context is not None
        self.stop()
        path = self.result_path(self.context)
        if not path.exists():
            raise SchedulerExitedError(f"null binder wrote no result; its log:\n{self.log_tail()}")
        latencies = json.loads(path.read_text())["latencies_s"]
        return latency_from_buckets(bucketed(latencies))
