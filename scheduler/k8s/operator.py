"""``rl-scheduler run``: the kopf operator around the scheduler runtime.

kopf gives the process its lifecycle (login, watches that restart, retries) and
watches namespaces. We use only event handlers, which never write to the objects they
watch, and kopf's posting of log lines as Kubernetes events is off. kopf's peering is
off too; a Lease elects the replica that binds. Pods and nodes, the high-rate and the
large kind, come from watches of our own (``scheduler.k8s.watch``), which never write
to them either.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any

import kopf
from kubernetes import client

from scheduler.k8s.api import KubeApi
from scheduler.k8s.http import build_app, serve
from scheduler.k8s.leader import LeaderElector
from scheduler.k8s.metrics import Metrics
from scheduler.k8s.policy import PolicyManager, TypicalWorkload
from scheduler.k8s.runtime import SchedulerRuntime
from scheduler.k8s.settings import Settings
from scheduler.k8s.watch import ResourceWatch

log = logging.getLogger("rl-scheduler")


def _event_type(event: Mapping[str, Any]) -> str:
    # kopf delivers the initial listing with type None.
    return str(event.get("type") or "ADDED")


class NoDiffBase(kopf.DiffBaseStorage):
    """Event handlers compare nothing with a last-handled state, yet kopf builds a diff
    base for every event: a deep copy of the whole body (plus a cleaned copy of it),
    which cost more than our handler itself (about half of kopf's per-event time
    when 1,000 pods are bound at once). An empty essence skips that work."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:  # noqa: ARG002
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:  # noqa: ARG002
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:  # noqa: ARG002
        return None


def build_registry(runtime: SchedulerRuntime, configuration: client.Configuration) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.peering.standalone = True
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.networking.request_timeout = 60
        settings.scanning.disabled = True
        settings.persistence.diffbase_storage = NoDiffBase()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        header = configuration.get_api_key_with_prefix(
            "BearerToken"
        ) or configuration.get_api_key_with_prefix("authorization")
        scheme, _sep, token = (header or "").rpartition(" ")
        return kopf.ConnectionInfo(
            server=configuration.host,
            ca_path=configuration.ssl_ca_cert,
            insecure=not configuration.verify_ssl,
            scheme=scheme or None,
            token=token or None,
            certificate_path=configuration.cert_file,
            private_key_path=configuration.key_file,
        )

    # Async handlers run on the event loop, like the scheduling loop: kopf would run
    # plain functions in worker threads, racing the loop over the cache.
    @kopf.on.event("", "v1", "namespaces", registry=registry)
    async def namespace_event(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
        runtime.on_namespace_event(_event_type(event), body)

    return registry


def identity(settings: Settings) -> str:
    return settings.leader_election.identity or f"{socket.gethostname()}_{uuid.uuid4()}"


async def run(settings: Settings) -> None:
    metrics = Metrics()
    me = identity(settings)
    api = KubeApi(settings.client, settings.scheduler_name, me)
    policy = PolicyManager(
        settings, metrics, TypicalWorkload(settings.typical_pods_trace, settings.typical_pods_window)
    )
    runtime = SchedulerRuntime(settings, api, metrics, policy)
    stop = asyncio.Event()

    def ready() -> tuple[bool, str]:
        if not runtime.synced.is_set():
            return False, "caches not synced"
        return True, f"ok ({policy.active.source}: {policy.active.profile.name})"

    web_runner = await serve(build_app(metrics, ready), settings.metrics_address)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def on_leadership(leading: bool) -> None:
        metrics.is_leader.set(1 if leading else 0)
        if leading:
            runtime.leading.set()
        else:
            runtime.leading.clear()

    async def relist(kind: str) -> str:
        return (await runtime.list_and_apply())[kind]

    watches = {
        "pods": ResourceWatch(
            api, "pod", api.core.list_pod_for_all_namespaces, runtime.on_pod_event, partial(relist, "pods")
        ),
        "nodes": ResourceWatch(
            api, "node", api.core.list_node, runtime.on_node_event, partial(relist, "nodes")
        ),
    }
    elector = LeaderElector(api, settings.lease_name, settings.leader_election, me, on_change=on_leadership)
    tasks: list[asyncio.Task[Any]] = [
        asyncio.create_task(
            kopf.operator(
                registry=build_registry(runtime, api.configuration),
                clusterwide=True,
                standalone=True,
                stop_flag=stop,
            ),
            name="kopf",
        ),
    ]
    try:
        if runtime.experience is not None:
            runtime.experience.start()
        versions = await runtime.list_and_apply()
        tasks += [
            asyncio.create_task(watch.run(versions[kind]), name=f"{watch.kind}-watch")
            for kind, watch in watches.items()
        ]
        log.info(
            "cache synced: %d nodes, %d pods placed",
            len(runtime.cache.state),
            len(runtime.cache.state.placements),
        )
        if settings.leader_election.enabled:
            tasks.append(asyncio.create_task(elector.run(), name="leader-election"))
        else:
            on_leadership(True)
        tasks += [
            asyncio.create_task(runtime.run(), name="scheduling-loop"),
            asyncio.create_task(runtime.refresh_gauges(), name="gauges"),
            asyncio.create_task(policy.watch(), name="policy-reload"),
            asyncio.create_task(runtime.resync_forever(), name="resync"),
        ]
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopper and not task.cancelled() and task.exception() is not None:
                log.error("%s stopped: %s", task.get_name(), task.exception())
                raise task.exception()  # type: ignore[misc]
    finally:
        runtime.leading.clear()
        await elector.release()
        stop.set()
        for task in tasks:
            if task.get_name() != "kopf":
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await web_runner.cleanup()
        if runtime.experience is not None:
            runtime.experience.close()
        await api.close()


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kopf logs every handler run at INFO; keep its chatter at WARNING.
    logging.getLogger("kopf").setLevel(max(logging.WARNING, logging.getLevelName(level)))
    os.environ.setdefault("KOPF_RUN_NO_COLOR", "1")
