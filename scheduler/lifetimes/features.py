"""What a lifetime model knows of a pod before it runs: a small fixed vector made from
its requests, the same in the trace replay and in the live scheduler.

The features are those the openb trace has for every pod (CPU, memory, GPU count and
share, the GPU models it accepts, QoS), so a model fitted on the trace reads a live pod
the same way. Sizes enter as ``log1p`` (requests span 0.1 to 96 cores, 0 to 768 GiB,
and lifetimes are multiplicative in them, if anything); GPU shape as indicators
(CPU only, a share, several GPUs) beside the share itself, because the trace's 1-GPU
pods are a few fixed shapes, not a continuum. GPU models are one indicator each of the
trace's models (a pod accepting several sets several); a model the trace never names
sets none, as does a pod that accepts any GPU.

QoS: the trace's ``qos`` column holds Koordinator's classes (``LS``, ``BE``) and
Kubernetes' (``Burstable``, ``Guaranteed``, 7 pods on ``default``, folded into no
indicator with any unknown class). A live pod carries Koordinator's class in the
``koordinator.sh/qosClass`` label; the core ``Pod`` has no QoS of its own, so a trace
pod's class is passed in (``pod_features(pod, qos)``).

Namespace, owner kind, priority and labels say much about a live pod's lifetime but the
trace has none of them (every trace pod has priority 0 and one namespace): they are not
features until a live history exists to fit them on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scheduler.objects.pod import Pod

# Bump when a feature changes meaning or order: a model file names the version it was
# fitted on and is refused under another.
LIFETIME_FEATURE_VERSION = 1
QOS_LABEL = "koordinator.sh/qosClass"
QOS_CLASSES = ("LS", "BE", "Burstable")
GPU_MODELS = ("A10", "P100", "T4", "V100M16", "V100M32", "G2", "G3")
BYTES_PER_GIB = 1024**3

LIFETIME_FEATURES: tuple[str, ...] = (
    "log1p_cpu_cores",
    "log1p_memory_gib",
    "cpu_only",
    "gpu_share",  # a share of one GPU (gpu_milli < 1000)
    "gpu_share_fraction",  # the share, 0 for whole GPUs and CPU-only pods
    "multi_gpu",  # more than one GPU
    "log2_gpu_count",
    *(f"qos_{name.lower()}" for name in QOS_CLASSES),
    *(f"gpu_model_{name.lower()}" for name in GPU_MODELS),
)
FEATURE_COUNT = len(LIFETIME_FEATURES)
FloatArray = npt.NDArray[np.float64]


def pod_qos(pod: Pod) -> str:
    """A live pod's QoS class: Koordinator's label, empty when it has none."""
    return pod.labels.get(QOS_LABEL, "")


def pod_features(pod: Pod, qos: str | None = None) -> FloatArray:
    """The pod's lifetime features (``LIFETIME_FEATURES``, in that order). ``qos``
    overrides the pod's label (trace pods carry their class in a column)."""
    cls = pod_qos(pod) if qos is None else qos
    gpu = pod.gpu
    share = gpu.is_share
    accepted = [m.upper() for m in gpu.models]
    values = [
        math.log1p(pod.cpu_milli / 1000),
        math.log1p(pod.memory / BYTES_PER_GIB),
        float(gpu.count == 0),
        float(share),
        gpu.milli_per_gpu / 1000 if share else 0.0,
        float(gpu.count > 1),
        math.log2(gpu.count) if gpu.count else 0.0,
        *(float(cls == name) for name in QOS_CLASSES),
        *(float(any(name.upper() in m for m in accepted)) for name in GPU_MODELS),
    ]
    return np.array(values, np.float64)


def feature_matrix(pods: Sequence[Pod], qos: Sequence[str] | None = None) -> FloatArray:
    """One row of ``pod_features`` per pod (``qos[i]`` for pod ``i`` when given)."""
    if qos is not None and len(qos) != len(pods):
        raise ValueError(f"{len(qos)} QoS classes for {len(pods)} pods")
    rows = [pod_features(p, None if qos is None else qos[i]) for i, p in enumerate(pods)]
    return np.array(rows, np.float64).reshape(len(pods), FEATURE_COUNT)
