"""The binding cycle's plugin points, as kube-scheduler's framework runs them
(``schedule_one.go``: RunReservePluginsReserve, RunPreBindPlugins, RunBindPlugins,
RunReservePluginsUnreserve):

- **Reserve**, right after the decision, before the next pod is decided: each plugin
  sets aside what the bind will write (VolumeBinding assumes the volumes it chose,
  HAMi its device allocation) and keeps it in the pod's ``BindingCycle``;
- **PreBind**, in the background: each plugin writes what must exist before the
  Binding (VolumeBinding binds the claims); a failure (``PreBindError``) ends the
  cycle;
- **Bind**: the plugins are asked in order and the first that does not skip the pod
  (returns a result rather than None) binds it: HAMi's binder for a pod it allocated
  devices to, then ``DefaultBinder``;
- **Unreserve**, when PreBind or Bind fails: every Reserve plugin, in reverse order,
  gives back what it set aside.

The plugins are the registry's built-in ones (``plugins.registry``: ``built_in``
names ``reserve``, ``preBind``, ``bind``); they always run, a profile cannot disable
them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.k8s.client.api import BindOutcome, BindResult
from scheduler.objects.pod import Pod

log = logging.getLogger(__name__)


@dataclass
class BindingCycle:
    """One pod's binding cycle: where it goes, and what each Reserve plugin set aside
    for it (by plugin name; kube's CycleState)."""

    pod: Pod
    node: str
    node_index: int
    held: dict[str, Any] = field(default_factory=dict)


class PreBindError(Exception):
    """A PreBind plugin failed; ``str(error)`` is the pod's FailedScheduling message,
    ``failure`` the ``rl_scheduler_bind_failures_total`` reason."""

    def __init__(self, plugin: str, failure: str, message: str) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.failure = failure


class ReservePlugin(Protocol):
    name: str

    def reserve(self, cycle: BindingCycle) -> None: ...

    def unreserve(self, cycle: BindingCycle) -> None: ...


class PreBindPlugin(Protocol):
    name: str

    async def pre_bind(self, cycle: BindingCycle) -> None:
        """Raises ``PreBindError``."""
        ...


class BindPlugin(Protocol):
    name: str

    async def bind(self, cycle: BindingCycle) -> BindResult | None:
        """None: not this plugin's pod (kube's Skip)."""
        ...


@dataclass(frozen=True)
class BindingPlugins:
    """The plugins at each point, in the order they run."""

    reserve_plugins: Sequence[ReservePlugin]
    pre_bind_plugins: Sequence[PreBindPlugin]
    bind_plugins: Sequence[BindPlugin]

    def reserve(self, pod: Pod, node: str, node_index: int) -> BindingCycle:
        cycle = BindingCycle(pod, node, node_index)
        for plugin in self.reserve_plugins:
            plugin.reserve(cycle)
        return cycle

    def unreserve(self, cycle: BindingCycle) -> None:
        for plugin in reversed(self.reserve_plugins):
            plugin.unreserve(cycle)

    async def pre_bind(self, cycle: BindingCycle) -> None:
        for plugin in self.pre_bind_plugins:
            await plugin.pre_bind(cycle)

    async def bind(self, cycle: BindingCycle) -> BindResult:
        for plugin in self.bind_plugins:
            result = await plugin.bind(cycle)
            if result is not None:
                return result
        # kube: "all bind plugins skipped"; DefaultBinder never skips, so a bug.
        return BindResult(BindOutcome.ERROR, f"no bind plugin bound pod {cycle.pod.key}")
