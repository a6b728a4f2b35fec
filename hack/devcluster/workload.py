"""Generated pods for the real cluster: a fixed count, a target load, or an openb replay.

Every pod is labelled as generated (so `clean` can find it) and with its run id, asks
for the scheduler the user chose, tolerates KWOK's taint, and when it has a lifetime
carries its expiry time, so `clean --expired` can finish the job of a generator that
was stopped early.
"""

from __future__ import annotations

import csv
import heapq
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import names
from devcluster.binaries import open_csv
from devcluster.errors import BadNodeListError, InvalidArgumentError, NodeListNotFoundError
from devcluster.kube import body
from devcluster.usage import Resources

OPENB_POD_COLUMNS = {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec",
                     "creation_time", "deletion_time"}  # fmt: skip


@dataclass(frozen=True)
class PodRequest:
    """One pod to create: its size, when (seconds after the run starts), how long."""

    cpu_milli: int
    memory_mib: int
    gpu_count: int = 0
    #: Share of one GPU in thousandths (a multiple of 10: HAMi asks whole percents of
    #: its cores and memory), for a pod with gpu_count == 1; 1000 is whole.
    gpu_milli: int = 1000
    gpu_models: tuple[str, ...] = ()
    start_s: float = 0.0
    lifetime_s: float | None = None

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.gpu_count < 0:
            raise InvalidArgumentError(f"pod request {self}: sizes must not be negative")
        if not 0 < self.gpu_milli <= 1000 or self.gpu_milli % 10:
            raise InvalidArgumentError(f"pod request {self}: gpu_milli must be a multiple of 10 in 10..1000")
        if self.lifetime_s is not None and self.lifetime_s <= 0:
            raise InvalidArgumentError(f"pod request {self}: lifetime must be positive")


