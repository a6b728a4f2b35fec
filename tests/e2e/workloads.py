"""Pods and nodes for the end-to-end tests: a mixed cluster and a workload that uses
every constraint the scheduler honours, sized so that all of it fits."""

from __future__ import annotations

import random
from typing import Any

from devcluster import nodes as devnodes
from scheduler.objects.topology import ZONE_LABEL

TAINT = devnodes.Taint("dedicated", "batch", "NoSchedule")
ZONE = ZONE_LABEL


def node_affinity(key: str, values: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def required_pod_terms(app: str, topology_key: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology_key}
    return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}


def mixed_nodes(count: int = 100) -> list[devnodes.NodeSpec]:
    """CPU and GPU nodes over three zones; every fifth node tainted for batch pods."""
    kinds = ["cpu-small", "cpu-large", "gpu-t4", "gpu-v100", "cpu-small"]
    topology = devnodes.Topology(zones=3, racks_per_zone=4)
    specs = []
    for i in range(count):
        zone, rack = topology.place(i)
        taints = (TAINT,) if i % 5 == 4 else ()
        specs.append(
            devnodes.NodeSpec(
                f"e2e-node-{i:03d}", devnodes.NODE_TYPES[kinds[i % len(kinds)]], zone, rack, taints
            )
        )
    return specs


def pod(
    name: str,
    namespace: str,
    scheduler: str,
    *,
    cpu: str = "250m",
    memory: str = "256Mi",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
    gpus: int = 0,
    gpu_percent: int | None = None,
) -> dict[str, Any]:
    """A pod; ``gpus`` GPUs (``nvidia.com/gpu``), with ``gpu_percent`` a HAMi share:
    that percentage of each GPU's cores and memory."""
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    limits: dict[str, Any] = {}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
        limits["nvidia.com/gpu"] = str(gpus)
    if gpu_percent is not None:
        for resource in ("nvidia.com/gpucores", "nvidia.com/gpumem-percentage"):
            requests[resource] = limits[resource] = str(gpu_percent)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": requests, "limits": limits},
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    spec.update(extra or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": spec,
    }


def mixed_workload(namespace: str, scheduler: str, count: int = 1000, seed: int = 7) -> list[dict[str, Any]]:
    """``count`` pods: plain ones of various sizes, and per 1000: 100 batch pods that
    tolerate and select the tainted nodes, 100 pinned to two zones, 40 spread one per
    host (anti-affinity), 60 spread evenly over zones (maxSkew 1), 10 databases and 40
    clients that must share a zone with one (affinity), 60 GPU shares and 20 whole GPUs."""
    rng = random.Random(seed)
    scale = count / 1000
    kinds = [
        ("batch", 100),
        ("zonal", 100),
        ("anti", 40),
        ("spread", 60),
        ("db", 10),
        ("client", 40),
        ("share", 60),
        ("gpu", 20),
    ]
    plan: list[str] = []
    for kind, n in kinds:
        plan += [kind] * round(n * scale)
    plan += ["plain"] * (count - len(plan))
    rng.shuffle(plan)
    # Databases first, so clients have something to be near (the scheduler must cope
    # with the order either way: a client with no database anywhere waits).
    plan.sort(key=lambda kind: kind != "db")
    out = []
    for i, kind in enumerate(plan):
        name = f"{kind}-{i:04d}"
        cpu = rng.choice(["100m", "250m", "500m", "1"])
        memory = rng.choice(["128Mi", "256Mi", "512Mi", "1Gi"])
        labels = {"app": kind}
        if kind == "batch":
            toleration = {"key": TAINT.key, "operator": "Equal", "value": TAINT.value, "effect": TAINT.effect}
            tainted = [f"e2e-node-{j:03d}" for j in range(4, 1000, 5)]
            extra = {
                "tolerations": [toleration],
                "affinity": node_affinity("kubernetes.io/hostname", tainted),
            }
            out.append(pod(name, namespace, scheduler, cpu=cpu, memory=memory, labels=labels, extra=extra))
        elif kind == "zonal":
            extra = {"affinity": node_affinity(ZONE, ["zone-a", "zone-b"])}
            out.append(pod(name, namespace, scheduler, cpu=cpu, memory=memory, labels=labels, extra=extra))
        elif kind == "anti":
            extra = {"affinity": {"podAntiAffinity": required_pod_terms("anti", "kubernetes.io/hostname")}}
            out.append(pod(name, namespace, scheduler, labels=labels, extra=extra))
        elif kind == "spread":
            constraint = {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}},
            }
            out.append(
                pod(
                    name,
                    namespace,
                    scheduler,
                    labels=labels,
                    extra={"topologySpreadConstraints": [constraint]},
                )
            )
        elif kind == "client":
            extra = {"affinity": {"podAffinity": required_pod_terms("db", ZONE)}}
            out.append(pod(name, namespace, scheduler, labels=labels, extra=extra))
        elif kind == "share":
            percent = rng.choice([10, 25, 30, 50])
            out.append(pod(name, namespace, scheduler, labels=labels, gpus=1, gpu_percent=percent))
        elif kind == "gpu":
            out.append(pod(name, namespace, scheduler, labels=labels, gpus=rng.choice([1, 2])))
        else:
            out.append(pod(name, namespace, scheduler, cpu=cpu, memory=memory, labels=labels))
    return out
