"""What ``rl-scheduler timeline`` prints and writes: per policy the median over seeds
(and the range) of each metric (``timeline_metrics``), the first policy paired seed by
seed with each other one on what a platform team watches (``PAIRED``, with ``paired``'s
Student-t interval), ``summary.json`` and a plot of GPU allocated, whole free GPU nodes
and pods pending over time."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.sim import paired
from scheduler.sim.report import format_table
from scheduler.sim.timeline_metrics import MULTI_GPU, TimelineResult, whole_free_key

HEADLINE = "gpu_alloc_mean"
WHOLE_FREE_LARGEST = "whole_free_largest_pct"  # stands for whole_free_<g>gpu_pct, g the largest nodes' GPUs
# (key, column header, digits)
COLUMNS = (
    (HEADLINE, "GPU alloc %", 2),
    ("whole_free_nodes_pct", "whole-free nodes %", 2),
    (WHOLE_FREE_LARGEST, "whole-free {g}-GPU %", 2),
    ("multi_gpu_wait_p50_s", f">={MULTI_GPU}-GPU wait p50 s", 0),
    ("multi_gpu_wait_p90_s", "p90 s", 0),
    ("multi_gpu_wait_gpu_hours", "wait GPU-h", 1),
    ("multi_gpu_failed", f">={MULTI_GPU}-GPU failed", 0),
    ("pods_failed", "failed", 0),
    ("gpu_hours_failed", "GPU-h failed", 1),
    ("seconds", "s/replay", 1),
)
# Kept in summary.json, not in the table.
MORE = ("gpu_hours_failed_pct", "wait_p50_s", "wait_p99_s", "peak_pending", "pending_mean", "multi_gpu_pods")
# Paired seed by seed, first policy minus each other one.
PAIRED = (
    HEADLINE,
    "whole_free_nodes_pct",
    WHOLE_FREE_LARGEST,
    "multi_gpu_wait_p50_s",
    "multi_gpu_wait_p90_s",
    "multi_gpu_wait_gpu_hours",
    "multi_gpu_failed",
    "pods_failed",
    "gpu_hours_failed",
)
DEFINITIONS = {
    HEADLINE: (
        "GPU allocated, % of capacity, time-weighted over the busy window (from the arrival of the pod at "
        "the 1st percentile of arrival order to the last arrival)"
    ),
    "whole_free_nodes_pct": (
        "GPU nodes with every GPU free (no pod holds any share of them), % of the GPU nodes, time-weighted "
        "over the busy window; whole_free_<g>gpu_pct: the same of the nodes with g GPUs"
    ),
    "multi_gpu_wait_p50_s": (
        f"median wait of the pods asking {MULTI_GPU} GPUs or more (a failed pod's: the max wait), "
        "seconds of the trace's clock"
    ),
    "multi_gpu_wait_p90_s": "90th percentile of the same",
    "multi_gpu_wait_gpu_hours": "sum over the same pods of GPUs x wait, GPU-hours",
    "multi_gpu_failed": f"pods asking {MULTI_GPU} GPUs or more that failed",
    "pods_failed": "pods still pending max-wait after their arrival (never placed)",
    "gpu_hours_failed": (
        "GPU x the lifetime the failed pods would have run (a censored pod's as observed), GPU-hours"
    ),
    "gpu_hours_failed_pct": "the same, % of that of all pods",
    "wait_p50_s": "median of placement minus arrival over the pods placed, seconds of the trace's clock",
    "wait_p99_s": "99th percentile of the same",
    "peak_pending": "most pods pending at once",
    "pending_mean": "pods pending, time-weighted over the busy window",
    "multi_gpu_pods": f"pods asking {MULTI_GPU} GPUs or more",
    "seconds": "wall seconds of the replay's event loop",
}


def largest_gpu_count(results: Sequence[TimelineResult]) -> int:
    """The GPUs of the largest nodes of any replay's cluster (8 on the openb list)."""
    return max(r.largest_gpu_count for r in results)


def _key(results: Sequence[TimelineResult], key: str) -> str:
    return whole_free_key(largest_gpu_count(results)) if key == WHOLE_FREE_LARGEST else key


def metric_value(result: TimelineResult, key: str) -> float | int | None:
    """A metric of a result by its ``as_dict`` key (None where the replay has none)."""
    return result.metrics.as_dict().get(key)


def _spread(values: Sequence[float | int | None]) -> dict[str, float | None]:
    known = [float(v) for v in values if v is not None]
    if not known:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(known), "min": min(known), "max": max(known)}


def by_policy(results: Sequence[TimelineResult]) -> dict[str, list[TimelineResult]]:
    """Results per policy (in the order policies first appear), each sorted by seed."""
    grouped: dict[str, list[TimelineResult]] = defaultdict(list)
    for result in results:
        grouped[result.spec.label].append(result)
    return {policy: sorted(runs, key=lambda r: r.spec.seed) for policy, runs in grouped.items()}


