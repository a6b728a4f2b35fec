from typing import Any

import pytest

from scheduler.errors import PodSpecError, SchedulerInputError
from scheduler.objects.pod_manifest import pod_from_manifest
from tests.builders import pod_manifest

MI = 2**20


def container(
    cpu: str | None = None,
    memory: str | None = None,
    *,
    sidecar: bool = False,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    out: dict[str, Any] = {"name": "c", "resources": {"requests": requests, "limits": limits or {}}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] = (), **spec: Any) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": containers, "initContainers": list(init), **spec},
    }


@pytest.mark.parametrize(
    ("manifest", "cpu", "memory"),
    [
        pytest.param(
            pod([container("100m", "64Mi"), container("200m", "32Mi")]),
            300,
            96 * MI,
            id="containers are summed",
        ),
        pytest.param(
            pod([container("100m")], [container("500m"), container("300m")]),
            500,
            0,
            id="init containers: the largest one wins (500m > 100m)",
        ),
        pytest.param(
            pod([container("100m")], [container("50m", sidecar=True), container("400m")]),
            450,
            0,
            id="sidecar runs beside later init containers: max(100+50, 400+50)",
        ),
        pytest.param(
            pod([container("100m")], [container("400m"), container("50m", sidecar=True)]),
            400,
            0,
            id="sidecar started after an init container: max(100+50, 400, 50) = 400",
        ),
        pytest.param(
            pod([container("1")], [container("200m", sidecar=True), container("300m", sidecar=True)]),
            1500,
            0,
            id="sidecars add to the regular containers: 1000+200+300",
        ),
        pytest.param(
            pod([container("100m", "10Mi")], overhead={"cpu": "250m", "memory": "120Mi"}),
            350,
            130 * MI,
            id="overhead is added: 100m+250m",
        ),
        pytest.param(
            pod([container("100m", "10Mi"), container("100m")], resources={"requests": {"cpu": "1"}}),
            1000,
            10 * MI,
            id="pod-level cpu replaces the containers' sum; memory stays aggregated",
        ),
        pytest.param(
            pod([container(limits={"cpu": "2", "memory": "1Gi"})]),
            2000,
            1024 * MI,
            id="limits without requests default the requests",
        ),
        pytest.param(pod([container()]), 0, 0, id="best effort requests nothing"),
    ],
)
def test_pod_request_as_kube_scheduler(manifest: dict[str, Any], cpu: int, memory: int) -> None:
    parsed = pod_from_manifest(manifest)
    assert (parsed.cpu_milli, parsed.memory) == (cpu, memory)


@pytest.mark.parametrize(
    ("manifest", "cpu", "memory"),
    [
        pytest.param(pod([container()]), 100, 200 * MI, id="missing requests count as 100m / 200Mi"),
        pytest.param(pod([container("1")]), 1000, 200 * MI, id="only the missing one is defaulted"),
        pytest.param(pod([container(), container()]), 200, 400 * MI, id="per container"),
    ],
)
def test_scoring_requests_default_missing_values(manifest: dict[str, Any], cpu: int, memory: int) -> None:
    parsed = pod_from_manifest(manifest)
    assert (parsed.nonzero_cpu_milli, parsed.nonzero_memory) == (cpu, memory)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        pytest.param(
            pod([container("1x")]),
            r"pod ns/p: spec.containers\[0\].resources.requests.cpu: quantity '1x' does not parse",
            id="bad quantity",
        ),
        pytest.param(
            pod([container("-1")]),
            r"spec.containers\[0\].resources.requests.cpu: must not be negative",
            id="negative request",
        ),
        pytest.param(
            pod(
                [container()],
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}
                            ]
                        }
                    }
                },
            ),
            r"nodeSelectorTerms\[0\].matchExpressions\[0\].operator: unknown operator 'Near'",
            id="bad operator",
        ),
        pytest.param(
            pod(
                [container()],
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}
                            ]
                        }
                    }
                },
            ),
            r"values\[0\]: 'x' is not an integer",
            id="Gt needs an integer",
        ),
        pytest.param(
            pod(
                [container()],
                topologySpreadConstraints=[
                    {"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}
                ],
            ),
            r"spec.topologySpreadConstraints\[0\].maxSkew: must be at least 1",
            id="zero skew",
        ),
        pytest.param(
            pod([container()], volumes=[{"name": "data", "persistentVolumeClaim": "data-0"}]),
            r"pod ns/p: spec.volumes\[0\].persistentVolumeClaim: expected an object, got str",
            id="a claim volume written as a string",
        ),
    ],
)
def test_bad_pods_name_the_pod_and_the_field(manifest: dict[str, Any], message: str) -> None:
    with pytest.raises(SchedulerInputError, match=message):
        pod_from_manifest(manifest)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"gpus": 2}, (2, 1000, 0, 100, ()), id="nvidia.com/gpu alone: whole GPUs"),
        pytest.param(
            {"gpus": 1, "gpu_milli": 460}, (1, 460, 0, 46, ()), id="a trace share: 46% cores and memory"
        ),
        pytest.param(
            {"gpus": 1, "gpu_cores": 30, "gpu_memory": 4000}, (1, 300, 4000, 0, ()), id="cores and MiB"
        ),
        pytest.param(
            {"gpus": 1, "gpu_memory": 4000}, (1, 0, 4000, 0, ()), id="MiB alone: no cores (HAMi's default)"
        ),
        pytest.param(
            {"gpus": 1, "gpu_memory_percent": 25}, (1, 0, 0, 25, ()), id="a percentage alone: no cores"
        ),
        pytest.param(
            {"gpus": 1, "gpu_memory_percent": 100},
            (1, 1000, 0, 100, ()),
            id="all the memory: exclusive (webhook)",
        ),
        pytest.param(
            {"gpus": 1, "gpu_memory": 4000, "gpu_memory_percent": 50},
            (1, 0, 4000, 0, ()),
            id="gpumem wins over the percentage",
        ),
        pytest.param(
            {"gpus": 1, "gpu_models": "V100M16, V100M32"},
            (1, 1000, 0, 100, ("V100M16", "V100M32")),
            id="type constraint",
        ),
    ],
)
def test_gpu_requests_from_hami_resources_and_annotations(
    kwargs: dict[str, Any], expected: tuple[int, int, int, int, tuple[str, ...]]
) -> None:
    pod = pod_from_manifest(pod_manifest(**kwargs))
    gpu = pod.gpu
    assert (gpu.count, gpu.milli_per_gpu, gpu.memory_mib, gpu.memory_percent, gpu.models) == expected
    # per-GPU amounts are the GPU filter's: NodeResourcesFit never sees them
    assert set(pod.requests) <= {"nvidia.com/gpu"}
    assert pod.unsupported == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {"gpu_cores": 50},
            r"spec.containers\[0\].resources: nvidia.com/gpucores without nvidia.com/gpu: "
            r"add nvidia.com/gpu: 1",
            id="cores without a GPU",
        ),
        pytest.param(
            {"gpus": 1, "gpu_cores": 150},
            r"resources.nvidia.com/gpucores: must be a percentage in 0..100, got 150",
            id="cores over 100%",
        ),
        pytest.param(
            {"gpus": 1, "gpu_memory_percent": 101},
            r"nvidia.com/gpumem-percentage: must be a percentage in 0..100, got 101",
            id="memory over 100%",
        ),
        pytest.param(
            {"gpus": 1, "extra": {"nvidia.com/gpumem": "4Gi"}},
            r"nvidia.com/gpumem: 4294967296 is too large: write MiB \(4096, not 4Gi\)",
            id="memory in bytes",
        ),
    ],
)
def test_bad_gpu_requests_name_the_field(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PodSpecError, match=message):
        pod_from_manifest(pod_manifest("g", **kwargs))


