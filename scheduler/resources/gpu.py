"""How GPUs are written on real pods and nodes: HAMi's device protocol.

A fractional GPU means something only if the node enforces it, so rl-scheduler speaks
the protocol of HAMi's device plugin (``scheduler.resources.hami``). One convention
serves the openb trace, the simulator and the live cluster: a trace pod, a simulated
pod and a real pod spec round-trip (``scheduler.sim.trace``).

Nodes:

- A HAMi node registers its GPUs in ``hami.io/node-nvidia-register`` (UUID, vGPU
  slots, memory in MiB, cores, type, NUMA, mode, health) and advertises
  ``nvidia.com/gpu`` as GPUs x split count. Its GPUs are shared: each keeps free
  cores, memory and slots. Unhealthy, cordoned and MIG devices, and devices whose
  cores are scaled (``devcore`` other than 100), are not placed on.
- A node without the register annotation (the plain NVIDIA device plugin) has
  ``nvidia.com/gpu`` whole GPUs, given whole; their type is the GPU feature
  discovery label ``nvidia.com/gpu.product`` when there is one.

Pods ask per container, with HAMi's resources (what HAMi's scheduler reads):

- ``nvidia.com/gpu: N``: N distinct GPUs;
- ``nvidia.com/gpucores: C``: C% of each GPU's cores (0-100);
- ``nvidia.com/gpumem: M`` MiB, or ``nvidia.com/gpumem-percentage: P`` (1-100) of
  each GPU's memory; neither: all of it;
- without ``nvidia.com/gpucores``, a container whose memory is all of each GPU gets
  whole GPUs (100% cores: what HAMi's webhook makes of ``nvidia.com/gpu`` alone);
  otherwise cores default to 0, as in HAMi. HAMi's webhook does not see pods of
  other schedulers, so nothing else is defaulted: ``gpucores`` or ``gpumem`` without
  ``nvidia.com/gpu`` is refused with a reason.
- Annotations: ``nvidia.com/use-gputype`` / ``nouse-gputype`` (comma lists; a GPU
  matches an entry its type contains, case-insensitively), ``nvidia.com/use-gpuuuid``
  / ``nouse-gpuuuid`` (exact UUIDs), ``nvidia.com/vgpu-mode``.

The core keeps a GPU's cores in milli (thousandths of one GPU: ``gpucores`` x 10), the
unit of the openb trace and of FGD's arithmetic; memory in MiB and vGPU slots beside
it. An openb share of m milli is ``gpucores: m/10`` and ``gpumem-percentage: m/10``
(every openb share is a multiple of 10 milli): memory, floored to MiB per share,
never binds tighter than cores, so placements are the simulator's.

The annotations of before, ``rl-scheduler.io/gpu-milli`` (a share on
``nvidia.com/gpu: 1``, which a kubelet refuses once two shares sit on one GPU) and
``rl-scheduler.io/gpu-model``, are retired; a pod carrying them is told what to
write instead (``RETIRED_ANNOTATIONS``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
GPU_CORES_RESOURCE = "nvidia.com/gpucores"
GPU_MEMORY_RESOURCE = "nvidia.com/gpumem"
GPU_MEMORY_PERCENT_RESOURCE = "nvidia.com/gpumem-percentage"
# Per-GPU amounts: no node advertises them (the kubelet drops them before admission),
# so they are the GPU filter's, never NodeResourcesFit's.
PER_GPU_RESOURCES = (GPU_CORES_RESOURCE, GPU_MEMORY_RESOURCE, GPU_MEMORY_PERCENT_RESOURCE)
USE_GPU_TYPE = "nvidia.com/use-gputype"
NOUSE_GPU_TYPE = "nvidia.com/nouse-gputype"
USE_GPU_UUID = "nvidia.com/use-gpuuuid"
NOUSE_GPU_UUID = "nvidia.com/nouse-gpuuuid"
VGPU_MODE = "nvidia.com/vgpu-mode"
NUMA_BIND = "nvidia.com/numa-bind"
GPU_SCHEDULER_POLICY = "hami.io/gpu-scheduler-policy"
# NVIDIA GPU feature discovery's label: the GPU type of a node without HAMi.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"

GPU_MILLI_ANNOTATION = "rl-scheduler.io/gpu-milli"
GPU_MODEL_ANNOTATION = "rl-scheduler.io/gpu-model"
RETIRED_ANNOTATIONS = {
    GPU_MILLI_ANNOTATION: (
        f"ask a GPU share with HAMi's resources instead: {GPU_RESOURCE}: 1 with "
        f"{GPU_CORES_RESOURCE}: <percent> and {GPU_MEMORY_PERCENT_RESOURCE}: <percent> "
        f"(or {GPU_MEMORY_RESOURCE}: <MiB>); 300 milli is 30 of each"
    ),
    GPU_MODEL_ANNOTATION: f"name the GPU types in the annotation {USE_GPU_TYPE} instead (comma-separated)",
}

MILLI_PER_GPU = 1000
MILLI_PER_CORE_PERCENT = 10
MAX_GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What a pod asks of GPUs.

    ``count`` distinct GPUs, each giving ``milli_per_gpu`` of its cores (thousandths of
    a GPU) and ``memory_mib`` MiB of memory, or ``memory_percent`` % of it when
    ``memory_mib`` is 0. ``models`` the GPU types it accepts and ``excluded_models``
    those it refuses (substrings of a GPU's type; empty: any), ``uuids`` and
    ``excluded_uuids`` the same for GPU UUIDs, ``mode`` the text of
    ``nvidia.com/vgpu-mode`` (empty: any). ``containers``: for each container that asks,
    its position among the pod's init and app containers and its GPU count (they sum to
    ``count``), and ``container_count`` the pod's containers, to write the decision
    where HAMi's device plugin reads it.
    """

    count: int = 0
    milli_per_gpu: int = 0
    memory_mib: int = 0
    memory_percent: int = 0
    models: tuple[str, ...] = ()
    excluded_models: tuple[str, ...] = ()
    uuids: tuple[str, ...] = ()
    excluded_uuids: tuple[str, ...] = ()
    mode: str = ""
    containers: tuple[tuple[int, int], ...] = ()
    container_count: int = 1

    @property
    def total_milli(self) -> int:
        return self.count * self.milli_per_gpu

    @property
    def is_share(self) -> bool:
        return self.count == 1 and 0 < self.milli_per_gpu < MILLI_PER_GPU

    @property
    def is_whole(self) -> bool:
        """All of each GPU (what a node without HAMi can give)."""
        return self.milli_per_gpu == MILLI_PER_GPU and self.memory_mib == 0 and self.memory_percent == 100

    def memory_on(self, gpu_memory_mib: int) -> int:
        """MiB taken of a GPU with ``gpu_memory_mib``: HAMi floors a percentage."""
        return self.memory_mib or gpu_memory_mib * self.memory_percent // 100

    @property
    def type_constraint(self) -> str:
        """The GPU-type constraint as one text (``format_model_list``), for pod shapes."""
        return format_model_list(self.models, self.excluded_models)

    @property
    def gpu_filter_key(self) -> tuple[object, ...]:
        """What, beyond cores, decides which GPUs fit: caches of GPU choices key on it."""
        return (
            self.memory_mib,
            self.memory_percent,
            self.models,
            self.excluded_models,
            self.uuids,
            self.excluded_uuids,
            self.mode,
        )

    @property
    def restricts_gpus(self) -> bool:
        """Whether the pod names GPU types, UUIDs or a mode."""
        return bool(self.models or self.excluded_models or self.uuids or self.excluded_uuids or self.mode)


