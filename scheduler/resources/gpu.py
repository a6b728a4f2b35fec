"""How GPUs, GPU shares and GPU models are written on real pods and nodes.

One convention serves the openb trace, the simulator and the live cluster, so a trace
pod, a simulated pod and a real pod spec round-trip (see ``scheduler.sim.trace`` and
``scheduler.objects.pod_spec``):

- Whole GPUs: the pod requests ``nvidia.com/gpu: N`` (the NVIDIA device plugin's
  extended resource) and the node advertises ``nvidia.com/gpu: <count>``.
- A GPU share (openb ``num_gpu == 1`` with ``gpu_milli < 1000``): the pod requests
  ``nvidia.com/gpu: 1`` and carries the annotation ``rl-scheduler.io/gpu-milli: "460"``
  (thousandths of one GPU). Several shares may sit on one GPU as long as their milli
  sum stays within 1000. A multi-GPU pod with the annotation takes that share of each
  of its GPUs (openb never does this; every multi-GPU pod takes whole GPUs).
- A GPU-model constraint (openb ``gpu_spec``): the annotation
  ``rl-scheduler.io/gpu-model: "V100M16|V100M32"``; the node's model is its label
  ``rl-scheduler.io/gpu-model``. A pod may instead use an ordinary node affinity on
  that label; both are honoured.
- The GPUs chosen inside the node are written onto the pod at bind time as the
  annotation ``rl-scheduler.io/gpu-index: "0,3"`` (the API server copies a Binding's
  annotations onto the pod), so the live cache knows each GPU's free share after a
  restart.

Because shares make ``nvidia.com/gpu`` a per-GPU rather than a countable quantity, the
NodeResourcesFit filter ignores it (kube-scheduler's ``ignoredResources`` argument) and
the GpuShare filter checks it per GPU instead.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MILLI_ANNOTATION = "rl-scheduler.io/gpu-milli"
GPU_MODEL_ANNOTATION = "rl-scheduler.io/gpu-model"
GPU_INDEX_ANNOTATION = "rl-scheduler.io/gpu-index"
GPU_MODEL_LABEL = "rl-scheduler.io/gpu-model"
MILLI_PER_GPU = 1000
MAX_GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What a pod asks of GPUs.

    ``count`` GPUs, each with ``milli_per_gpu`` thousandths free; ``models`` the GPU
    models it accepts (empty: any).
    """

    count: int = 0
    milli_per_gpu: int = 0
    models: tuple[str, ...] = ()

    @property
    def total_milli(self) -> int:
        return self.count * self.milli_per_gpu

    @property
    def is_share(self) -> bool:
        return self.count == 1 and 0 < self.milli_per_gpu < MILLI_PER_GPU


NO_GPU = GpuRequest()


def parse_model_list(text: str) -> tuple[str, ...]:
    """``"V100M16|V100M32"`` -> ``("V100M16", "V100M32")``; empty text -> no constraint.

    The order is kept: the FGD simulator tells typical pods apart by this text."""
    return tuple(m.strip() for m in text.split("|") if m.strip())


def format_model_list(models: tuple[str, ...]) -> str:
    return "|".join(models)