def _containers(*gpus: int, init: int = 0) -> dict[str, Any]:
    def container(name: str, count: int) -> dict[str, Any]:
        limits = {"nvidia.com/gpu": str(count)} if count else {}
        return {"name": name, "resources": {"limits": limits}}

    return {
        "initContainers": [container(f"i{i}", gpus[i]) for i in range(init)],
        "containers": [container(f"c{i}", n) for i, n in enumerate(gpus[init:])],
    }


RETIRED_MILLI = (
    "the annotation rl-scheduler.io/gpu-milli is retired: ask a GPU share with HAMi's resources instead: "
    "nvidia.com/gpu: 1 with nvidia.com/gpucores: <percent> and nvidia.com/gpumem-percentage: <percent> "
    "(or nvidia.com/gpumem: <MiB>); 300 milli is 30 of each"
)
RETIRED_MODEL = (
    "the annotation rl-scheduler.io/gpu-model is retired: "
    "name the GPU types in the annotation nvidia.com/use-gputype instead (comma-separated)"
)
MIG = (
    'nvidia.com/vgpu-mode "mig": MIG is not implemented by rl-scheduler; '
    "use HAMi's scheduler for MIG pods, or leave the annotation out"
)
INIT = (
    "spec.initContainers[0] asks for GPUs: rl-scheduler places GPUs for app containers only, "
    "not for init containers"
)
NUMA = "nvidia.com/numa-bind: binding several GPUs to one NUMA node is not implemented by rl-scheduler"
MUTEX = 'hami.io/gpu-scheduler-policy "mutex" is not implemented by rl-scheduler'


@pytest.mark.parametrize(
    ("spec", "annotations", "reason"),
    [
        pytest.param({}, {"rl-scheduler.io/gpu-milli": "500"}, RETIRED_MILLI, id="gpu-milli"),
        pytest.param({}, {"rl-scheduler.io/gpu-model": "T4"}, RETIRED_MODEL, id="gpu-model"),
        pytest.param(_containers(1), {"nvidia.com/vgpu-mode": "mig"}, MIG, id="MIG"),
        pytest.param(_containers(1), {"nvidia.com/vgpu-mode": "hami-core"}, "", id="hami-core mode is ours"),
        pytest.param(_containers(1, 1, init=1), {}, INIT, id="init container"),
        pytest.param(_containers(0, 1, 2, init=1), {}, "", id="whole GPUs in several containers"),
        pytest.param(_containers(2), {"nvidia.com/numa-bind": "true"}, NUMA, id="NUMA binding"),
        pytest.param(_containers(1), {"hami.io/gpu-scheduler-policy": "mutex"}, MUTEX, id="mutex policy"),
        pytest.param(
            _containers(1), {"hami.io/gpu-scheduler-policy": "binpack"}, "", id="binpack: ours decides"
        ),
    ],
)
def test_what_rl_scheduler_does_not_place_says_so(
    spec: dict[str, Any], annotations: dict[str, str], reason: str
) -> None:
    manifest = pod_manifest("g", annotations=annotations)
    manifest["spec"].update(spec)
    pod = pod_from_manifest(manifest)
    assert pod.unsupported == ((reason,) if reason else ())


def test_gpus_in_several_containers_are_written_per_container() -> None:
    manifest = pod_manifest("g")
    manifest["spec"].update(_containers(0, 1, 2, init=1))
    gpu = pod_from_manifest(manifest).gpu
    assert (gpu.count, gpu.containers, gpu.container_count) == (3, ((1, 1), (2, 2)), 3)
