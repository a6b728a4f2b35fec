"""The scheduler at run time: watch events in, decisions and binds out.

Per pod (``schedule_one``): filter and score with the active profile on the cached
``ClusterState``, assume the placement in the cache, bind in the background through
the ``pods/binding`` subresource (with the pod's UID), and forget the assumption if
the bind fails. Only the leader takes pods off the queue; every replica keeps its
cache warm from the watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from scheduler.errors import SchedulerInputError
from scheduler.framework.preemption import PreemptionFailure, PreemptionOutcome
from scheduler.framework.profile import Decision, NodeNarrowing, schedule_pod
from scheduler.framework.status import Code
from scheduler.k8s.client import paths
from scheduler.k8s.client.api import BindOutcome, BindResult, KubeApi
from scheduler.k8s.client.unreadable import object_name, skipping
from scheduler.k8s.process.heap import collector_paused
from scheduler.k8s.process.settings import Settings
from scheduler.k8s.scheduling.bind_plugins import DefaultBinder, HamiBinder, VolumeBindingStep
from scheduler.k8s.scheduling.binding_cycle import BindingCycle, BindingPlugins, PreBindError
from scheduler.k8s.scheduling.budgets import KIND as BUDGET
from scheduler.k8s.scheduling.budgets import PLURAL as BUDGETS
from scheduler.k8s.scheduling.budgets import DisruptionBudgets, list_budgets
from scheduler.k8s.scheduling.cache import NodeChange, PodChange, SchedulerCache, pod_key
from scheduler.k8s.scheduling.dra_binder import DraBinder, api_patcher
from scheduler.k8s.scheduling.dra_events import DraKind, list_dra
from scheduler.k8s.scheduling.gang_cycle import GANG_PLUGIN, schedule_gang
from scheduler.k8s.scheduling.gangs import GangIndex, list_pod_groups
from scheduler.k8s.scheduling.hami import NodeLocker, NodeLocks
from scheduler.k8s.scheduling.hints import (
    HINTED_REASONS,
    claim_change_helped,
    deletion_helped,
    helped,
    node_change_helped,
    volume_change_helped,
)
from scheduler.k8s.scheduling.lifetimes import LiveLifetimes
from scheduler.k8s.scheduling.lifetimes_starts import StartPredictions, message_suffix, pods_ahead
from scheduler.k8s.scheduling.policy import ActiveProfile, PolicyManager
from scheduler.k8s.scheduling.preemptor import Preemptor, failed_scheduling_message
from scheduler.k8s.scheduling.queue import Hint, QueuedPod, QueueName, SchedulingQueue
from scheduler.k8s.scheduling.reporting import SCHEDULER_ERROR, Reporter
from scheduler.k8s.scheduling.volume_binder import VolumeBinder
from scheduler.k8s.scheduling.volume_events import VolumeEvents, VolumeKind, list_volumes, pvc_key
from scheduler.k8s.serving.metrics import Metrics, attempts_label
from scheduler.lifetimes.features import pod_qos
from scheduler.objects.pod import Pod
from scheduler.objects.pod_group import CORE_GROUP, GROUP, pod_group_key
from scheduler.online.experience import ExperienceLog

log = logging.getLogger(__name__)

# How long the loop waits at its start for this replica's first try of the Lease before
# it counts as idle (``SchedulerRuntime._wait_to_lead``).
FIRST_LEASE_WAIT_S = 1.0


def pod_requests(pod: Pod) -> dict[str, Any]:
    """What the experience log keeps of a pod's requests."""
    return {
        "cpu_milli": pod.cpu_milli,
        "memory": pod.memory,
        "gpu_count": pod.gpu.count,
        "gpu_milli": pod.gpu.milli_per_gpu,
        "gpu_models": list(pod.gpu.models),
        "qos": pod_qos(pod),  # the lifetime model's QoS feature (absent in older logs: none)
    }


def pod_stub(manifest: Mapping[str, Any]) -> Pod:
    """A pod by its name and UID alone: enough to post an event or a condition about it."""
    metadata = manifest.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    return Pod(name=str(metadata.get("name")), namespace=namespace, uid=str(metadata.get("uid") or ""))


