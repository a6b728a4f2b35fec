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
    ("kwargs", "count", "milli", "models"),
    [
        pytest.param({"gpus": 2}, 2, 1000, (), id="whole GPUs"),
        pytest.param({"gpus": 1, "gpu_milli": 460}, 1, 460, (), id="a share of one GPU"),
        pytest.param(
            {"gpus": 1, "gpu_models": "V100M16|V100M32"},
            1,
            1000,
            ("V100M16", "V100M32"),
            id="model constraint",
        ),
    ],
)
def test_gpu_requests_from_resources_and_annotations(
    kwargs: dict[str, Any], count: int, milli: int, models: tuple[str, ...]
) -> None:
    gpu = pod_from_manifest(pod_manifest(**kwargs)).gpu
    assert (gpu.count, gpu.milli_per_gpu, gpu.models) == (count, milli, models)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"gpu_milli": 500}, "a GPU share needs nvidia.com/gpu", id="share without GPU"),
        pytest.param(
            {"gpus": 1, "gpu_milli": 1500}, r"must be in 1..1000, got 1500", id="share over one GPU"
        ),
    ],
)
def test_bad_gpu_annotations(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PodSpecError, match=message):
        pod_from_manifest(pod_manifest("g", **kwargs))
