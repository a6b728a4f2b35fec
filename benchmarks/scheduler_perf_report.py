"""The scheduler_perf benchmark's report: why pods are pending, and the table of a
run (medians over rounds, lowest and highest pods/s, x kube-scheduler's median)."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler_perf import RunResult


def pending_reasons(pods: list[dict[str, Any]]) -> dict[str, int]:
    reasons: dict[str, int] = {}
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName"):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or []
        message = next((c.get("message", "") for c in conditions if c.get("type") == "PodScheduled"), "")
        reason = message or "no PodScheduled condition"
        reasons[reason] = reasons.get(reason, 0) + 1
    return reasons


def table(results: list[RunResult], schedulers: list[str]) -> str:
    lines = [
        f"{'case':44} {'nodes':>5} {'scheduler':14} {'pods/s':>8} {'min':>7} {'max':>7} {'x kube':>6} "
        f"{'bound':>10} {'broken':>6}"
    ]
    keys = sorted({(r.nodes, r.case) for r in results})
    for nodes, case in keys:
        medians: dict[str, float] = {}
        for variant in schedulers:
            rows = [r for r in results if (r.nodes, r.case, r.scheduler) == (nodes, case, variant)]
            rates = [r.pods_per_s for r in rows if not r.error and not math.isnan(r.pods_per_s)]
            if not rows:
                continue
            median = statistics.median(rates) if rates else math.nan
            medians[variant] = median
            kube_rate = medians.get("kube-scheduler", math.nan)
            ratio = median / kube_rate if kube_rate else math.nan
            bound = min(r.bound for r in rows)
            broken = max(len(r.broken) for r in rows)
            lines.append(
                f"{case:44} {nodes:5d} {variant:14} {median:8.1f} {min(rates, default=math.nan):7.1f} "
                f"{max(rates, default=math.nan):7.1f} {ratio:6.2f} "
                f"{f'{bound}/{rows[0].measured}':>10} {broken:6d}"
            )
            for reason, count in sorted({k: v for r in rows for k, v in r.pending.items()}.items()):
                lines.append(f"{'':44} {'':5} {'':14} pending {count}: {reason[:120]}")
            for reason, count in sorted({k: v for r in rows for k, v in r.others_pending.items()}.items()):
                lines.append(f"{'':44} {'':5} {'':14} background pending {count}: {reason[:120]}")
            lines += [f"{'':44} {'':5} {'':14} FAILED: {r.error[:160]}" for r in rows if r.error]
    return "\n".join(lines)
