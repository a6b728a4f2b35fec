"""CPU of reading a 5,000-node protobuf listing: the hand-written wire-format reader
(``scheduler/k8s/client/node_protobuf.py`` as of commit 8098672, read from git) against
the generated classes (``NodeList.FromString`` plus the same JSON-shaped dicts).

The listing is built as the API server sends it (``k8s\\x00`` and a runtime.Unknown
around the NodeList), each node as a KWOK node carries it: labels, annotations, a
taint, capacity and allocatable, five conditions, addresses, node info, daemon
endpoints and managed fields, so that what a reader skips costs what it costs.
The two readers run interleaved, ``--rounds`` times; the medians are printed, with
the import time of the generated modules (which a process pays before its first
listing).

    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/node_protobuf_decode.py [--nodes 5000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from scheduler.k8s.client import node_protobuf
from scheduler.k8s.client.generated import core_v1_pb2, runtime_pb2

SECONDS = 1_767_225_600  # 2026-01-01T00:00:00Z
FIELDS_V1 = (
    b'{"f:metadata":{"f:annotations":{".":{},"f:kwok.x-k8s.io/node":{},'
    b'"f:node.alpha.kubernetes.io/ttl":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},'
    b'"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},'
    b'"f:kubernetes.io/os":{},"f:node-role.kubernetes.io/agent":{},"f:type":{},'
    b'"f:topology.kubernetes.io/zone":{}}},"f:spec":{"f:taints":{}}}'
)
STATUS_FIELDS = (
    b'{"f:status":{"f:addresses":{".":{},"k:{\\"type\\":\\"InternalIP\\"}":{".":{},"f:address":{},'
    b'"f:type":{}}},"f:allocatable":{".":{},"f:cpu":{},"f:memory":{},"f:nvidia.com/gpu":{},'
    b'"f:pods":{}},"f:capacity":{".":{},"f:cpu":{},"f:memory":{},"f:nvidia.com/gpu":{},'
    b'"f:pods":{}},"f:conditions":{"k:{\\"type\\":\\"Ready\\"}":{".":{},"f:lastHeartbeatTime":{},'
    b'"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}},'
    b'"f:daemonEndpoints":{"f:kubeletEndpoint":{"f:Port":{}}},"f:nodeInfo":{"f:architecture":{},'
    b'"f:kubeletVersion":{},"f:operatingSystem":{}},"f:phase":{}}}'
)
CONDITIONS = [
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
]


def kwok_node(index: int) -> Any:
    """One node as the dev cluster's KWOK nodes carry it."""
    name = f"openb-node-{index:04d}"
    node = core_v1_pb2.Node()
    meta = node.metadata
    meta.name = name
    meta.uid = f"5f0c2a7e-9b1d-4c3e-8f00-{index:012d}"
    meta.resourceVersion = str(100_000 + index)
    meta.creationTimestamp.seconds = SECONDS
    meta.labels.update(
        {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node-role.kubernetes.io/agent": "",
            "type": "kwok",
            "topology.kubernetes.io/zone": f"zone-{'abc'[index % 3]}",
            "rl-scheduler.io/generated-by": "devcluster",
        }
    )
    meta.annotations.update(
        {
            "kwok.x-k8s.io/node": "fake",
            "node.alpha.kubernetes.io/ttl": "0",
            "hami.io/node-nvidia-register": ":".join(
                f"GPU-{index:04d}-{gpu},10,32768,100,NVIDIA-V100,0,true" for gpu in range(8)
            )
            + ":",
        }
    )
    for manager, operation, fields, sub in (
        ("kwok", "Update", FIELDS_V1, ""),
        ("kwok", "Update", STATUS_FIELDS, "status"),
    ):
        entry = meta.managedFields.add(manager=manager, operation=operation, apiVersion="v1")
        entry.fieldsType = "FieldsV1"
        entry.fieldsV1.Raw = fields
        entry.time.seconds = SECONDS
        entry.subresource = sub
    node.spec.taints.add(key="kwok.x-k8s.io/node", value="fake", effect="NoSchedule")
    quantities = {"cpu": "96", "memory": "384Gi", "nvidia.com/gpu": "8", "pods": "110"}
    for key, value in quantities.items():
        node.status.capacity[key].string = value
        node.status.allocatable[key].string = value
    for kind, status, reason, message in CONDITIONS:
        condition = node.status.conditions.add(type=kind, status=status, reason=reason, message=message)
        condition.lastHeartbeatTime.seconds = SECONDS
        condition.lastTransitionTime.seconds = SECONDS
    node.status.addresses.add(type="InternalIP", address=f"10.0.{index // 250}.{index % 250}")
    node.status.addresses.add(type="Hostname", address=name)
    node.status.daemonEndpoints.kubeletEndpoint.Port = 10250
    info = node.status.nodeInfo
    info.kubeletVersion = info.kubeProxyVersion = "fake"
    info.operatingSystem, info.architecture = "linux", "amd64"
    node.status.phase = "Running"
    return node


