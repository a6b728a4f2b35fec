"""CPU of ``sync_dra_gpus`` per event, as the live cache calls it after every node and
DRA event, on nodes that each publish one ResourceSlice (kube's SchedulingWithResourceClaim
cases: ``createResourceDriver``'s slices of ``maxClaimsPerNode`` devices, no GPU class):
with the slices as first applied, and after every slice was applied again unchanged, as
a relist or a restarted watch gives them.

    PYTHONPATH=. .venv/bin/python benchmarks/dra_gpu_view.py [--nodes 1000] [--calls 200]

Until the catalog kept an unchanged slice and counted slice changes
(``DraCatalog.slices_generation``), the view compared every slice with its copy at every
call: 0.020 ms of CPU a call at 1,000 nodes, and 11.8 ms once the slices had been
applied again (equal objects, no longer the same ones); with the change 0.003 and
0.002 ms (one run each, the shared 2-core machine with a benchmark beside it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler_perf_dra import resource_slice

from scheduler.dra.catalog import SLICES
from scheduler.dra.gpu_view import DEFAULT_GPU_CLASSES, sync_dra_gpus
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node, make_state

DRIVER = "test-driver.cdi.k8s.io"
DEVICES_PER_NODE = 10  # kube's maxClaimsPerNode for these cases


def ms_per_call(state: ClusterState, nodes: int, calls: int) -> float:
    start = time.process_time()
    for i in range(calls):
        sync_dra_gpus(state, (f"node-{i % nodes}",))
    return (time.process_time() - start) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    state = make_state([make_node(f"node-{i}") for i in range(args.nodes)])
    state.dra_gpu_classes = frozenset(DEFAULT_GPU_CLASSES)
    slices = [resource_slice(DRIVER, f"node-{i}", DEVICES_PER_NODE, {}) for i in range(args.nodes)]
    for manifest in slices:
        state.dra.apply(SLICES, "ADDED", manifest)
    sync_dra_gpus(state)
    first = ms_per_call(state, args.nodes, args.calls)
    print(f"{args.nodes} nodes, slices as first applied: {first:.3f} ms a call")
    for manifest in slices:
        state.dra.apply(SLICES, "MODIFIED", manifest)
    again = ms_per_call(state, args.nodes, args.calls)
    print(f"{args.nodes} nodes, slices applied again: {again:.3f} ms a call")


if __name__ == "__main__":
    main()
