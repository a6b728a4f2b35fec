"""``rl-scheduler run``: the operator around the scheduler runtime.

kopf gives the process its lifecycle (login, watches that restart, retries) and
watches namespaces (``scheduler.k8s.process.kopf_lifecycle``); it starts once the scheduler
has first run out of work. Pods and nodes, the high-rate and the large kind, come from
watches of our own (``scheduler.k8s.client.watch``), which never write to them.

Start-up lists the cluster until the API server answers (``scheduler.k8s.process.startup``);
``/readyz`` says when the caches have synced, and ``/healthz`` fails if they have not
within ``startup_timeout_s``. On SIGTERM or SIGINT (the signals are ours, not kopf's)
the process stops taking pods, gives the binds in flight ``BIND_DRAIN_S``, releases
its Lease as client-go's ``ReleaseOnCancel`` does, so that a standby leads at its next
retry, and exits 0 well within 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from scheduler.k8s.client import paths
from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.client.first_listing import FirstListing
from scheduler.k8s.client.reads import WORKER_PREFIX
from scheduler.k8s.client.watch import ResourceWatch
from scheduler.k8s.process.heap import freeze_start_heap
from scheduler.k8s.process.leader import LeaderElector
from scheduler.k8s.process.settings import Settings
from scheduler.k8s.process.startup import sync_until_served
from scheduler.k8s.scheduling import budgets
from scheduler.k8s.scheduling.dra_events import DRA_KINDS
from scheduler.k8s.scheduling.lifetimes import LiveLifetimes
from scheduler.k8s.scheduling.policy import PolicyManager, TypicalWorkload, policy_version_mirror
from scheduler.k8s.scheduling.runtime import SchedulerRuntime
from scheduler.k8s.scheduling.volume_events import VOLUME_KINDS
from scheduler.k8s.serving.delegated_auth import delegated_auth
from scheduler.k8s.serving.gauges import refresh_gauges
from scheduler.k8s.serving.http import StartupDeadline, build_routes
from scheduler.k8s.serving.metrics import Metrics
from scheduler.k8s.serving.serving import serve_securely
from scheduler.objects.pod_group import CORE_GROUP

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("rl-scheduler")


def live_lifetimes(settings: Settings, metrics: Metrics) -> LiveLifetimes:
    """The lifetime model the profiles are told of and start forecasts use, with its
    metrics (``scheduler.k8s.scheduling.lifetimes``)."""
    return LiveLifetimes(
        settings.policy_store,
        on_loaded=partial(lifetime_model_loaded, metrics),
        on_failure=lambda reason: metrics.lifetime_model_load_failures.labels(reason).inc(),
    )


def lifetime_model_loaded(metrics: Metrics, source: str, version: str) -> None:
    """``rl_scheduler_lifetime_model_info``: 1 for the model in use, no other series."""
    metrics.lifetime_model_info.clear()
    metrics.lifetime_model_info.labels(source, version).set(1)


def identity(settings: Settings) -> str:
    return settings.leader_election.identity or f"{socket.gethostname()}_{uuid.uuid4()}"


# Stopping, within the 2 s a SIGTERM should take: binds in flight get BIND_DRAIN_S to
# finish (the rest are dropped; their pods stay pending for the next leader), the Lease
# release RELEASE_TIMEOUT_S, kopf KOPF_STOP_S.
BIND_DRAIN_S = 0.5
RELEASE_TIMEOUT_S = 0.5
KOPF_STOP_S = 0.3
# kopf starts when the scheduler first runs out of work, or this long after its start
# (a queue that never empties).
KOPF_START_LATEST_S = 30.0
# The self-signed serving certificate is made once the scheduler first runs out of work,
# or this long after the start.
SELF_SIGNED_LATEST_S = 2.0


def take_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set ``stop``."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, _on_signal, sig, stop)


def _on_signal(sig: signal.Signals, stop: asyncio.Event) -> None:
    if not stop.is_set():
        log.info("%s received: stopping", sig.name)
    stop.set()


async def run(
    settings: Settings,
    configuration: client.Configuration | None = None,
    early_listing: FirstListing | None = None,
) -> None:
    # configuration: the client's, as ``rl-scheduler run`` loaded it; early_listing:
    # what it started listing before it imported this.
    metrics = Metrics()
    me = identity(settings)
    api = KubeApi(settings.client, settings.scheduler_name, me, early_listing, configuration)
    warming = asyncio.create_task(api.transport.warm(), name="warm-writes")  # while the listings run
    policy = PolicyManager(
        settings,
        metrics,
        TypicalWorkload(settings.typical_pods_trace, settings.typical_pods_window),
        live_lifetimes(settings, metrics),
        # policy versions as custom resources: their channel read before the first profile
        await asyncio.to_thread(policy_version_mirror, settings, api.api_client, metrics)
        if settings.policy_versions.namespace is not None
        else None,
    )
    runtime = SchedulerRuntime(settings, api, metrics, policy)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    take_signals(loop, stop)

    web_server, certificate = await start_serving(runtime)

    def on_leadership(leading: bool) -> None:
        metrics.is_leader.set(1 if leading else 0)
        if leading:
            runtime.leading.set()
        else:
            runtime.leading.clear()

    elector = LeaderElector(api, settings.lease_name, settings.leader_election, me, on_change=on_leadership)
    kopf_stop = asyncio.Event()
    kopf_task = asyncio.create_task(
        run_kopf_when_idle(runtime, kopf_stop, partial(take_signals, loop, stop)), name="kopf"
    )
    stopper = asyncio.create_task(stop.wait(), name="stop")
    first_listing = asyncio.create_task(
        sync_until_served(runtime.list_and_apply, str(api.configuration.host)), name="first-listing"
    )
    tasks: list[asyncio.Task[Any]] = [first_listing, *certificate]
    beside = [kopf_task, *certificate]  # what else stops the process when it ends
    try:
        if runtime.experience is not None:
            runtime.experience.start()
        done, _ = await asyncio.wait([first_listing, stopper, *beside], return_when=asyncio.FIRST_COMPLETED)
        if first_listing in done:
            synced(runtime)
            scheduling = start_scheduling(runtime, first_listing.result(), elector)
            tasks += scheduling
            done, _ = await asyncio.wait([*scheduling, stopper, *beside], return_when=asyncio.FIRST_COMPLETED)
        for task in done - {stopper}:
            if not task.cancelled() and task.exception() is not None:
                log.error("%s stopped: %s", task.get_name(), task.exception())
                raise task.exception()  # type: ignore[misc]
            log.error("%s stopped", task.get_name())
    finally:
        stop.set()
        stopping = time.monotonic()
        dropped = await shut_down(runtime, elector if settings.leader_election.enabled else None, tasks)
        await stop_kopf(kopf_task, kopf_stop)
        for task in (stopper, warming):
            task.cancel()
        web_server.close()
        if runtime.experience is not None:
            runtime.experience.close()
        await api.close()
        log.info(
            "stopped in %.2f s%s",
            time.monotonic() - stopping,
            f" ({dropped} binds or reports in flight dropped)" if dropped else "",
        )


async def start_serving(runtime: SchedulerRuntime) -> tuple[asyncio.Server, list[asyncio.Task[None]]]:
    """The serving port (``/metrics``, ``/healthz``, ``/readyz``), listening; and a task
    that fails if the self-signed certificate, made later, cannot be made."""
    settings, policy = runtime.settings, runtime.policy

    def ready() -> tuple[bool, str]:
        if not runtime.synced.is_set():
            return False, "caches not synced"
        return True, f"ok ({policy.active.source}: {policy.active.profile.name})"

    startup = StartupDeadline(settings.startup_timeout_s, runtime.synced.is_set)
    server, self_signed = await serve_securely(
        build_routes(runtime.metrics, ready, startup.check),
        settings.metrics_address,
        settings.serving,
        delegated_auth(runtime.api.api_client, runtime.api.timeout, settings.serving.always_allow_paths),
        partial(self_signed_due, runtime),
    )
    if self_signed is None:
        return server, []
    return server, [asyncio.create_task(only_failure(self_signed), name="serving-certificate")]


async def self_signed_due(runtime: SchedulerRuntime) -> None:
    """When the self-signed serving certificate is made: once the scheduler first runs
    out of work, so that importing ``cryptography`` does not come before the first bind
    (``scheduler.k8s.serving.serving.serving_certificate``); at the latest
    ``SELF_SIGNED_LATEST_S`` after the start (a queue that does not empty, an API server
    that does not answer: the probes then say why). The port listens from the start; a
    probe that comes before the certificate waits for it."""
    await first_idle_or_after(runtime, SELF_SIGNED_LATEST_S)


async def first_idle_or_after(runtime: SchedulerRuntime, latest_s: float) -> None:
    """Until the scheduler first runs out of work, or ``latest_s`` has passed."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(runtime.first_idle.wait(), latest_s)


