"""CPU per preempting cycle of DefaultPreemption in process, on kube's scheduler_perf
PreemptionBasic shape: the dry run as it is (``scheduler.framework.preemption``) against
the one it replaced (tests/unit/preemption_reference.py), on the same states.

    .venv/bin/python benchmarks/preemption_cycle.py [--nodes 50,500] [--measure-pods 50]

PreemptionBasic (misc/performance-config.yaml): nodes of kube's ``node-default.yaml``
(4 CPU, 32Gi), four init pods each (``pod-low-priority.yaml``: 900m CPU, 500Mi, priority
0) placed round-robin (kube-scheduler places them in the real harness), then measured
pods of ``pod-high-priority.yaml`` (3 CPU, 500Mi, priority 10), which fit nowhere and
each preempt. Each measured pod's outcome is carried out on the state (victims removed,
the pod placed on its node) before the next, so both implementations see the same states
and must decide the same (checked). Prints microseconds of process CPU per preempting
cycle (filters with nominated pods, then ``preempt``) for each and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler_perf_source import load_yaml, scheduler_perf_dir

from scheduler.framework.preemption import PreemptionOutcome, filter_with_nominated_pods, preempt
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.profiles import default_filters
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node
from tests.unit import preemption_reference as reference

NOW = 1_700_000_000.0


def template_pod(template: str, namespace: str, name: str) -> Pod:
    manifest = load_yaml(scheduler_perf_dir() / "templates" / template)
    manifest["metadata"] = {**manifest["metadata"], "name": name, "namespace": namespace}
    manifest["metadata"].pop("generateName", None)
    return replace(pod_from_manifest(manifest), uid=f"uid-{namespace}-{name}")


def run(nodes: int, measure_pods: int) -> tuple[float, float]:
    state = ClusterState([make_node(f"node-{i}", cpu="4", memory="32Gi") for i in range(nodes)])
    for i in range(4 * nodes):
        state.place(template_pod("pod-low-priority.yaml", "sched-0", f"init-{i}"), f"node-{i % nodes}")
    filters = default_filters()
    ours = theirs = 0.0
    for i in range(measure_pods):
        pod = template_pod("pod-high-priority.yaml", "sched-1", f"measured-{i}")
        outcomes = []
        for module, fn in (("new", preempt), ("old", reference.preempt)):
            start = time.process_time()
            statuses = filter_with_nominated_pods(state, filters, pod)
            outcome = fn(state, filters, pod, statuses, np.random.default_rng(i), now=NOW)
            spent = time.process_time() - start
            if module == "new":
                ours += spent
            else:
                theirs += spent
            outcomes.append(outcome)
        if outcomes[0] != outcomes[1]:
            raise SystemExit(f"pod {pod.name}: the two dry runs disagree:\n{outcomes[0]}\n{outcomes[1]}")
        outcome = outcomes[0]
        if not isinstance(outcome, PreemptionOutcome):
            raise SystemExit(f"pod {pod.name} did not preempt: {outcome}")
        for victim in outcome.victims:
            state.remove(victim.key)
        state.place(pod, outcome.node)
    return ours / measure_pods, theirs / measure_pods


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", default="50,500")
    parser.add_argument("--measure-pods", type=int, default=50)
    args = parser.parse_args()
    print(f"{'nodes':>6} {'measured':>8} {'ours us/cycle':>14} {'before us/cycle':>16} {'speed-up':>9}")
    for nodes in (int(n) for n in args.nodes.split(",")):
        ours, before = run(nodes, min(args.measure_pods, nodes))
        print(
            f"{nodes:6d} {min(args.measure_pods, nodes):8d} {ours * 1e6:14.0f} {before * 1e6:16.0f} ", end=""
        )
        print(f"{before / ours:8.1f}x")


if __name__ == "__main__":
    main()
