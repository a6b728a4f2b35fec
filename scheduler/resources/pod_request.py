"""A pod's effective request, computed as kube-scheduler computes it.

Follows ``k8s.io/component-helpers/resource.PodRequests``:

- regular containers are summed;
- init containers run one at a time, so the pod needs the largest of them; a sidecar
  (an init container with ``restartPolicy: Always``) keeps running, so it is added to
  the regular containers' sum and to every init container that starts after it;
  ``request = max(sum(containers) + sum(sidecars), max_i(init_i + sidecars started before i))``
  per resource;
- pod-level ``spec.resources.requests`` replace the aggregate for the resources they set;
- ``spec.overhead`` is added last.

For scoring, a container (regular or init) without a CPU or memory request counts as
100m / 200Mi (``NonMissingContainerRequests``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.objects.pod import CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, MEMORY

ResourceMap = dict[str, int]


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """One container's requests (canonical integers); ``sidecar`` for restartable init."""

    requests: Mapping[str, int] = field(default_factory=dict)
    sidecar: bool = False


_NON_MISSING = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


def _add(into: ResourceMap, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max(into: ResourceMap, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = max(amount, into.get(name, 0))


def _with_defaults(requests: Mapping[str, int], defaults: Mapping[str, int]) -> ResourceMap:
    out = dict(requests)
    for name, amount in defaults.items():
        out.setdefault(name, amount)
    return out


def pod_requests(
    containers: Iterable[ContainerRequest],
    init_containers: Iterable[ContainerRequest] = (),
    overhead: Mapping[str, int] | None = None,
    pod_level: Mapping[str, int] | None = None,
    *,
    non_missing: bool = False,
) -> ResourceMap:
    """The pod's request per resource; ``non_missing`` applies the scoring defaults."""
    defaults: Mapping[str, int] = _NON_MISSING if non_missing else {}
    total: ResourceMap = {}
    for container in containers:
        _add(total, _with_defaults(container.requests, defaults))
    sidecars: ResourceMap = {}
    peak_init: ResourceMap = {}
    for container in init_containers:
        requests = _with_defaults(container.requests, defaults)
        if container.sidecar:
            _add(total, requests)
            _add(sidecars, requests)
            running = dict(sidecars)
        else:
            running = dict(requests)
            _add(running, sidecars)
        _max(peak_init, running)
    _max(total, peak_init)
    if pod_level:
        for name in (CPU, MEMORY):
            if name in pod_level:
                total[name] = pod_level[name]
    if overhead:
        _add(total, overhead)
    return total
