"""What ``rl-scheduler timeline`` prints and writes: per policy the median over seeds
(and the range) of each metric (``timeline_metrics``), the first policy paired seed by
seed with each other one on the headline (``paired``), ``summary.json`` and a plot of
GPU allocation and pods pending over simulated time."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.sim import paired
from scheduler.sim.report import format_table
from scheduler.sim.timeline_metrics import TimelineResult

HEADLINE = "gpu_alloc_mean"
# (key, column header, digits)
COLUMNS = (
    (HEADLINE, "GPU alloc %", 2),
    ("gpu_hours_failed_pct", "GPU-h failed %", 2),
    ("pods_failed", "failed", 0),
    ("wait_p50_s", "wait p50 s", 1),
    ("wait_p99_s", "wait p99 s", 1),
    ("peak_pending", "peak pending", 0),
    ("pending_mean", "mean pending", 1),
    ("seconds", "s/replay", 1),
)
DEFINITIONS = {
    HEADLINE: (
        "GPU allocated, % of capacity, time-weighted over the busy window (from the arrival of the pod at "
        "the 1st percentile of arrival order to the last arrival)"
    ),
    "gpu_hours_failed_pct": "GPU x lifetime of the pods that failed, % of that of all pods",
    "pods_failed": "pods still pending max-wait after their arrival (never placed)",
    "wait_p50_s": "median of placement minus arrival over the pods placed, simulated seconds",
    "wait_p99_s": "99th percentile of the same",
    "peak_pending": "most pods pending at once",
    "pending_mean": "pods pending, time-weighted over the busy window",
    "seconds": "wall seconds of the replay's event loop",
}


def _spread(values: Sequence[float | int | None]) -> dict[str, float | None]:
    known = [float(v) for v in values if v is not None]
    if not known:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(known), "min": min(known), "max": max(known)}


def by_policy(results: Sequence[TimelineResult]) -> dict[str, list[TimelineResult]]:
    """Results per policy (in the order policies first appear), each sorted by seed."""
    grouped: dict[str, list[TimelineResult]] = defaultdict(list)
    for result in results:
        grouped[result.spec.policy].append(result)
    return {policy: sorted(runs, key=lambda r: r.spec.seed) for policy, runs in grouped.items()}


def headline_differences(results: Sequence[TimelineResult]) -> list[paired.PairedDifference]:
    """The first policy minus each other one on the headline, seed by seed."""
    grouped = by_policy(results)
    policies = list(grouped)
    if not policies:
        return []

    def per_seed(policy: str) -> dict[int, float]:
        return {r.spec.seed: r.metrics.gpu_alloc_mean for r in grouped[policy]}

    first = policies[0]
    found = (
        paired.paired_difference(first, other, HEADLINE, per_seed(first), per_seed(other))
        for other in policies[1:]
    )
    return [d for d in found if d is not None]


def summarise(results: Sequence[TimelineResult]) -> dict[str, Any]:
    first = results[0]
    spec = first.spec
    policies = {
        policy: {
            "seeds": [r.spec.seed for r in runs],
            **{key: _spread([getattr(r.metrics, key) for r in runs]) for key, _, _ in COLUMNS},
            "per_seed": {str(r.spec.seed): r.metrics.as_dict() for r in runs},
        }
        for policy, runs in by_policy(results).items()
    }
    return {
        "protocol": {
            "trace": spec.trace,
            "nodes": spec.nodes,
            "load": spec.load,
            "node_fraction": spec.node_fraction,
            "compression": first.compression,
            "pods": first.pods,
            "max_wait_s": spec.max_wait_s,
            "busy_from_s": first.busy_from_s,
            "last_arrival_s": first.last_arrival_s,
            # each seed's cluster: the GPUs its sample holds and the load offered to them
            "clusters": {
                str(r.spec.seed): {"gpus": r.capacity_milli // 1000, "offered_load": r.offered_load}
                for r in sorted(results, key=lambda r: r.spec.seed)
            },
        },
        "metric_definitions": DEFINITIONS,
        "policies": policies,
        "paired": [paired.as_json(d) for d in headline_differences(results)],
    }


def _cell(spread: dict[str, float | None], digits: int) -> str:
    if spread["median"] is None:
        return "-"
    median, low, high = (f"{spread[k]:.{digits}f}" for k in ("median", "min", "max"))
    return median if low == high else f"{median} ({low}-{high})"


def table(summary: dict[str, Any]) -> str:
    """Per policy, medians over seeds with (min-max) where the seeds differ."""
    rows = [
        [policy, *(_cell(entry[key], digits) for key, _, digits in COLUMNS)]
        for policy, entry in summary["policies"].items()
    ]
    return format_table(["policy", *(header for _, header, _ in COLUMNS)], rows)


def paired_table(summary: dict[str, Any], differences: Sequence[paired.PairedDifference]) -> str:
    return format_table(*paired.paired_rows({summary["protocol"]["trace"]: differences}))


def plot(results: Sequence[TimelineResult], path: Path) -> None:
    """Median curves over seeds per policy: GPU allocated (top), pods pending (bottom)."""
    import matplotlib  # noqa: PLC0415 - plotting is optional and slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    busy_from = results[0].busy_from_s
    for policy, runs in by_policy(results).items():
        minutes = (runs[0].curve_s - busy_from) / 60
        axes[0].plot(minutes, np.median([r.allocation_pct for r in runs], axis=0), label=policy)
        axes[1].plot(minutes, np.median([r.pending for r in runs], axis=0), label=policy)
    last_arrival = (results[0].last_arrival_s - busy_from) / 60
    for axis in axes:
        axis.axvline(last_arrival, color="grey", linestyle=":", linewidth=1)
        axis.grid(alpha=0.3)
    spec = results[0].spec
    share = "" if spec.node_fraction >= 1.0 else f", {spec.node_fraction:g} of the nodes"
    axes[0].set_title(
        f"{spec.trace}{share}: arrivals compressed {results[0].compression:.0f}x (dotted: last arrival)"
    )
    axes[0].set_ylabel("GPU allocated (% of capacity)")
    axes[1].set_ylabel("pods pending")
    axes[1].set_xlabel("simulated minutes from the busy window's start (median over seeds)")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
