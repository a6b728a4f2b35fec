"""Extension points, shaped like kube-scheduler's framework but over arrays.

A filter looks at all candidate nodes at once and returns, per reason, a mask of the
nodes it rejects. A score plugin returns one integer per candidate node; the profile
normalises and weighs them. Plugins are registered by name (``registry``), so a
profile is a list of names and weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from scheduler.framework.status import SKIP, SUCCESS, Code, Status
from scheduler.objects.pod import Pod
from scheduler.state.cluster_state import BoolArray, ClusterState, IntArray

MAX_NODE_SCORE = 100


@dataclass
class CycleContext:
    """One scheduling attempt of one pod (kube's ``CycleState``)."""

    state: ClusterState
    pod: Pod
    # Labels of namespaces, for pod-affinity ``namespaceSelector``.
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Plugin scratch space, keyed by plugin name.
    data: dict[str, Any] = field(default_factory=dict)
    _request: IntArray | None = None

    @property
    def request(self) -> IntArray:
        """The pod's request over ``state.resource_names`` (computed once)."""
        if self._request is None:
            self._request = self.state.request_vector(self.pod)
        return self._request


@dataclass(frozen=True, slots=True)
class Rejection:
    """Nodes (a mask over the candidates) a filter rejects, and why."""

    reason: str
    nodes: BoolArray
    code: Code = Code.UNSCHEDULABLE


class FilterPlugin(Protocol):
    @property
    def name(self) -> str: ...

    def pre_filter(self, ctx: CycleContext) -> Status:
        """SUCCESS to run ``filter``, SKIP when the pod cannot be affected, or a
        rejection of every node."""
        ...

    def filter(self, ctx: CycleContext, nodes: IntArray) -> list[Rejection]:
        """Rejections among ``nodes`` (indices into the state's rows)."""
        ...


def run_pre_filters(ctx: CycleContext, filters: Sequence[FilterPlugin]) -> tuple[list[FilterPlugin], Status]:
    """PreFilter: the filters whose Filter runs (those that did not skip), or the status
    of the first one that rejects every node."""
    active: list[FilterPlugin] = []
    for plugin in filters:
        status = plugin.pre_filter(ctx)
        if status.code == Code.SKIP:
            continue
        if not status.ok:
            return [], status
        active.append(plugin)
    return active, SUCCESS


class ScorePlugin(Protocol):
    @property
    def name(self) -> str: ...

    def score(self, ctx: CycleContext, nodes: IntArray) -> npt.NDArray[np.int64]:
        """Scores of ``nodes``, already normalised to 0..MAX_NODE_SCORE."""
        ...


class GpuSelector(Protocol):
    """Chooses which GPUs of the chosen node a GPU pod gets."""

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]: ...


class FilterBase:
    """Defaults for filters: always run ``filter``."""

    name: ClassVar[str] = ""

    def pre_filter(self, ctx: CycleContext) -> Status:  # noqa: ARG002
        return Status()


class SkipUnlessBase(FilterBase):
    """A filter that only runs when ``applies`` says the pod uses its feature."""

    def applies(self, ctx: CycleContext) -> bool:
        raise NotImplementedError

    def pre_filter(self, ctx: CycleContext) -> Status:
        return Status() if self.applies(ctx) else SKIP


def default_normalize(scores: npt.NDArray[np.int64], *, reverse: bool = False) -> npt.NDArray[np.int64]:
    """``helper.DefaultNormalizeScore``: scale so the highest is 100 (integer division);
    with ``reverse``, ``100 - scaled``. All zeros stay zero (or become 100 reversed)."""
    top = int(scores.max()) if scores.size else 0
    if top == 0:
        return np.full_like(scores, MAX_NODE_SCORE) if reverse else scores.copy()
    scaled = scores * MAX_NODE_SCORE // top
    return MAX_NODE_SCORE - scaled if reverse else scaled