async def only_failure(task: asyncio.Task[Any]) -> None:
    """Ends only if ``task`` fails, raising its error: a task that may end without
    stopping the process, watched beside those whose end does."""
    await task
    await asyncio.Event().wait()


def synced(runtime: SchedulerRuntime) -> None:
    """The first listing is applied: keep the start's heap out of later collections."""
    freeze_start_heap()
    state = runtime.cache.state
    log.info("cache synced: %d nodes, %d pods placed", len(state), len(state.placements))


async def run_kopf_when_idle(
    runtime: SchedulerRuntime, kopf_stop: asyncio.Event, loop_signals: Callable[[], None]
) -> None:
    """kopf, once the scheduler first has nothing to do (``scheduler.k8s.process.kopf_lifecycle``).
    It is imported in a thread: the event loop goes on meanwhile."""
    await first_idle_or_after(runtime, KOPF_START_LATEST_S)
    lifecycle = await asyncio.to_thread(importlib.import_module, "scheduler.k8s.process.kopf_lifecycle")
    log.info("kopf starts: namespaces watched (%s)", "idle" if runtime.first_idle.is_set() else "deadline")
    registry = lifecycle.build_registry(runtime, runtime.api.configuration)
    await lifecycle.run_kopf(registry, kopf_stop, loop_signals)