class SchedulerRuntime:
    def __init__(self, settings: Settings, api: KubeApi, metrics: Metrics, policy: PolicyManager) -> None:
        self.settings = settings
        self.api = api
        self.metrics = metrics
        self.policy = policy
        self.cache = SchedulerCache(policy.scheduler_names, unreadable=self.skip_unreadable)
        self.cache.state.dra_gpu_classes = frozenset(settings.dra_gpu_classes)
        self.queue = SchedulingQueue(hinted=HINTED_REASONS)
        self.reporter = Reporter(api)
        self.leading = asyncio.Event()
        self.synced = asyncio.Event()
        # Set the first time the loop has nothing to do (no pod to take and no bind in
        # flight, or not leading past the start's first try of the Lease): what can
        # wait for the first burst waits for it.
        self.first_idle = asyncio.Event()
        self.first_lease_wait_s = FIRST_LEASE_WAIT_S
        self._wake = asyncio.Event()
        self._binds: set[asyncio.Task[None]] = set()
        # When each listing under way was asked for (a resync and a watch's relist can overlap).
        self._listings_asked: list[float] = []
        self.node_locks = NodeLocks()
        self.locker = NodeLocker(api, known_pod=lambda key: key in self.cache.seen_pods)
        self.volume_events = VolumeEvents(self.cache.state.volumes)
        self.volume_binder = VolumeBinder(api, self.cache.state, lambda key: key in self.cache.seen_pods)
        volumes = VolumeBindingStep(self.volume_binder)
        hami = HamiBinder(self.cache.state, self.locker, self.node_locks)
        dra = DraBinder(self.cache.state, api_patcher(api), settled=self._claims_settled)
        self.binding = BindingPlugins(
            reserve_plugins=(volumes, dra, hami),
            pre_bind_plugins=(volumes, dra),
            bind_plugins=(hami, DefaultBinder(api)),
        )
        self.budgets = DisruptionBudgets()  # PodDisruptionBudgets, from their watch
        self.preemptor = Preemptor(api, self.cache, policy.rng, self.budgets)
        self.gangs = GangIndex()
        # The live lifetime model (the profiles' ``ProfileContext.lifetimes``), and the
        # start forecasts of pods that fit nowhere (none without it).
        lifetimes = getattr(policy, "lifetimes", None)
        self.lifetimes = lifetimes if isinstance(lifetimes, LiveLifetimes) else None
        self.starts = StartPredictions(self.lifetimes, metrics) if self.lifetimes is not None else None
        self.experience: ExperienceLog | None = None
        if settings.experience_dir is not None:
            cap = settings.experience_max_mb * 2**20
            segment = max(cap // 16, 2**16)
            self.experience = ExperienceLog(settings.experience_dir, max_bytes=cap, segment_bytes=segment)

    # ---- watch events ---------------------------------------------------------
    # Listings and watches deliver every object through these, and each one is read
    # inside ``skipping``: an object that cannot be read costs that object only.

    def skip_unreadable(self, kind: str, manifest: Any, error: Exception) -> None:
        """An object that could not be applied: logged by name, counted, and reported on
        the pod when it is a pending pod of ours (it is never queued)."""
        name = object_name(manifest)
        self.metrics.unreadable_objects.labels(kind).inc()
        if isinstance(error, SchedulerInputError):
            log.warning("%s %s skipped: %s", kind, name, error)
        else:  # a bug of ours: the traceback says where
            log.error("%s %s skipped: reading it failed", kind, name, exc_info=error)
        if kind == "pod" and self._pending_of_ours(manifest):
            self._report_invalid(name, manifest, f"rl-scheduler cannot read this pod: {error}")

    def _pending_of_ours(self, manifest: Any) -> bool:
        spec = manifest.get("spec") if isinstance(manifest, Mapping) else None
        return isinstance(spec, Mapping) and not spec.get("nodeName") and self.cache.is_ours(spec)

    def on_node_event(self, event_type: str, manifest: Mapping[str, Any]) -> None:
        with skipping("node", manifest, self.skip_unreadable):
            self._on_node_event(event_type, manifest)

    def on_namespace_event(self, event_type: str, manifest: Mapping[str, Any]) -> None:
        with skipping("namespace", manifest, self.skip_unreadable):
            self.cache.on_namespace(event_type, manifest)

    def on_volume_event(self, kind: VolumeKind, event_type: str, manifest: Mapping[str, Any]) -> None:
        with skipping(kind.kind, manifest, self.skip_unreadable):
            if self.volume_events.apply(kind, event_type, manifest):
                self.volume_binder.changed()
                claim = pvc_key(kind, manifest)
                self._retry_helped(
                    lambda pending, reasons: volume_change_helped(pending, reasons, claim),
                    f"{kind.kind}Change",
                )

    def on_dra_event(self, kind: DraKind, event_type: str, manifest: Mapping[str, Any]) -> None:
        with skipping(kind.kind, manifest, self.skip_unreadable):
            change = self.cache.on_dra(kind.plural, event_type, manifest)
            if change is None:
                return
            event = f"{kind.kind}Change"
            claim = change.claim
            if claim is None:
                self._cluster_changed(event)
            else:
                self._retry_helped(lambda pending, _reasons: claim_change_helped(pending, claim), event)

    def on_budget_event(self, event_type: str, manifest: Mapping[str, Any]) -> None:
        """A PodDisruptionBudget: preemption reads it at its next decision (no pod is
        requeued, as in kube-scheduler)."""
        with skipping(BUDGET, manifest, self.skip_unreadable):
            self.budgets.apply(event_type, manifest)

    def on_pod_event(self, event_type: str, manifest: Mapping[str, Any]) -> None:
        with skipping("pod", manifest, self.skip_unreadable):
            self._on_pod_event(event_type, manifest)

    def on_pod_group_event(self, event_type: str, manifest: Mapping[str, Any], api: str = GROUP) -> None:
        """A PodGroup of ``api`` (scheduler-plugins', or the Workload API's)."""
        with skipping("podgroup", manifest, self.skip_unreadable):
            self._gang_changed(self.gangs.on_pod_group(event_type, manifest, api), "PodGroupChange")

    def _on_node_event(self, event_type: str, manifest: Mapping[str, Any]) -> None:
        metadata = manifest.get("metadata") or {}
        if event_type == "DELETED":
            self.node_locks.forget(str(metadata.get("name")))
        else:
            self.node_locks.observe(
                str(metadata.get("name")),
                metadata.get("annotations"),
                str(metadata.get("resourceVersion") or ""),
            )
        change = self.cache.on_node(event_type, manifest)
        if change is not None:
            self._node_changed(change)

    def _on_pod_event(self, event_type: str, manifest: Mapping[str, Any]) -> None:
        event = self.cache.on_pod(event_type, manifest)
        group = self.gangs.on_pod(event_type, manifest)
        if event.change is PodChange.PENDING and event.pod is not None:
            known = event.key in self.queue
            where = self.queue.add(event.pod)
            if not known:
                self.metrics.incoming_pods.labels(where.value, "PodAdd").inc()
                self.policy.on_arrival(event.pod)
                self._record_arrival(event.pod)
                if group:  # one more member: the group may have enough pods now
                    self._gang_changed(group, "PodAdd")
            self._wake.set()
        elif event.change is PodChange.INVALID and event.error is not None:
            self.metrics.unreadable_objects.labels("pod").inc()
            self._report_invalid(event.key, manifest, str(event.error))
        elif event.change in (PodChange.BOUND, PodChange.GONE):
            if self.queue.forget(event.key):
                self.reporter.forget(event.key)
            self._lifetime_event(event.key, bound=event.change is PodChange.BOUND)
            if event.rejected_by_node:
                self._report_rejected(manifest, event.rejected_by_node)
            if event.pod is not None and (event.landed or event.relabeled_from is not None):
                self._assigned_pod_changed(event.relabeled_from, event.pod)
            if event.frees_resources and event.change is PodChange.GONE and event.pod is not None:
                self._assigned_pod_deleted(event.pod)
                if self.experience is not None:
                    self.experience.append({"kind": "departure", "t": time.time(), "pod": event.key})
            elif event.frees_resources:  # resized in place
                self._cluster_changed("AssignedPodUpdate")

    def _lifetime_event(self, key: str, *, bound: bool) -> None:
        """A pod bound (its age counts from now until its startTime is known) or gone;
        either way its start forecast and series go."""
        if self.starts is not None:
            self.starts.forget(key)
        if self.lifetimes is not None:
            if bound:
                self.lifetimes.bound(key)
            else:
                self.lifetimes.forget(key)

    def _predicted_start(self, pod: Pod, active: ActiveProfile) -> str:
        """``; likely to start in ...`` for a pod that fits nowhere ("" without a
        lifetime model). A forecast that fails costs its line, never the attempt."""
        if self.starts is None:
            return ""
        try:
            predicted = self.starts.predict(
                pod,
                self.cache.state,
                active.profile.filters,
                lambda: pods_ahead(pod, self.queue.waiting()),
                self.cache.namespace_labels,
            )
        except Exception:
            log.exception("start forecast for %s failed", pod.key)
            return ""
        return "" if predicted is None else message_suffix(predicted)

    def _gang_changed(self, group: str, event: str) -> None:
        """Retry the group's members now (Coscheduling's queueing hints: a pod added,
        a PodGroup added or changed)."""
        moved = self.queue.move_to_active_or_backoff(self.gangs.members.get(group, ()))
        if moved:
            self.metrics.incoming_pods.labels(QueueName.BACKOFF.value, event).inc(moved)
            self._wake.set()

    def _waits_for_claim(self, pod: Pod) -> bool:
        """The pod shares a claim whose allocation this scheduler is writing for another
        pod: it waits aside, unreported, until that write is answered (``_claims_settled``).
        kube-scheduler tries it, fails it in PreFilter (``resource claim ... is in the
        process of being allocated``), reports that and requeues it when the claim
        changes; in a burst of pods sharing claims, where our cycles outpace our writes,
        that cost thousands of attempts, FailedScheduling events and requeues."""
        flying = self.cache.state.dra.in_flight
        if not flying or not pod.resource_claims:
            return False
        for name in pod.resource_claims:
            key = f"{pod.namespace}/{name}"
            if name is not None and key in flying:
                return self.queue.wait_for(pod.key, key)  # the cause: that claim's write
        return False

    def _claims_settled(self, freed: bool) -> None:
        """Allocations in flight were written or given back (``freed``: their devices
        are free again): the pods waiting for a claim no longer in flight are tried."""
        flying = self.cache.state.dra.in_flight
        moved = 0
        for claim_key in self.queue.waited_for():
            if claim_key not in flying:
                moved += self.queue.resume(claim_key)
        if moved:
            self.metrics.incoming_pods.labels(QueueName.ACTIVE.value, "ResourceClaimChange").inc(moved)
            self._wake.set()
        if freed:
            self._cluster_changed("ResourceClaimChange")

    def _assigned_pod_changed(self, before: Pod | None, after: Pod) -> None:
        """A pod landed on its node (``before`` None) or changed its labels there: the
        unschedulable pods it may help are tried again (``hints``)."""
        moved = self.queue.move_helped(
            lambda pending, rejected_by: helped(pending, rejected_by, before, after)
        )
        if moved:
            event = "AssignedPodAdd" if before is None else "AssignedPodUpdate"
            self.metrics.incoming_pods.labels(QueueName.BACKOFF.value, event).inc(moved)
            self._wake.set()

    def _assigned_pod_deleted(self, deleted: Pod) -> None:
        """A pod left its node: the unschedulable pods its leaving may help are tried
        again (``hints.deletion_helped``)."""
        self._retry_helped(
            lambda pending, reasons: deletion_helped(pending, reasons, deleted), "AssignedPodDelete"
        )

    def _node_changed(self, change: NodeChange) -> None:
        """A node was added or changed: the unschedulable pods it may help are tried
        again (``hints.node_change_helped``)."""
        before, after = change.before, change.after
        self._retry_helped(
            lambda pending, reasons: node_change_helped(pending, reasons, before, after),
            "NodeAdd" if before is None else "NodeUpdate",
        )

    def _retry_helped(self, hint: Hint, event: str) -> None:
        """The unschedulable pods ``hint`` says ``event`` may help (any of them, not
        only those the queue indexes) are tried again."""
        moved = self.queue.move_helped(hint, every=True)
        if moved:
            self.metrics.incoming_pods.labels(QueueName.BACKOFF.value, event).inc(moved)
            self._wake.set()

    def _cluster_changed(self, event: str) -> None:
        moved = self.queue.move_all_to_active_or_backoff()
        if moved:
            self.metrics.incoming_pods.labels(QueueName.BACKOFF.value, event).inc(moved)
            self._wake.set()

    def _report_rejected(self, manifest: Mapping[str, Any], reason: str) -> None:
        """A pod we placed that the node's kubelet refused: the room we counted on was
        taken by a pod the cache did not know of yet (another scheduler's bind, or a
        pod created with ``nodeName``). Counted, logged and said on the pod, once."""
        spec, status = manifest.get("spec") or {}, manifest.get("status") or {}
        pod = pod_stub(manifest)
        node = str(spec.get("nodeName") or "")
        self.metrics.node_rejections.labels(reason).inc()
        note = (
            f"the kubelet on {node} refused the pod ({reason}: {status.get('message') or ''}): another "
            "scheduler or a pod created with nodeName took the room rl-scheduler counted on; "
            "give each scheduler its own nodes to avoid it"
        )
        log.warning("pod %s: %s", pod.key, note)
        event = self.api.post_event(
            pod,
            type_="Warning",
            reason="RejectedByNode",
            action="Binding",
            note=note[:1024],  # 1 kB at most
        )
        self.spawn(event)

    def _report_invalid(self, key: str, manifest: Mapping[str, Any], message: str) -> None:
        """A pod we cannot even parse: report once per message, never queue it."""
        stub = pod_stub(manifest)
        self.metrics.invalid_pods.inc()
        log.warning("pod %s cannot be scheduled as written: %s", key, message)
        self.spawn(self.reporter.failed(stub, message, reason="Unschedulable"))

    # ---- listing --------------------------------------------------------------

    async def list_and_apply(self) -> dict[str, str]:
        """List storage objects, nodes, namespaces and pods, apply them as events, and
        drop what the listing no longer has (a deletion a restarted watch never
        reported). Returns each listing's resourceVersion by plural (``nodes``,
        ``pods``, ``persistentvolumeclaims``, ...), where that kind's watch picks up."""
        listed_at = time.monotonic()
        self._listings_asked.append(listed_at)
        try:
            return await self._list_and_apply(listed_at)
        finally:
            self._listings_asked.remove(listed_at)
            self.cache.forget_deletions_before(min(self._listings_asked, default=listed_at))

    async def _list_and_apply(self, listed_at: float) -> dict[str, str]:
        seen: dict[str, set[str]] = {}
        kinds = (
            ("nodes", paths.NODES, self.on_node_event),
            ("namespaces", paths.NAMESPACES, self.on_namespace_event),
            ("pods", paths.PODS, self.on_pod_event),
        )
        # Asked for at once (each in a worker thread), applied in this order: at 5,000
        # nodes one after another they were most of the time to the first decision.
        listings = [asyncio.ensure_future(self.api.list_with_version(path)) for _, path, _ in kinds]
        try:
            skipped = self.skip_unreadable
            versions = await list_volumes(self.api.list_with_version, self.volume_events, skipped)
            versions.update(await list_dra(self.api.list_with_version, self.cache.state.dra, skipped))
            versions["podgroups"] = await list_pod_groups(self.api.list_with_version, self.gangs, skipped)
            versions[paths.CORE_POD_GROUPS] = await list_pod_groups(
                self.api.list_with_version, self.gangs, skipped, CORE_GROUP
            )
            versions[BUDGETS] = await list_budgets(self.api.list_with_version, self.budgets, skipped)
            fetched = await asyncio.gather(*listings)
        finally:
            for listing in listings:
                listing.cancel()
        # The cache's objects live on: no collector passes over them while they are made.
        with collector_paused():
            for (kind, _, handler), (items, versions[kind]) in zip(kinds, fetched, strict=True):
                key_of = pod_key if kind == "pods" else object_name
                keys = seen[kind] = set()
                for item in items:
                    item_key = key_of(item)
                    keys.add(item_key)
                    if kind != "namespaces" and self.cache.newer_than_listing(kind, item_key, listed_at):
                        continue  # the watch showed it since the listing began
                    handler("ADDED", item)
        for key in self.cache.resync(seen["pods"], seen["nodes"], listed_at):
            self.gangs.forget_pod(key)
            if self.queue.forget(key):
                self.reporter.forget(key)
            self._lifetime_event(key, bound=False)
        if not self.synced.is_set():  # at start only: a line of every pod of ours each resync is too much
            self._record_residents()
        self.synced.set()
        return versions

    def _record_residents(self) -> None:
        """Our pods on nodes after the first listing, for the trainer's lifetimes: a pod it
        saw bound that is not among them left while no scheduler watched (a restart), so
        it is censored where a listing last had it, not taken as still running."""
        if self.experience is not None:
            names = self.cache.scheduler_names
            ours = sorted(k for k, p in self.cache.state.placements.items() if p.pod.scheduler_name in names)
            self.experience.append({"kind": "residents", "t": time.time(), "pods": ours})

    async def resync_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_s)
            try:
                await self.list_and_apply()
            except Exception as error:  # the API is down: the next round will do
                log.warning("resync failed: %s", error)

    # ---- the loop -------------------------------------------------------------

    async def _wait_to_lead(self) -> None:
        """Not leading: idle until this replica leads. At the start the first try of
        the Lease (a read and a write) is waited for up to ``first_lease_wait_s`` before
        the loop counts as idle, so that what waits for the first idle moment (kopf's
        import, the serving certificate, the gauges) does not share the GIL with the
        first burst; a Lease held by another replica takes longer, and that work is done
        meanwhile."""
        if not self.first_idle.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.leading.wait(), self.first_lease_wait_s)
        if not self.leading.is_set():
            self.first_idle.set()
            await self.leading.wait()

    async def run(self) -> None:
        """Take pods off the queue while leading; never returns."""
        while True:
            if not self.leading.is_set():
                await self._wait_to_lead()
            entry = self.queue.pop()
            if entry is None:
                if not self._binds:
                    self.first_idle.set()
                self._wake.clear()
                timeout = self.queue.next_ready_in()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._wake.wait(), timeout=1.0 if timeout is None else min(timeout, 1.0)
                    )
                continue
            try:
                self.schedule_one(entry)
            except Exception as error:  # a bug must cost one attempt, not the scheduler
                log.exception("scheduling %s failed", entry.pod.key)
                self._attempt_error(entry, f"scheduler error: {type(error).__name__}: {error}")
            await asyncio.sleep(0)  # let watch events and binds in between decisions

    def schedule_one(self, entry: QueuedPod) -> None:
        pod = entry.pod
        started = time.perf_counter()
        # The profile named by the pod's schedulerName (metrics are labelled by it).
        active = self.policy.profile_for(pod.scheduler_name)
        if active is None:  # a pod queued for a profile this process no longer has
            self.queue.forget(pod.key)
            return
        group = self.gang_of(pod, active)
        if group:
            schedule_gang(self, entry, group, started)
            return
        if self._waits_for_claim(pod):
            return
        decision = self.decide(pod, active)
        self.observe_cycle(decision, started, active)
        if decision.scheduled:
            self.accept(entry, decision, started, active, self.assume(decision))
            return
        self.reject(entry, decision, active, started)

    def gang_of(self, pod: Pod, active: ActiveProfile) -> str:
        """The key of the gang the pod is decided with; "" to decide it alone (no group,
        Coscheduling disabled in its profile, or a PodGroup of the basic policy)."""
        if not active.profile.gangs:
            return ""
        group = pod_group_key(pod.namespace, pod.labels, pod.scheduling_group)
        known = self.gangs.groups.get(group) if group else None
        return "" if known is not None and not known.gang else group

    def decide(self, pod: Pod, active: ActiveProfile, narrow: NodeNarrowing | None = None) -> Decision:
        nominated = self.preemptor.nominated_besides(pod) if self.cache.nominated else []
        state, labels = self.cache.state, self.cache.namespace_labels
        return schedule_pod(state, pod, active.profile, self.policy.rng, labels, nominated, narrow)

    def assume(self, decision: Decision) -> BindingCycle:
        """Place the pod in the cache before its bind, then run the Reserve plugins;
        returns the binding cycle with what they set aside for the bind."""
        pod = decision.pod
        self.cache.assume(pod, decision.node, decision.gpu_indices)
        return self.binding.reserve(pod, decision.node, decision.node_index)

    def forget(self, cycle: BindingCycle) -> None:
        """Undo ``assume``: the Unreserve plugins, then the cache's placement."""
        self.binding.unreserve(cycle)
        self.cache.forget(cycle.pod.key)

    def accept(
        self,
        entry: QueuedPod,
        decision: Decision,
        started: float,
        active: ActiveProfile,
        cycle: BindingCycle,
    ) -> None:
        self.metrics.decisions.labels(active.source).inc()
        self.spawn(self._bind(entry, decision, started, cycle))

    def reject(
        self,
        entry: QueuedPod,
        decision: Decision,
        active: ActiveProfile,
        started: float,
        gang_message: str = "",
        *,
        report: bool = True,
    ) -> None:
        """A failed attempt: back to the queue, then PostFilter (preemption) or the
        FailedScheduling report (unless ``report`` is False: the gang's PostFilter
        reports). A gang's members report the gang's message and do not preempt one by
        one (the room one member's victims free is no use to a gang that fell short)."""
        pod = entry.pod
        unschedulable = decision.status.code != Code.ERROR
        result = "unschedulable" if unschedulable else "error"
        self.metrics.schedule_attempts.labels(result, pod.scheduler_name).inc()
        elapsed = time.perf_counter() - started
        self.metrics.attempt_duration.labels(result, pod.scheduler_name).observe(elapsed)
        if gang_message:
            rejected_by = plugins = frozenset({GANG_PLUGIN})
        elif decision.reason_counts:
            rejected_by, plugins = frozenset(decision.reason_counts), decision.plugins
        else:
            rejected_by = frozenset({"PreFilter"})
            plugins = decision.plugins
        self.queue.failed(pod.key, rejected_by, unschedulable=unschedulable, plugins=plugins)
        if unschedulable and not gang_message and active.profile.preemption is not None:
            # PostFilter reports the attempt; one at a time per pod (the one under way
            # reports this attempt too).
            if pod.key not in self.preemptor.in_flight:
                self._post_filter(pod, decision, active)
            return
        # When it is likely to start (not a gang's: it starts when all of it fits).
        predicted = self._predicted_start(pod, active) if unschedulable and not gang_message else ""
        if report:
            reason = "Unschedulable" if unschedulable else SCHEDULER_ERROR
            message = gang_message or decision.message
            self.spawn(self.reporter.failed(pod, message, reason=reason, predicted_start=predicted))

    def _post_filter(self, pod: Pod, decision: Decision, active: ActiveProfile) -> None:
        """DefaultPreemption for a pod that fits nowhere, in its scheduling cycle: decided
        and nominated in the cache now; the evictions and the FailedScheduling that says
        what came of it (as kube-scheduler's) are written in the background. The start
        forecast (``_predicted_start``; it reads neither nominations nor the policy's
        random numbers) is made only for a FailedScheduling that carries it: a pod that
        preempts is reported without one."""
        self.metrics.preemption_attempts.inc()
        try:
            outcome = self.preemptor.decide(
                pod, active.profile, self.cache.namespace_labels, decision.node_statuses
            )
        except Exception as error:  # a bug must cost this attempt's preemption only
            log.exception("preemption for %s not decided: %s: %s", pod.key, type(error).__name__, error)
            predicted = self._predicted_start(pod, active)
            self.spawn(self.reporter.failed(pod, decision.message, predicted_start=predicted))
            return
        if outcome is None:  # it fits now: the change that made room requeued it
            return
        if isinstance(outcome, PreemptionFailure):
            predicted = self._predicted_start(pod, active)
            clear = "" if outcome.clears_nomination and pod.nominated_node_name else None
            # kube's DynamicResources PostFilter sees the claims only after its
            # PreFilter passed.
            has_claims = bool(pod.resource_claims) and not decision.pre_filter_message
            message = failed_scheduling_message(outcome, has_claims=has_claims)
            self.spawn(self.reporter.failed(pod, message, nominated_node=clear, predicted_start=predicted))
            return
        self.metrics.preemption_victims.observe(len(outcome.victims))
        # One preemption at a time per pod, until its victims' deletions are answered;
        # the pod is not tried meanwhile (kube's DefaultPreemption PreEnqueue).
        self.preemptor.in_flight.add(pod.key)
        self.queue.hold(pod.key)
        self.spawn(self._preempt(pod, outcome, decision.message))

    async def _preempt(self, pod: Pod, outcome: PreemptionOutcome, message: str) -> None:
        """kube's ``prepareCandidateAsync``: the victims evicted and the pod's nomination
        written while the loop goes on. Then the pod waits for its victims' deletions,
        or is tried again at once when they were seen meanwhile or when a victim was not
        deleted (logged; kube activates the pod then)."""
        evicted = False
        try:
            evicted, _ = await asyncio.gather(
                self.preemptor.carry_out(pod, outcome),
                self.reporter.failed(pod, message, nominated_node=outcome.node),
            )
        finally:
            self.preemptor.in_flight.discard(pod.key)
            gone = evicted and not any(self.cache.still_placed(victim) for victim in outcome.victims)
            where = self.queue.release(pod.key, retry=gone or not evicted)
            if where is not None and where is not QueueName.UNSCHEDULABLE:
                event = "AssignedPodDelete" if evicted else "PreemptionFailed"
                self.metrics.incoming_pods.labels(where.value, event).inc()
                self._wake.set()
        if not evicted:
            log.warning(
                "preemption for %s on %s not carried out: the pod is tried again", pod.key, outcome.node
            )

    def _attempt_error(self, entry: QueuedPod, message: str) -> None:
        self.cache.forget(entry.pod.key)
        self.metrics.schedule_attempts.labels("error", entry.pod.scheduler_name).inc()
        self.queue.failed(entry.pod.key, frozenset({"SchedulerError"}), unschedulable=False)
        self.spawn(self.reporter.failed(entry.pod, message, reason=SCHEDULER_ERROR))

    async def _bind(self, entry: QueuedPod, decision: Decision, started: float, cycle: BindingCycle) -> None:
        """The binding cycle in the background: PreBind, then Bind; on a failure the
        Reserve plugins give back what they set aside and the cache forgets the pod."""
        pod = entry.pod
        try:
            await self.binding.pre_bind(cycle)
        except PreBindError as error:
            # kube-scheduler: a PreBind error, the pod decided again after a backoff.
            self.forget(cycle)
            self.metrics.bind_failures.labels(error.failure).inc()
            self.queue.failed(pod.key, frozenset({error.plugin}), unschedulable=False)
            self._wake.set()
            await self.reporter.failed(pod, str(error), reason=SCHEDULER_ERROR)
            return
        try:
            result = await self.binding.bind(cycle)
        except Exception as error:  # a bug or an unexpected client failure: never lose the pod
            log.exception("bind of %s failed unexpectedly", pod.key)
            result = BindResult(BindOutcome.ERROR, f"{type(error).__name__}: {error}")
        if result.outcome is BindOutcome.BOUND:
            self.queue.done(pod.key)
            elapsed = time.perf_counter() - started
            self.metrics.schedule_attempts.labels("scheduled", pod.scheduler_name).inc()
            self.metrics.attempt_duration.labels("scheduled", pod.scheduler_name).observe(elapsed)
            self.metrics.pod_attempts.observe(entry.attempts)
            self.metrics.sli_duration.labels(attempts_label(entry.attempts)).observe(
                time.monotonic() - entry.first_seen
            )
            self._record(decision)
            await self.reporter.scheduled(pod, decision.node)
            return
        self.forget(cycle)
        if result.outcome is BindOutcome.NODE_LOCKED:
            self._lock_wait_over(entry)
            return
        self.metrics.bind_failures.labels(result.outcome.value).inc()
        if result.outcome in (BindOutcome.POD_GONE, BindOutcome.CONFLICT):
            # Deleted, or bound by someone else: the watch will tell the rest.
            log.info("bind of %s to %s dropped: %s", pod.key, decision.node, result.detail)
            self.queue.forget(pod.key)
            return
        log.warning("bind of %s to %s failed: %s", pod.key, decision.node, result.detail)
        self.metrics.schedule_attempts.labels("error", pod.scheduler_name).inc()
        self.queue.failed(pod.key, frozenset({"DefaultBinder"}), unschedulable=False)
        self._wake.set()
        await self.reporter.failed(pod, f"binding rejected: {result.detail}", reason=SCHEDULER_ERROR)

    def _lock_wait_over(self, entry: QueuedPod) -> None:
        """Another pod held the node's lock all along: this pod is decided again after a
        backoff, without a FailedScheduling (nothing is wrong with it)."""
        self.metrics.bind_failures.labels(BindOutcome.NODE_LOCKED.value).inc()
        self.queue.failed(entry.pod.key, frozenset({"NodeLock"}), unschedulable=False)
        self._wake.set()

    def _record_arrival(self, pod: Pod) -> None:
        """A pod arrived: the trainer's twin draws its workload from these."""
        if self.experience is not None:
            self.experience.append({"kind": "arrival", "t": time.time(), "pod": pod.key, **pod_requests(pod)})

    def _record(self, decision: Decision) -> None:
        """A decision for the trainer: the pod's shape, where it went, the runners-up."""
        if self.experience is None:
            return
        pod = decision.pod
        active = self.policy.profile_for(pod.scheduler_name) or self.policy.active
        self.experience.append(
            {
                "kind": "decision",
                "t": time.time(),
                "pod": pod.key,
                **pod_requests(pod),
                "node": decision.node,
                "gpus": list(decision.gpu_indices),
                "feasible": int(decision.feasible.size),
                "top": decision.top_scores(self.cache.state),
                "profile": active.profile.name,
                "version": active.version,
                "source": active.source,
            }
        )

    def observe_cycle(self, decision: Decision, started: float, active: ActiveProfile) -> None:
        elapsed = time.perf_counter() - started
        profile = decision.pod.scheduler_name
        self.metrics.algorithm_duration.observe(elapsed)
        status = "Success" if decision.scheduled else "Unschedulable"
        for point, seconds in decision.timings.items():
            point_status = status if point == "Filter" else "Success"
            self.metrics.extension_point_duration.labels(point, point_status, profile).observe(seconds)
        if "Score" in decision.timings:
            self.metrics.policy_inference.labels(active.profile.name).observe(decision.timings["Score"])

    async def drain(self, timeout_s: float) -> int:
        """Let the binds, events and status writes in flight finish for up to
        ``timeout_s``; cancel the rest. Returns how many were cancelled (their pods stay
        pending, for the next leader)."""
        pending = set(self._binds)
        if pending:
            _done, pending = await asyncio.wait(pending, timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        return len(pending)

    def spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)
