"""The Grafana dashboard: generated, not hand-edited, and every query names metrics the
scheduler exports (or, for the trainer's panels, metrics the trainer will)."""

from __future__ import annotations

import json
import re

import pytest

from dashboard.generate import CHART_JSON, outputs
from dashboard.panels import ROWS, PanelSpec
from scheduler.k8s.serving.metrics import Metrics

METRIC = re.compile(r"\b((?:rl_)?scheduler_[a-z_]+|up)\b")


def exported_series() -> set[str]:
    """Every sample name the scheduler's /metrics can carry (histograms' _bucket too)."""
    names: set[str] = {"up"}  # Prometheus adds it to every target
    for family in Metrics().registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names.add(f"{family.name}_total")
        if family.type == "histogram":
            names |= {f"{family.name}_{suffix}" for suffix in ("bucket", "sum", "count")}
    return names


def test_committed_files_are_the_generators_output() -> None:
    for path, text in outputs().items():
        assert path.read_text() == text, f"{path} is stale: run `make generate`"


def test_the_dashboard_has_the_panels_the_issue_asks_for() -> None:
    titles = {p["title"] for p in json.loads(CHART_JSON.read_text())["panels"]}
    for wanted in (
        "Scheduling throughput",
        "Scheduling latency",
        "Pending pods by queue",
        "Attempts by result",
        "Policy version",
        "Inference latency",
        "Decisions by source",
        "Fallback share",
        "Allocation by resource",
        "GPU fragmentation",
        "Policy promotions and rejections",
    ):
        assert wanted in titles


@pytest.mark.parametrize("spec", [p for row in ROWS for p in row.panels], ids=lambda p: p.title)
def test_queries_name_exported_metrics(spec: PanelSpec) -> None:
    exported = exported_series()
    for query in spec.queries:
        names = set(METRIC.findall(query.expr))
        assert names, query.expr
        if spec.needs == "trainer":
            assert all(n.startswith("rl_scheduler_trainer_") for n in names), query.expr
        else:
            assert names <= exported, f"{sorted(names - exported)} not exported; {query.expr}"
        assert 'job=~"$job"' in query.expr
