"""A real Prometheus (Debian's ``prometheus`` package) on 127.0.0.1, scraping a running
rl-scheduler (and its trainer), and the Grafana variables a dashboard query needs."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.support import free_port, wait_for

JOB = "rl-scheduler"
SCRAPE_INTERVAL = "1s"
# What Grafana substitutes; $__rate_interval is at least four scrape intervals, and wide
# enough here that the test's burst of pods stays inside it while every query is tried.
GRAFANA_VARIABLES = {
    "$__rate_interval": "2m",
    "$__interval": "15s",
    "$__range": "10m",
    "$job": JOB,
}


def binary() -> str:
    """Debian's prometheus; ``make prometheus`` installs it. A missing one fails the test."""
    found = os.environ.get("RL_PROMETHEUS") or shutil.which("prometheus")
    assert found, "prometheus is not installed: run `make prometheus` (apt-get install prometheus)"
    return found


def substitute(expr: str) -> str:
    for variable, value in sorted(GRAFANA_VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a Grafana variable is left in {expr!r}"
    return expr


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's series (``/api/v1/query``); raises on a PromQL error."""
        address = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(address, timeout=10) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        data = answer["data"]
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        series: list[dict[str, Any]] = data["result"]
        return series

    def has_data(self, expr: str) -> bool:
        """At least one series with a finite value (a quantile of nothing is NaN)."""
        return any(math.isfinite(float(s["value"][1])) for s in self.query(expr))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _ready(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
        return int(response.status) == 200
    return False


def scrape_config(endpoint: dict[str, Any], token_file: Path) -> dict[str, Any]:
    """What prometheus-operator makes of a ServiceMonitor endpoint's scheme, TLS and
    bearer token (the token file is Prometheus' service account token in a cluster;
    ``token_file`` here)."""
    config: dict[str, Any] = {"scheme": endpoint.get("scheme", "http"), "metrics_path": endpoint["path"]}
    tls = endpoint.get("tlsConfig") or {}
    if tls:
        config["tls_config"] = {"insecure_skip_verify": bool(tls.get("insecureSkipVerify", False))}
    if endpoint.get("bearerTokenFile"):
        config["authorization"] = {"type": "Bearer", "credentials_file": str(token_file)}
    return config


@contextlib.contextmanager
def running_prometheus(
    targets: list[str], folder: Path, scrape: dict[str, Any] | None = None
) -> Iterator[Prometheus]:
    """Scrapes ``targets`` (host:port) under one job, as the chart's Service exposes the
    scheduler's and the trainer's ports together, with ``scrape`` (``scrape_config``)."""
    job = {"job_name": JOB, "static_configs": [{"targets": targets}], **(scrape or {})}
    config = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "scrape_configs": [job],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    command = [
        binary(),
        f"--config.file={folder / 'prometheus.yml'}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1h",
    ]
    log_path = folder / "prometheus.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    prometheus = Prometheus(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_for(lambda: process.poll() is None and _ready(prometheus.url), 60, "prometheus to be ready")
        yield prometheus
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_scraped(prometheus: Prometheus, expr: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if prometheus.has_data(expr):
            return
        time.sleep(1)
    raise AssertionError(f"no data for {expr} after {timeout_s} s:\n{prometheus.log()[-2000:]}")