def pod_manifest(
    name: str,
    namespace: str,
    request: PodRequest,
    *,
    scheduler_name: str,
    run_id: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    requests = {"cpu": f"{request.cpu_milli}m", "memory": f"{request.memory_mib}Mi"}
    limits: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if request.gpu_count:
        # Extended resources must have limits equal to requests.
        requests[names.GPU_RESOURCE] = limits[names.GPU_RESOURCE] = str(request.gpu_count)
        if request.gpu_count == 1 and request.gpu_milli < 1000 and scheduler_name != names.DEFAULT_SCHEDULER:
            # A share as HAMi asks it. kube-scheduler does not know HAMi's per-GPU
            # resources (HAMi's chart makes it ignore them): its pods ask a vGPU.
            for resource in (names.GPU_CORES_RESOURCE, names.GPU_MEMORY_PERCENT_RESOURCE):
                requests[resource] = limits[resource] = str(request.gpu_milli // 10)
        if request.gpu_models:
            annotations[names.USE_GPU_TYPE] = ",".join(request.gpu_models)
    if request.lifetime_s is not None:
        expires = (now or datetime.now(UTC)) + timedelta(seconds=request.lifetime_s)
        annotations[names.EXPIRES_ANNOTATION] = expires.isoformat(timespec="seconds")
    resources: dict[str, dict[str, str]] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {names.GENERATED_BY_LABEL: names.GENERATED_BY_VALUE, names.RUN_LABEL: run_id},
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [{"name": "main", "image": names.PLACEHOLDER_IMAGE, "resources": resources}],
            "tolerations": [{"key": names.KWOK_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            # No kubelet will ever stop these containers: deletion need not wait.
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
        },
    }


def fixed_requests(count: int, size: PodRequest) -> list[PodRequest]:
    if count < 1:
        raise InvalidArgumentError(f"pod count {count}: must be at least 1")
    return [size] * count


def target_load_requests(
    requested: Resources,
    allocatable: Resources,
    size: PodRequest,
    target_cpu: float | None,
    target_memory: float | None,
) -> list[PodRequest]:
    """Enough pods of size to bring the cluster's requested share up to the targets.

    A target is a fraction of allocatable (0.7 = 70 %); load already there counts.
    """
    wanted = 0
    for what, target, have, capacity, per_pod in (
        ("cpu", target_cpu, requested.cpu_milli, allocatable.cpu_milli, size.cpu_milli),
        ("memory", target_memory, requested.memory_mib, allocatable.memory_mib, size.memory_mib),
    ):
        if target is None:
            continue
        if not 0 < target <= 1:
            raise InvalidArgumentError(f"target {what} load {target}: give a fraction in (0, 1]")
        if per_pod <= 0:
            raise InvalidArgumentError(f"target {what} load needs pods that request {what}")
        wanted = max(wanted, math.ceil((target * capacity - have) / per_pod))
    if target_cpu is None and target_memory is None:
        raise InvalidArgumentError("give a target cpu and/or memory load")
    return [size] * max(wanted, 0)


def openb_trace_requests(
    path: Path, start: int = 0, limit: int = 100, speed: float = 1.0, lifetimes: bool = True
) -> list[PodRequest]:
    """Rows start..start+limit of an openb pod list, as pods in trace time / speed.

    The first pod of the slice starts at 0 s; a pod lives (deletion - creation) / speed.
    """
    if not path.is_file():
        raise NodeListNotFoundError(f"trace {path} does not exist (expected an openb_pod_list_*.csv)")
    if start < 0 or limit < 1 or speed <= 0:
        raise InvalidArgumentError(f"trace slice start={start} limit={limit} speed={speed}: "
                              "need start >= 0, limit >= 1, speed > 0")  # fmt: skip
    with open_csv(path) as handle:
        reader = csv.DictReader(handle)
        missing = OPENB_POD_COLUMNS - set(reader.fieldnames or ())
        if missing:
            raise BadNodeListError(f"trace {path}: missing columns {sorted(missing)}")
        rows = list(reader)
    rows.sort(key=lambda row: int(row["creation_time"]))
    picked = rows[start : start + limit]
    if not picked:
        raise InvalidArgumentError(f"trace {path} has {len(rows)} pods; nothing from row {start}")
    t0 = int(picked[0]["creation_time"])
    requests = []
    for row in picked:
        try:
            created, deleted = int(row["creation_time"]), int(row["deletion_time"])
            requests.append(PodRequest(
                cpu_milli=int(row["cpu_milli"]),
                memory_mib=int(row["memory_mib"]),
                gpu_count=int(row["num_gpu"]),
                gpu_milli=int(row["gpu_milli"]) if int(row["num_gpu"]) == 1 else 1000,
                gpu_models=tuple(m for m in row["gpu_spec"].split("|") if m),
                start_s=(created - t0) / speed,
                lifetime_s=max(deleted - created, 1) / speed if lifetimes else None,
            ))  # fmt: skip
        except ValueError as err:
            raise BadNodeListError(f"trace {path}, pod {row.get('name')}: {err}") from err
    return requests


@dataclass
class RunResult:
    run_id: str
    created: int = 0
    deleted: int = 0
    failed: int = 0


def run_workload(
    api: client.CoreV1Api,
    requests: Iterable[PodRequest],
    *,
    namespace: str,
    scheduler_name: str,
    run_id: str,
    realtime: bool = True,
    wait_for_lifetimes: bool = True,
    log: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> RunResult:
    """Create the pods (at their start times if realtime) and delete them when they expire.

    With wait_for_lifetimes=False it returns after the last creation; the expiry
    annotations let `clean --expired` delete the rest later.
    """
    result = RunResult(run_id)
    expiries: list[tuple[float, str]] = []
    t0 = clock()

    def delete_due(until: float) -> None:
        while expiries and expiries[0][0] <= until:
            sleep(max(0.0, expiries[0][0] - clock()))
            _, name = heapq.heappop(expiries)
            try:
                api.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
                result.deleted += 1
            except ApiException as err:
                if err.status != 404:  # already gone: someone cleaned up
                    raise

    for index, request in enumerate(requests):
        if realtime:
            delete_due(t0 + request.start_s)
            sleep(max(0.0, t0 + request.start_s - clock()))
        else:
            delete_due(clock())
        name = f"{run_id}-{index:05d}"
        try:
            api.create_namespaced_pod(
                namespace,
                body(pod_manifest(name, namespace, request, scheduler_name=scheduler_name, run_id=run_id)),
            )
        except ApiException as err:
            result.failed += 1
            log(f"pod {name}: {err.status} {err.reason}: {err.body}")
            continue
        result.created += 1
        if result.created % 100 == 0:
            log(f"created {result.created} pods, deleted {result.deleted}")
        if request.lifetime_s is not None:
            heapq.heappush(expiries, (clock() + request.lifetime_s, name))
    if wait_for_lifetimes and expiries:
        log(f"created {result.created} pods; waiting for {len(expiries)} to expire")
        delete_due(math.inf)
    return result


def new_run_id(prefix: str = "wl") -> str:
    """Unique enough for pod names: prefix plus the time in seconds, base 36."""
    stamp, value = "", int(time.time() * 10)
    while value:
        value, digit = divmod(value, 36)
        stamp = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + stamp
    return f"{prefix}-{stamp}"