NO_GPU = GpuRequest()


def parse_list(text: str) -> tuple[str, ...]:
    """A HAMi comma list (``"V100,A100"``); entries trimmed, empty ones dropped. Order
    and repeats are kept: the FGD simulator tells typical pods apart by this text."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def type_matches(gpu_type: str, models: Iterable[str], excluded: Iterable[str] = ()) -> bool:
    """HAMi's ``CheckType``: the type contains one of ``models`` (case-insensitively;
    none: any type) and none of ``excluded``."""
    upper = gpu_type.upper()
    wanted = tuple(models)
    if wanted and not any(m.upper() in upper for m in wanted):
        return False
    return not any(m.upper() in upper for m in excluded)


def format_model_list(models: Iterable[str], excluded: Iterable[str] = ()) -> str:
    """``("V100M16", "V100M32"), ("T4",)`` -> ``"V100M16|V100M32|!T4"``."""
    return "|".join([*models, *(f"!{m}" for m in excluded)])


def parse_model_list(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The inverse of ``format_model_list``: (accepted, excluded)."""
    parts = [m.strip() for m in text.split("|") if m.strip()]
    return tuple(m for m in parts if not m.startswith("!")), tuple(m[1:] for m in parts if m.startswith("!"))


def share_resources(milli: int) -> dict[str, str]:
    """HAMi's per-GPU resources for a share of ``milli`` thousandths of a GPU (a
    multiple of 10): that percentage of its cores and of its memory."""
    percent = str(milli // MILLI_PER_CORE_PERCENT)
    return {GPU_CORES_RESOURCE: percent, GPU_MEMORY_PERCENT_RESOURCE: percent}