def headline_differences(
    results: Sequence[TimelineResult], metrics: Sequence[str] = PAIRED
) -> list[paired.PairedDifference]:
    """The first policy minus each other one on each of ``metrics``, seed by seed (a
    metric a seed has no value of, such as a wait without multi-GPU pods, leaves it out)."""
    grouped = by_policy(results)
    policies = list(grouped)
    if not policies:
        return []

    def per_seed(policy: str, key: str) -> dict[int, float]:
        values = {r.spec.seed: metric_value(r, _key(results, key)) for r in grouped[policy]}
        return {seed: math.nan if v is None else float(v) for seed, v in values.items()}

    first = policies[0]
    found = (
        paired.paired_difference(first, other, _key(results, key), per_seed(first, key), per_seed(other, key))
        for other in policies[1:]
        for key in metrics
    )
    return [d for d in found if d is not None]


def summarise(results: Sequence[TimelineResult]) -> dict[str, Any]:
    first = results[0]
    spec = first.spec
    policies = {
        policy: {
            "seeds": [r.spec.seed for r in runs],
            **{
                _key(results, key): _spread([metric_value(r, _key(results, key)) for r in runs])
                for key in (*(c[0] for c in COLUMNS), *MORE)
            },
            "per_seed": {str(r.spec.seed): r.metrics.as_dict() for r in runs},
        }
        for policy, runs in by_policy(results).items()
    }
    return {
        "protocol": {
            "trace": spec.trace,
            "nodes": spec.nodes,
            "clock": "compressed arrivals" if spec.compress_arrivals else "one clock",
            "load": spec.load,
            "node_fraction": spec.node_fraction,
            "compression": first.compression,
            "time_scale": first.time_scale,
            "pods": first.pods,
            "censored_pods": first.censored,
            "largest_gpu_count": largest_gpu_count(results),  # whole_free_largest_pct's nodes
            "max_wait_s": spec.max_wait_s,
            # replay seconds (trace seconds / time_scale; arrivals / compression)
            "busy_from_s": first.busy_from_s,
            "last_arrival_s": first.last_arrival_s,
            # each seed's cluster: the share of the node list, its GPUs and the load offered to them
            "clusters": {
                str(r.spec.seed): {
                    "node_fraction": r.node_fraction,
                    "gpus": r.capacity_milli // 1000,
                    "offered_load": r.offered_load,
                }
                for r in sorted(results, key=lambda r: (r.spec.seed, r.spec.label))
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
    gpus = summary["protocol"]["largest_gpu_count"]
    largest = whole_free_key(gpus)
    rows = [
        [
            policy,
            *(
                _cell(entry[largest if key == WHOLE_FREE_LARGEST else key], digits)
                for key, _, digits in COLUMNS
            ),
        ]
        for policy, entry in summary["policies"].items()
    ]
    headers = [header.format(g=gpus) for _, header, _ in COLUMNS]
    return format_table(["policy", *headers], rows)


def paired_table(summary: dict[str, Any], differences: Sequence[paired.PairedDifference]) -> str:
    return format_table(*paired.paired_rows({summary["protocol"]["trace"]: differences}))


def plot(results: Sequence[TimelineResult], path: Path) -> None:
    """Median curves over seeds per policy: GPU allocated, whole free GPU nodes (solid:
    all; dashed: the largest nodes), pods pending; hours of the trace's clock."""
    import matplotlib  # noqa: PLC0415 - plotting is optional and slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    first = results[0]
    busy_from, scale = first.busy_from_s, first.time_scale
    for policy, runs in by_policy(results).items():
        hours = (runs[0].curve_s - busy_from) * scale / 3600
        (line,) = axes[0].plot(hours, np.median([r.allocation_pct for r in runs], axis=0), label=policy)
        axes[1].plot(hours, np.median([r.whole_free_pct for r in runs], axis=0), color=line.get_color())
        axes[1].plot(
            hours,
            np.median([r.whole_free_largest_pct for r in runs], axis=0),
            color=line.get_color(),
            linestyle="--",
        )
        axes[2].plot(hours, np.median([r.pending for r in runs], axis=0), label=policy)
    last_arrival = (first.last_arrival_s - busy_from) * scale / 3600
    for axis in axes:
        axis.axvline(last_arrival, color="grey", linestyle=":", linewidth=1)
        axis.grid(alpha=0.3)
    spec = first.spec
    clock = (
        f"arrivals compressed {first.compression:.0f}x, lifetimes not"
        if spec.compress_arrivals
        else "arrivals and lifetimes on the trace's clock"
    )
    gpus = sorted({r.capacity_milli // 1000 for r in results})
    held = f"{gpus[0]}" if len(gpus) == 1 else f"{gpus[0]}-{gpus[-1]}"
    axes[0].set_title(f"{spec.trace}, {held} GPUs: {clock} (dotted: last arrival)", fontsize=10)
    axes[0].set_ylabel("GPU allocated (% of capacity)")
    axes[1].set_ylabel(f"whole free GPU nodes (%)\nsolid: all; dashed: {largest_gpu_count(results)}-GPU")
    axes[2].set_ylabel("pods pending")
    axes[2].set_xlabel("hours of the trace's clock from the busy window's start (median over seeds)")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
