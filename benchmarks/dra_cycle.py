"""CPU per scheduling cycle in process for kube's SchedulingWithResourceClaimTemplate
pods: each pod's own claim of one device of ``test-class`` (``device.driver ==
"test-driver.cdi.k8s.io"``), on nodes that each publish one ResourceSlice of
``maxClaimsPerNode`` devices, ``createResourceDriver``'s (``scheduler_perf_dra``).

    .venv/bin/python benchmarks/dra_cycle.py [--nodes 1000] [--allocated 5000] [--measure-pods 50]

``--allocated`` claims are allocated first (the init pods', spread over the nodes), then
each measured pod's pending claim is added, the pod decided with the ``fgd-reserve``
profile and its claim allocated on the chosen node as Reserve does (in flight), so each
cycle sees the devices the one before took, as live. Prints milliseconds of process CPU
per cycle over the measured pods, the first cycle apart (it reads every node's slices
and selectors for the first time).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler_perf_dra import resource_slice

from scheduler.dra.catalog import CLAIMS, CLASSES, SLICES
from scheduler.dra.node_filter import filter_node
from scheduler.framework.profile import schedule_pod
from scheduler.k8s.scheduling.dra_binder import allocated as with_allocation
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.profiles import build_profile
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node, pod_manifest

DRIVER = "test-driver.cdi.k8s.io"
DEVICES_PER_NODE = 10  # kube's maxClaimsPerNode for this case


def claim(name: str, node: str | None = None, device: int = 0) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "test", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}},
    }
    if node is not None:
        pinned = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        result = {"request": "req-0", "driver": DRIVER, "pool": node, "device": f"instance-{device}"}
        manifest["status"] = {
            "allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [pinned]}}
        }
    return manifest


def run(nodes: int, allocated: int, measure_pods: int) -> list[float]:
    state = ClusterState([make_node(f"node-{i}", cpu="4", memory="32Gi") for i in range(nodes)])
    catalog = state.dra
    selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    catalog.apply(CLASSES, "ADDED", {"metadata": {"name": "test-class"}, "spec": {"selectors": [selector]}})
    for i in range(nodes):
        catalog.apply(SLICES, "ADDED", resource_slice(DRIVER, f"node-{i}", DEVICES_PER_NODE, {}))
    for k in range(min(allocated, nodes * DEVICES_PER_NODE)):
        catalog.apply(CLAIMS, "ADDED", claim(f"init-{k}", f"node-{k % nodes}", k // nodes))
    profile = build_profile("fgd-reserve")
    rng = np.random.default_rng(0)
    spent = []
    for k in range(measure_pods):
        catalog.apply(CLAIMS, "ADDED", claim(f"measured-{k}"))
        manifest = pod_manifest(f"measured-{k}", cpu="100m", namespace="test")
        manifest["metadata"]["uid"] = f"uid-measured-{k}"
        manifest["spec"]["resourceClaims"] = [{"name": "c0", "resourceClaimName": f"measured-{k}"}]
        pod = pod_from_manifest(manifest)
        started = time.process_time()
        decision = schedule_pod(state, pod, profile, rng, {})
        spent.append(time.process_time() - started)
        if not decision.scheduled:
            raise SystemExit(f"pod {pod.name} fits nowhere: {decision.message}")
        pending = catalog.pod_claims(pod.namespace, pod.name, pod.resource_claims)
        node = state.nodes[decision.node_index]
        reserved = filter_node(
            pending, catalog.classes, catalog.slice_index(), node.name, node.labels, catalog.in_use()
        )
        catalog.assume(with_allocation(pending[0], reserved.allocations[0]))
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--allocated", type=int, default=5000)
    parser.add_argument("--measure-pods", type=int, default=50)
    args = parser.parse_args()
    spent = run(args.nodes, args.allocated, args.measure_pods)
    rest = spent[1:] or spent
    print(
        f"{args.nodes} nodes, {args.allocated} claims allocated: first cycle {1e3 * spent[0]:.1f} ms, "
        f"then {1e3 * sum(rest) / len(rest):.1f} ms per cycle"
    )


if __name__ == "__main__":
    main()