def listing(count: int) -> bytes:
    """``count`` KWOK nodes as the API server answers a protobuf list."""
    nodes = core_v1_pb2.NodeList()
    nodes.metadata.resourceVersion = "123456"
    nodes.items.extend(kwok_node(index) for index in range(count))
    unknown = runtime_pb2.Unknown(raw=nodes.SerializeToString(deterministic=True))
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind = "v1", "NodeList"
    unknown.contentType = node_protobuf.CONTENT_TYPE
    serialized: bytes = unknown.SerializeToString()
    return node_protobuf.MAGIC + serialized


# The last commit whose scheduler/k8s/client/node_protobuf.py read the wire format
# itself (standard library only); the benchmark reads that module from git.
HANDWRITTEN_COMMIT = "8098672"
REPO = Path(__file__).resolve().parents[1]


def handwritten_reader() -> Callable[[bytes], Any]:
    """``decode_node_list`` of the hand-written reader, as of ``HANDWRITTEN_COMMIT``."""
    source = subprocess.run(
        ["git", "show", f"{HANDWRITTEN_COMMIT}:scheduler/k8s/client/node_protobuf.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType("node_protobuf_handwritten")
    exec(compile(source, f"node_protobuf.py@{HANDWRITTEN_COMMIT}", "exec"), module.__dict__)
    reader: Callable[[bytes], Any] = module.decode_node_list
    return reader


def cpu_seconds(read: Callable[[], object], rounds: list[float]) -> None:
    start = time.process_time()
    read()
    rounds.append(time.process_time() - start)


def import_seconds() -> float:
    """What importing the generated modules costs a fresh interpreter (``-X importtime``,
    cumulative, the ``protobuf`` runtime included): the median of five."""
    module = "scheduler.k8s.client.generated.core_v1_pb2"
    runs: list[int] = []
    for _ in range(5):
        command = [sys.executable, "-X", "importtime", "-c", f"import {module}"]
        lines = subprocess.run(command, capture_output=True, text=True, check=True).stderr.splitlines()
        # "import time: self [us] | cumulative | name"
        runs.extend(int(line.split("|")[1]) for line in lines if line.rstrip().endswith(f" {module}"))
    return float(statistics.median(runs)) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    body = listing(args.nodes)
    readers = {
        f"hand-written ({HANDWRITTEN_COMMIT})": handwritten_reader(),
        "generated classes (now)": node_protobuf.decode_node_list,
    }
    outputs = {name: read(body) for name, read in readers.items()}
    first = next(iter(outputs.values()))
    assert all(output == first for output in outputs.values()), "the readers disagree"
    times: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(args.rounds):
        for name, read in readers.items():
            cpu_seconds(partial(read, body), times[name])
    print(f"{args.nodes} nodes, {len(body) / 1e6:.1f} MB, {args.rounds} interleaved rounds (CPU time)")
    for name, rounds in times.items():
        print(f"  {name:<28} median {statistics.median(rounds) * 1e3:7.1f} ms  (min {min(rounds) * 1e3:.1f})")
    print(f"  import of the generated modules (protobuf runtime included): {import_seconds() * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
