"""A live per-node view: requested versus allocatable CPU, memory, GPU and pods."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any, TextIO

from kubernetes import client

from devcluster.usage import NodeUsage, Resources, holds_resources, node_usage, totals


def _cell(used: int, capacity: int) -> str:
    if capacity == 0:
        return "-" if used == 0 else f"{used}/0"
    return f"{used}/{capacity} {100 * used / capacity:3.0f}%"


def _row(name: str, zone: str, model: str, req: Resources, alloc: Resources) -> list[str]:
    return [
        name,
        zone,
        model,
        _cell(req.cpu_milli, alloc.cpu_milli),
        _cell(req.memory_mib, alloc.memory_mib),
        _cell(req.gpus, alloc.gpus),
        _cell(req.pods, alloc.pods),
    ]


def render(nodes: list[Any], pods: list[Any], max_rows: int = 40) -> str:
    """The table as text: one line per node (busiest first past max_rows), then totals."""
    rows = node_usage(nodes, pods)
    shown: list[NodeUsage] = rows
    if len(rows) > max_rows:
        # Many nodes: the busiest are the interesting ones.
        shown = sorted(rows, key=lambda r: r.requested.cpu_milli / max(r.allocatable.cpu_milli, 1),
                       reverse=True)[:max_rows]  # fmt: skip
    header = ["NODE", "ZONE", "GPU", "CPU m", "MEM MiB", "GPUS", "PODS"]
    table = [header]
    for r in shown:
        label = r.name if r.ready else f"{r.name} (NotReady)"
        table.append(_row(label, r.zone, r.gpu_model, r.requested, r.allocatable))
    requested, allocatable = totals(rows)
    table.append(_row(f"TOTAL ({len(rows)} nodes)", "", "", requested, allocatable))
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
             for line in table]  # fmt: skip
    if len(rows) > max_rows:
        lines.insert(-1, f"... {len(rows) - max_rows} more nodes")
    pending = Counter(
        p.spec.scheduler_name for p in pods if not p.spec.node_name and p.status.phase == "Pending"
    )
    running = sum(1 for p in pods if holds_resources(p))
    waiting = ", ".join(f"{n} for {s}" for s, n in sorted(pending.items())) or "none"
    lines.append(f"pods: {running} bound and running, pending: {waiting}")
    return "\n".join(lines)


def snapshot(api: client.CoreV1Api, max_rows: int = 40) -> str:
    nodes: list[Any] = api.list_node().items
    pods: list[Any] = api.list_pod_for_all_namespaces().items
    return render(nodes, pods, max_rows)


def watch(
    api: client.CoreV1Api, interval_s: float = 2.0, max_rows: int = 40, out: TextIO | None = None
) -> None:
    """Redraw the table every interval until Ctrl-C."""
    out = out or sys.stdout
    try:
        while True:
            text = snapshot(api, max_rows)
            # Clear the screen and home the cursor, then draw: no flicker of partial tables.
            stamp = time.strftime("%H:%M:%S")
            out.write(f"\x1b[2J\x1b[H{stamp}  (Ctrl-C to quit)\n{text}\n")
            out.flush()
            time.sleep(interval_s)
    except KeyboardInterrupt:
        out.write("\n")