def start_scheduling(
    runtime: SchedulerRuntime, versions: dict[str, str], elector: LeaderElector
) -> list[asyncio.Task[Any]]:
    """What runs once the caches have synced: the watches (from the listing's
    versions), leader election (or leading at once), the scheduling loop, gauges,
    policy reloads and resyncs."""
    api, settings = runtime.api, runtime.settings

    async def relist(kind: str) -> str:
        return (await runtime.list_and_apply())[kind]

    watches = [
        ResourceWatch(api, "pod", paths.PODS, runtime.on_pod_event, partial(relist, "pods")),
        ResourceWatch(api, "node", paths.NODES, runtime.on_node_event, partial(relist, "nodes")),
    ]
    tasks = [asyncio.create_task(w.run(versions[f"{w.kind}s"]), name=f"{w.kind}-watch") for w in watches]
    for kind in VOLUME_KINDS:
        watch = ResourceWatch(
            api,
            kind.kind,
            kind.path,
            partial(runtime.on_volume_event, kind),
            partial(relist, kind.plural),
        )
        tasks.append(asyncio.create_task(watch.run(versions[kind.plural]), name=f"{kind.kind}-watch"))
    for dra_kind in DRA_KINDS:
        watch = ResourceWatch(
            api,
            dra_kind.kind,
            dra_kind.path,
            partial(runtime.on_dra_event, dra_kind),
            partial(relist, dra_kind.plural),
        )
        tasks.append(asyncio.create_task(watch.run(versions[dra_kind.plural]), name=f"{dra_kind.kind}-watch"))
    groups = ResourceWatch(
        api,
        "podgroup",
        paths.POD_GROUPS,
        runtime.on_pod_group_event,
        partial(relist, "podgroups"),
    )
    tasks.append(asyncio.create_task(groups.run(versions["podgroups"]), name="podgroup-watch"))
    core_groups = ResourceWatch(
        api,
        "podgroup",
        paths.CORE_POD_GROUPS,
        partial(runtime.on_pod_group_event, api=CORE_GROUP),
        partial(relist, paths.CORE_POD_GROUPS),
    )
    tasks.append(
        asyncio.create_task(core_groups.run(versions[paths.CORE_POD_GROUPS]), name="core-podgroup-watch")
    )
    # PodDisruptionBudgets, which preemption reads (scheduler.k8s.scheduling.budgets).
    pdbs = ResourceWatch(
        api, budgets.KIND, budgets.PATH, runtime.on_budget_event, partial(relist, budgets.PLURAL)
    )
    tasks.append(asyncio.create_task(pdbs.run(versions[budgets.PLURAL]), name=f"{budgets.KIND}-watch"))
    if settings.leader_election.enabled:
        tasks.append(asyncio.create_task(elector.run(), name="leader-election"))
    elif elector.on_change is not None:
        elector.on_change(True)
    return [
        *tasks,
        asyncio.create_task(runtime.run(), name="scheduling-loop"),
        asyncio.create_task(refresh_gauges(runtime), name="gauges"),
        asyncio.create_task(runtime.policy.watch(), name="policy-reload"),
        asyncio.create_task(runtime.resync_forever(), name="resync"),
        *(
            [asyncio.create_task(runtime.lifetimes.watch(settings.policy_reload_s), name="lifetime-reload")]
            if runtime.lifetimes is not None
            else []
        ),
    ]


