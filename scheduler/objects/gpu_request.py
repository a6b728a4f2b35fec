"""A pod's GPU request from HAMi's resources and annotations (``GenerateResourceRequests``
of HAMi's scheduler, with the defaults of its webhook; see ``scheduler.resources.gpu``).

Per container: ``nvidia.com/gpu`` GPUs, ``nvidia.com/gpucores`` % of each one's cores,
``nvidia.com/gpumem`` MiB or ``nvidia.com/gpumem-percentage`` % of each one's memory.
What rl-scheduler does not place says so (``unsupported`` reasons, which the pod gets
as an unresolvable FailedScheduling reason): GPUs asked by an init container, shares
in more than one container, MIG, NUMA binding of several GPUs, HAMi's mutex and
topology-aware GPU policies, and the retired ``rl-scheduler.io`` annotations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.objects.fields import FieldReader
from scheduler.resources.gpu import (
    GPU_CORES_RESOURCE,
    GPU_MEMORY_PERCENT_RESOURCE,
    GPU_MEMORY_RESOURCE,
    GPU_RESOURCE,
    GPU_SCHEDULER_POLICY,
    MILLI_PER_CORE_PERCENT,
    NO_GPU,
    NOUSE_GPU_TYPE,
    NOUSE_GPU_UUID,
    NUMA_BIND,
    RETIRED_ANNOTATIONS,
    USE_GPU_TYPE,
    USE_GPU_UUID,
    VGPU_MODE,
    GpuRequest,
    parse_list,
)
from scheduler.resources.hami import MODE_MIG, SHARED_MODES

# HAMi reads gpumem as an int32 of MiB.
MAX_GPU_MEMORY_MIB = 2**31 - 1
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
UNSUPPORTED_GPU_POLICIES = ("mutex", "topology-aware")


@dataclass(frozen=True, slots=True)
class ContainerGpus:
    """One container's GPU amounts as written (absent: None)."""

    path: str  # spec.containers[0], for messages
    init: bool
    count: int
    cores: int | None
    memory_mib: int | None
    memory_percent: int | None


@dataclass(frozen=True, slots=True)
class _Ask:
    position: int
    count: int
    milli: int
    memory_mib: int
    memory_percent: int

    @property
    def whole(self) -> bool:
        return self.milli == 1000 and self.memory_mib == 0 and self.memory_percent == 100


def _container_ask(reader: FieldReader, position: int, gpus: ContainerGpus) -> _Ask:
    path = f"{gpus.path}.resources"
    for name, value in ((GPU_CORES_RESOURCE, gpus.cores), (GPU_MEMORY_PERCENT_RESOURCE, gpus.memory_percent)):
        if value is not None and value > 100:
            raise reader.fail(f"{path}.{name}", f"must be a percentage in 0..100, got {value}")
    if gpus.memory_mib is not None and gpus.memory_mib > MAX_GPU_MEMORY_MIB:
        raise reader.fail(
            f"{path}.{GPU_MEMORY_RESOURCE}", f"{gpus.memory_mib} is too large: write MiB (4096, not 4Gi)"
        )
    memory = gpus.memory_mib or 0
    # A percentage of 0 counts as unset, as in HAMi; neither memory field: all of it.
    percent = 0 if memory else (gpus.memory_percent or 100)
    cores = gpus.cores
    if cores is None:
        # HAMi's webhook: no gpucores and all of each GPU's memory make the GPUs exclusive.
        percent_given = gpus.memory_percent is not None
        exclusive = gpus.memory_percent == 100 if percent_given else gpus.memory_mib is None
        cores = 100 if exclusive else 0
    return _Ask(position, gpus.count, cores * MILLI_PER_CORE_PERCENT, memory, percent)


def _annotation_reasons(annotations: Mapping[str, str], count: int) -> list[str]:
    reasons = []
    for key, advice in RETIRED_ANNOTATIONS.items():
        if key in annotations:
            reasons.append(f"the annotation {key} is retired: {advice}")
    mode = annotations.get(VGPU_MODE, "").strip()
    if count and mode and not any(m in mode for m in SHARED_MODES):
        if MODE_MIG in mode:
            reasons.append(
                f'{VGPU_MODE} "{mode}": MIG is not implemented by rl-scheduler; '
                "use HAMi's scheduler for MIG pods, or leave the annotation out"
            )
        else:
            reasons.append(
                f'{VGPU_MODE} "{mode}": unknown mode (rl-scheduler places on {", ".join(SHARED_MODES)})'
            )
    if count > 1 and annotations.get(NUMA_BIND, "") in _GO_TRUE:
        reasons.append(
            f"{NUMA_BIND}: binding several GPUs to one NUMA node is not implemented by rl-scheduler"
        )
    policies = parse_list(annotations.get(GPU_SCHEDULER_POLICY, ""))
    for policy in policies:
        if count and policy in UNSUPPORTED_GPU_POLICIES:
            reasons.append(f'{GPU_SCHEDULER_POLICY} "{policy}" is not implemented by rl-scheduler')
    return reasons


def gpu_request(
    reader: FieldReader, containers: Sequence[ContainerGpus], annotations: Mapping[str, str]
) -> tuple[GpuRequest, list[str]]:
    """The pod's ``GpuRequest`` (``containers`` init first, as HAMi numbers them) and the
    reasons rl-scheduler will not place it, if any. Raises for values that are wrong as
    written (naming the field)."""
    asks: list[_Ask] = []
    reasons: list[str] = []
    for position, gpus in enumerate(containers):
        if gpus.count <= 0:
            given = [
                name
                for name, value in (
                    (GPU_CORES_RESOURCE, gpus.cores),
                    (GPU_MEMORY_RESOURCE, gpus.memory_mib),
                    (GPU_MEMORY_PERCENT_RESOURCE, gpus.memory_percent),
                )
                if value is not None
            ]
            if given:
                raise reader.fail(
                    f"{gpus.path}.resources",
                    f"{', '.join(given)} without {GPU_RESOURCE}: add {GPU_RESOURCE}: 1 (HAMi's webhook, "
                    "which would, does not see pods of other schedulers)",
                )
            continue
        ask = _container_ask(reader, position, gpus)
        if gpus.init:
            reasons.append(
                f"{gpus.path} asks for GPUs: rl-scheduler places GPUs for app containers only, "
                "not for init containers"
            )
        asks.append(ask)
    count = sum(a.count for a in asks)
    reasons += _annotation_reasons(annotations, count)
    if not asks:
        return NO_GPU, reasons
    if len(asks) > 1 and not all(a.whole for a in asks):
        reasons.append(
            f"GPU shares in {len(asks)} containers: rl-scheduler places a share for one container "
            "per pod (whole GPUs may be asked by several)"
        )
    first = asks[0]
    request = GpuRequest(
        count=count,
        milli_per_gpu=first.milli,
        memory_mib=first.memory_mib,
        memory_percent=first.memory_percent,
        models=parse_list(annotations.get(USE_GPU_TYPE, "")),
        excluded_models=parse_list(annotations.get(NOUSE_GPU_TYPE, "")),
        uuids=parse_list(annotations.get(USE_GPU_UUID, "")),
        excluded_uuids=parse_list(annotations.get(NOUSE_GPU_UUID, "")),
        mode=annotations.get(VGPU_MODE, "").strip(),
        containers=tuple((a.position, a.count) for a in asks),
        container_count=len(containers),
    )
    return request, reasons
