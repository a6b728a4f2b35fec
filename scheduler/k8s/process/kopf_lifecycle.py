"""kopf around the scheduler: its lifecycle (login, watches that restart, retries) and
the namespaces' watch.

We use only event handlers, which never write to the objects they watch; kopf's
posting of log lines as Kubernetes events is off, and so is its peering (a Lease
elects the replica that binds). kopf starts once the scheduler has first run out of
work (``SchedulerRuntime.first_idle``), not before its first bind: importing it (and
the official client and aiohttp with it) took 0.5-1.0 s of each start, and what it
watches, the namespaces, is in the start's own listing already. Its own listing of
them on start replays each as an event, which changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import kopf

from scheduler.k8s.client.backoff import backoff_delays

if TYPE_CHECKING:
    from kubernetes import client

    from scheduler.k8s.scheduling.runtime import SchedulerRuntime


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


class EndlessBackoff:
    """kopf's delays between retries of a failed API request: 1 s doubling to 30 s,
    without end, as our own listings retry. kopf's default (eight delays, then it
    gives up and the operator stops) ended the process after ~100 s of an
    unreachable API server, before ``startup_timeout_s`` and however soon the server
    would have answered."""

    def __iter__(self) -> Iterator[float]:
        return backoff_delays()


def build_registry(runtime: SchedulerRuntime, configuration: client.Configuration) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.peering.standalone = True
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.networking.request_timeout = 60
        # A server that accepts and never answers (its Service not programmed yet) fails
        # a connection, as it does for our own calls.
        settings.networking.connect_timeout = runtime.settings.client.connect_timeout_s
        settings.networking.error_backoffs = EndlessBackoff()
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

    if runtime.policy.versions is not None:  # policy versions as custom resources
        from scheduler.k8s.scheduling import policy_versions  # noqa: PLC0415

        policy_versions.register(registry, runtime.policy.versions)
    return registry


async def run_kopf(
    registry: kopf.OperatorRegistry, stop_flag: asyncio.Event, loop_signals: Callable[[], None]
) -> None:
    """``kopf.operator`` in its two halves, to take SIGTERM and SIGINT back in between.
    ``spawn_tasks`` installs kopf's own handlers, replacing ours: kopf then stopped on a
    SIGTERM by itself, waited 5 s for every task started after it (ours: the watches,
    the scheduling loop, the elector) and cancelled them, and cancelling a watch
    stalled the event loop until its next event. ``kopf.operator`` does the same
    with ``loop_signals`` left out; kopf stops when ``stop_flag`` is set."""
    existing = asyncio.all_tasks()
    tasks = await kopf.spawn_tasks(registry=registry, clusterwide=True, standalone=True, stop_flag=stop_flag)
    loop_signals()
    await kopf.run_tasks(tasks, ignored=existing)