async def shut_down(
    runtime: SchedulerRuntime, elector: LeaderElector | None, tasks: list[asyncio.Task[Any]]
) -> int:
    """Stop taking pods; let the binds in flight end (or drop them) within
    ``BIND_DRAIN_S``; give the Lease up; stop the rest. Returns how many binds and
    reports were dropped."""
    by_name = {task.get_name(): task for task in tasks}
    first = [by_name[n] for n in ("first-listing", "scheduling-loop", "leader-election") if n in by_name]
    for task in first:
        task.cancel()
    runtime.leading.clear()
    dropped = await runtime.drain(BIND_DRAIN_S)
    await asyncio.gather(*first, return_exceptions=True)
    if elector is not None and "leader-election" in by_name:  # not before the caches synced
        try:
            await asyncio.wait_for(elector.release(), RELEASE_TIMEOUT_S)
        except TimeoutError:
            log.warning(
                "lease %s/%s not released in %g s", elector.namespace, elector.name, RELEASE_TIMEOUT_S
            )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return dropped


async def stop_kopf(kopf_task: asyncio.Task[None], kopf_stop: asyncio.Event) -> None:
    kopf_stop.set()
    _done, pending = await asyncio.wait([kopf_task], timeout=KOPF_STOP_S)
    for task in pending:
        task.cancel()
    results = await asyncio.gather(kopf_task, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            log.info("kopf stopped: %s", result)


def exit_past_blocked_calls(code: int, wait_s: float = 0.2) -> None:
    """After ``run``: an API worker thread still blocked in a call (it gives up at its
    read timeout) would hold the process at exit, since Python joins executor threads
    then. Everything has been cleaned up, so leave without it: ``os._exit`` once the
    logs are flushed. Returns when no such thread is left."""
    deadline = time.monotonic() + wait_s
    workers = [t for t in threading.enumerate() if t.name.startswith(WORKER_PREFIX)]
    for thread in workers:
        thread.join(max(0.0, deadline - time.monotonic()))
    blocked = [t.name for t in workers if t.is_alive()]
    if not blocked:
        return
    log.info("exiting without waiting for %s (blocked in API calls)", ", ".join(blocked))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kopf logs every handler run at INFO; keep its chatter at WARNING.
    logging.getLogger("kopf").setLevel(max(logging.WARNING, logging.getLevelName(level)))
    os.environ.setdefault("KOPF_RUN_NO_COLOR", "1")
