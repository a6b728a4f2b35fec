"""The lifetime feature vector of a pod, as the live scheduler parses it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from scheduler.lifetimes.features import (
    FEATURE_COUNT,
    LIFETIME_FEATURES,
    QOS_LABEL,
    feature_matrix,
    pod_features,
)
from scheduler.sim.trace import load_timed_pods
from tests.builders import make_pod

ZERO = dict.fromkeys(LIFETIME_FEATURES, 0.0)

CASES: list[tuple[str, dict[str, Any], str | None, dict[str, float]]] = [
    (
        "a share on either V100",
        {"cpu": "2", "memory": "4Gi", "gpus": 1, "gpu_milli": 500, "gpu_models": "V100M16,V100M32"},
        None,
        {
            "log1p_cpu_cores": math.log(3),
            "log1p_memory_gib": math.log(5),
            "gpu_share": 1,
            "gpu_share_fraction": 0.5,
            "gpu_model_v100m16": 1,
            "gpu_model_v100m32": 1,
        },
    ),
    (
        "four whole GPUs",
        {"cpu": "8", "memory": "16Gi", "gpus": 4},
        None,
        {
            "log1p_cpu_cores": math.log(9),
            "log1p_memory_gib": math.log(17),
            "multi_gpu": 1,
            "log2_gpu_count": 2,
        },
    ),
    (
        "CPU only",
        {"cpu": "500m", "memory": "1Gi"},
        None,
        {"log1p_cpu_cores": math.log(1.5), "log1p_memory_gib": math.log(2), "cpu_only": 1},
    ),
    (
        "QoS from Koordinator's label",
        {"cpu": "1", "labels": {QOS_LABEL: "BE"}},
        None,
        {"log1p_cpu_cores": math.log(2), "cpu_only": 1, "qos_be": 1},
    ),
    (
        "QoS given overrides the label",
        {"cpu": "1", "labels": {QOS_LABEL: "BE"}},
        "LS",
        {"log1p_cpu_cores": math.log(2), "cpu_only": 1, "qos_ls": 1},
    ),
    ("Guaranteed is no class", {"cpu": "1"}, "Guaranteed", {"log1p_cpu_cores": math.log(2), "cpu_only": 1}),
    (
        "a whole T4 by HAMi's type",
        {"cpu": "1", "gpus": 1, "gpu_models": "NVIDIA-T4"},
        "Burstable",
        {"log1p_cpu_cores": math.log(2), "qos_burstable": 1, "gpu_model_t4": 1},
    ),
]


@pytest.mark.parametrize(("case", "spec", "qos", "expected"), CASES, ids=[c[0] for c in CASES])
def test_pod_features(case: str, spec: dict[str, Any], qos: str | None, expected: dict[str, float]) -> None:
    got = pod_features(make_pod("p", **spec), qos)
    assert got.shape == (FEATURE_COUNT,)
    assert dict(zip(LIFETIME_FEATURES, got.tolist(), strict=True)) == pytest.approx({**ZERO, **expected}), (
        case
    )


def test_feature_matrix_stacks_rows_with_their_qos() -> None:
    pods = [make_pod("a", cpu="1"), make_pod("b", cpu="2", gpus=1)]
    matrix = feature_matrix(pods, ["LS", "BE"])
    assert matrix.shape == (2, FEATURE_COUNT)
    assert np.array_equal(matrix[1], pod_features(pods[1], "BE"))
    assert feature_matrix([]).shape == (0, FEATURE_COUNT)
    with pytest.raises(ValueError, match="QoS"):
        feature_matrix(pods, ["LS"])


def test_trace_pod_and_live_pod_read_alike(tmp_path: Any) -> None:
    """A trace row and the pod written by hand for it give one vector."""
    path = tmp_path / "pods.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time\n"
        "t,6000,12288,1,460,V100M32,LS,Running,0,100\n"
    )
    trace_pod = load_timed_pods(path)[0].pod
    live = make_pod(
        "t", cpu="6", memory="12Gi", gpus=1, gpu_milli=460, gpu_models="V100M32", labels={QOS_LABEL: "LS"}
    )
    assert np.allclose(pod_features(trace_pod, "LS"), pod_features(live))
