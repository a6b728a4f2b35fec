"""CPU per preempting cycle in process while earlier preemptors wait nominated (their
victims gone, themselves not bound yet): PreemptionBasic's shape at kube's sizes.

    .venv/bin/python benchmarks/nominated_cycle.py [--nodes 500,1000] [--measure-pods 600]

Nodes of kube's ``node-default.yaml`` shape (4 CPU, 32Gi), four ``pod-low-priority.yaml``
init pods each (900m CPU, priority 0), then ``pod-high-priority.yaml`` pods (3 CPU,
priority 10), which fit nowhere: each is filtered counting the pods nominated before it
(``filter_with_nominated_pods``, the cycle's Filter, whose statuses PostFilter reuses)
and preempts (``preempt``); its victims are then removed and it stays nominated, not
placed, as it waits for its bind in the live scheduler. Prints milliseconds of process
CPU per cycle for each step, over all measured pods and over the last quarter (the most
nominated pods).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from preemption_cycle import template_pod

from scheduler.framework.preemption import PreemptionOutcome, filter_with_nominated_pods, preempt
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import default_filters
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node

NOW = 1_700_000_000.0


def run(nodes: int, measure_pods: int) -> tuple[list[float], list[float]]:
    """Seconds of CPU per measured pod: (filter, preempt)."""
    state = ClusterState([make_node(f"node-{i}", cpu="4", memory="32Gi") for i in range(nodes)])
    low = template_pod("pod-low-priority.yaml", "sched-0", "init")
    high = template_pod("pod-high-priority.yaml", "sched-1", "measured")
    for i in range(4 * nodes):
        state.place(replace(low, name=f"init-{i}", uid=f"init-{i}"), f"node-{i % nodes}")
    filters = default_filters()
    rng = np.random.default_rng(0)
    nominated: list[Pod] = []
    filtering: list[float] = []
    preempting: list[float] = []
    for i in range(measure_pods):
        pod = replace(high, name=f"measured-{i}", uid=f"measured-{i}")
        started = time.process_time()
        statuses = filter_with_nominated_pods(state, filters, pod, nominated)
        filtered = time.process_time()
        outcome = preempt(state, filters, pod, statuses, rng, nominated=nominated, now=NOW)
        filtering.append(filtered - started)
        preempting.append(time.process_time() - filtered)
        if not isinstance(outcome, PreemptionOutcome):
            raise SystemExit(f"pod {pod.name} did not preempt: {outcome}")
        nominated.append(replace(pod, nominated_node_name=outcome.node))
        for victim in outcome.victims:
            state.remove(victim.key)
    return filtering, preempting


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", default="500,1000")
    parser.add_argument("--measure-pods", type=int, default=600)
    args = parser.parse_args()
    print(f"{'nodes':>6} {'measured':>8} {'filter ms':>10} {'preempt ms':>11} {'last quarter':>13}")
    for nodes in (int(n) for n in args.nodes.split(",")):
        count = min(args.measure_pods, nodes)
        filtering, preempting = run(nodes, count)
        quarter = max(1, count // 4)
        last = (sum(filtering[-quarter:]) + sum(preempting[-quarter:])) / quarter
        print(
            f"{nodes:6d} {count:8d} {1e3 * sum(filtering) / count:10.2f} "
            f"{1e3 * sum(preempting) / count:11.2f} {1e3 * last:13.2f}"
        )


if __name__ == "__main__":
    main()
