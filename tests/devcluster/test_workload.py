"""Generated pods: manifests, load targets, trace slices, the create/delete loop."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from devcluster import binaries, names, workload
from devcluster.errors import InvalidArgumentError
from devcluster.usage import Resources

OPENB_TRACE = binaries.openb_file("openb_pod_list_default")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


SHARE_46 = {names.GPU_RESOURCE: "1", names.GPU_CORES_RESOURCE: "46", names.GPU_MEMORY_PERCENT_RESOURCE: "46"}


@pytest.mark.parametrize(
    ("request_", "scheduler", "gpu", "annotations"),
    [
        (workload.PodRequest(1000, 1024), "rl-scheduler", {}, {}),
        # A share of one GPU as HAMi asks it...
        (workload.PodRequest(1000, 1024, 1, 460), "rl-scheduler", SHARE_46, {}),
        # ... and a vGPU for kube-scheduler, which does not know HAMi's per-GPU resources.
        (workload.PodRequest(1000, 1024, 1, 460), "default-scheduler", {names.GPU_RESOURCE: "1"}, {}),
        (workload.PodRequest(1000, 1024, 2), "rl-scheduler", {names.GPU_RESOURCE: "2"}, {}),
        (
            workload.PodRequest(1000, 1024, 1, gpu_models=("V100M16", "V100M32")),
            "rl-scheduler",
            {names.GPU_RESOURCE: "1"},
            {names.USE_GPU_TYPE: "V100M16,V100M32"},
        ),
        (
            workload.PodRequest(1000, 1024, lifetime_s=90),
            "rl-scheduler",
            {},
            {names.EXPIRES_ANNOTATION: "2026-01-01T00:01:30+00:00"},
        ),
    ],
)
def test_pod_manifest(
    request_: workload.PodRequest, scheduler: str, gpu: dict[str, str], annotations: dict[str, str]
) -> None:
    pod = workload.pod_manifest("p", "ns", request_, scheduler_name=scheduler, run_id="r1", now=NOW)
    resources = pod["spec"]["containers"][0]["resources"]
    assert pod["spec"]["schedulerName"] == scheduler
    assert pod["metadata"]["labels"] == {names.GENERATED_BY_LABEL: "devcluster",
                                         names.RUN_LABEL: "r1"}  # fmt: skip
    assert pod["metadata"]["annotations"] == annotations
    assert resources["requests"]["cpu"] == "1000m"
    assert resources["requests"]["memory"] == "1024Mi"
    assert {k: v for k, v in resources["requests"].items() if k.startswith("nvidia.com/")} == gpu
    # Extended resources need limits equal to requests.
    assert resources.get("limits", {}) == gpu


@pytest.mark.parametrize(
    ("target_cpu", "target_memory", "expected"),
    [
        (0.5, None, 6),  # cpu: (0.5 * 10000 - 2000) / 500 = 6
        (None, 0.5, 4),  # memory: (0.5 * 8192 - 0) / 1024 = 4
        (0.5, 0.9, 8),  # the larger: memory (0.9 * 8192) / 1024 = 7.2 -> 8
        (0.1, None, 0),  # already above target
    ],
)
def test_target_load(target_cpu: float | None, target_memory: float | None, expected: int) -> None:
    requested = Resources(cpu_milli=2000, memory_mib=0)
    allocatable = Resources(cpu_milli=10_000, memory_mib=8192)
    size = workload.PodRequest(500, 1024)
    got = workload.target_load_requests(requested, allocatable, size, target_cpu, target_memory)
    assert len(got) == expected


@pytest.mark.parametrize(("cpu", "memory"), [(1.5, None), (0.0, None), (None, None)])
def test_bad_target_load(cpu: float | None, memory: float | None) -> None:
    with pytest.raises(InvalidArgumentError, match="target"):
        workload.target_load_requests(
            Resources(), Resources(1000, 1000), workload.PodRequest(1, 1), cpu, memory
        )


def test_openb_slice_is_in_trace_time_over_speed() -> None:
    # openb-pod-0000..0002: created 0, 427061, 1558381; first deleted at 12537496.
    pods = workload.openb_trace_requests(OPENB_TRACE, start=0, limit=3, speed=1000)
    assert [p.start_s for p in pods] == [0.0, 427.061, 1558.381]
    assert pods[0].lifetime_s == pytest.approx(12537.496)
    assert (pods[1].gpu_count, pods[1].gpu_milli) == (1, 460)


class FakeApi:
    """Records creations and deletions against a fake clock."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.events: list[tuple[float, str, str]] = []

    def create_namespaced_pod(self, namespace: str, body: dict[str, Any]) -> None:
        assert namespace == body["metadata"]["namespace"] == "ns"
        self.events.append((self.clock[0], "create", body["metadata"]["name"]))

    def delete_namespaced_pod(self, name: str, namespace: str, **_: Any) -> None:
        assert namespace == "ns"
        self.events.append((self.clock[0], "delete", name))


def test_run_creates_on_time_and_deletes_when_lifetimes_end() -> None:
    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    api = FakeApi(clock)
    requests = [
        workload.PodRequest(1, 1, start_s=0, lifetime_s=5),
        workload.PodRequest(1, 1, start_s=2, lifetime_s=1),
        workload.PodRequest(1, 1, start_s=10),
    ]
    result = workload.run_workload(
        api,  # type: ignore[arg-type]  # duck-typed stand-in for CoreV1Api
        requests, namespace="ns", scheduler_name="s", run_id="r",
        clock=lambda: clock[0], sleep=sleep, log=lambda _: None,
    )  # fmt: skip
    assert api.events == [
        (0.0, "create", "r-00000"),
        (2.0, "create", "r-00001"),
        (3.0, "delete", "r-00001"),
        (5.0, "delete", "r-00000"),
        (10.0, "create", "r-00002"),
    ]
    assert (result.created, result.deleted, result.failed) == (3, 2, 0)


@pytest.mark.parametrize(
    "kwargs",
    [{"cpu_milli": -1}, {"gpu_milli": 0}, {"gpu_milli": 1001}, {"gpu_milli": 455}, {"lifetime_s": 0}],
)
def test_bad_pod_request(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        workload.PodRequest(**{"cpu_milli": 1, "memory_mib": 1, **kwargs})
