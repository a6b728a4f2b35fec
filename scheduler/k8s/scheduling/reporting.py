"""Events and pod conditions, worded like kube-scheduler's, without storms.

A pod that stays unschedulable is retried many times; kube-scheduler's event
broadcaster folds repeated events into series. We post ``FailedScheduling`` when
the message changes or at most every ``repeat_after_s``, and patch the
``PodScheduled`` condition only when its reason or message changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.k8s.client.api import KubeApi
from scheduler.objects.pod import Pod

UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"


@dataclass
class _Reported:
    message: str  # kube's part, without the predicted start
    reason: str
    posted_at: float


@dataclass
class Reporter:
    api: KubeApi
    repeat_after_s: float = 300.0
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, _Reported] = field(default_factory=dict)

    async def scheduled(self, pod: Pod, node: str) -> None:
        self._last.pop(pod.key, None)
        await self.api.post_event(
            pod,
            type_="Normal",
            reason="Scheduled",
            action="Binding",
            note=f"Successfully assigned {pod.namespace}/{pod.name} to {node}",
        )

    async def failed(
        self,
        pod: Pod,
        message: str,
        *,
        reason: str = UNSCHEDULABLE,
        nominated_node: str | None = None,
        predicted_start: str = "",
    ) -> None:
        """A failed attempt: a Warning event and ``PodScheduled=False``, deduplicated;
        with ``nominated_node`` (a preemption's node, or "" to clear it) the status
        patch carries ``nominatedNodeName`` too and is always written.
        ``predicted_start`` (``; likely to start in ...``) follows ``message`` in what
        is posted; a change in it alone is not a new message (the forecast moves with
        every attempt: it is posted again with the repeat)."""
        now = self.clock()
        last = self._last.get(pod.key)
        changed = last is None or last.message != message or last.reason != reason
        changed = changed or nominated_node is not None
        if not changed and last is not None and now - last.posted_at < self.repeat_after_s:
            return
        self._last[pod.key] = _Reported(message, reason, now)
        note = message + predicted_start
        await self.api.post_event(
            pod, type_="Warning", reason="FailedScheduling", action="Scheduling", note=note
        )
        if changed:
            await self.api.set_pod_scheduled_condition(
                pod, reason=reason, message=note, nominated_node=nominated_node
            )

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
