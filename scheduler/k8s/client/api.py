"""The only place that talks to the Kubernetes API for writes: binds, events, pod
status, leases, patches. Every call waits on a token bucket with the configured QPS
and burst (events and the Lease have buckets of their own, as kube-scheduler's event
and leader-election clients do). Writes go as plain JSON over the HTTP/1.1 transport
on the event loop (``scheduler.k8s.client.transport``); the Lease over a connection of
its own, so a renewal never waits for a connection behind a backlog of binds. Reads
and listings go by path (``scheduler.k8s.client.reads``) in a thread pool.

The official client is the credential loader and the auth-header hook only; no
generated API class or model is made here (importing them took 0.85 s of each start,
and each write was written twice, once as a model)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from functools import cached_property, partial
from typing import Any, TypeVar
from urllib.parse import quote

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.errors import SchedulerInputError
from scheduler.k8s.client import reads
from scheduler.k8s.client.blocking import BlockingClient, Stream
from scheduler.k8s.client.credentials import load_client_config
from scheduler.k8s.client.first_listing import FirstListing
from scheduler.k8s.client.ratelimit import TokenBucket
from scheduler.k8s.client.reads import JSON, WORKER_PREFIX, parse_json, raise_for_status, request_headers
from scheduler.k8s.client.route import configured_route
from scheduler.k8s.client.transport import ApiTransport
from scheduler.k8s.process.settings import ClientSettings
from scheduler.objects.pod import Pod

log = logging.getLogger(__name__)
T = TypeVar("T")
# kube-scheduler truncates event notes to the API's limit.
NOTE_LIMIT = 1024
MERGE_PATCH = "application/merge-patch+json"
# Connections of the Lease's own transport: one call at a time (renew, or release).
LEASE_CONNECTIONS = 1


class BindOutcome(Enum):
    BOUND = "bound"
    POD_GONE = "pod-gone"  # deleted before we bound it
    CONFLICT = "conflict"  # already bound, or a new pod with the same name (UID differs)
    ERROR = "error"  # anything else; worth retrying after a backoff
    # HAMi's node lock stayed with another pod too long: decided again, nothing wrong.
    NODE_LOCKED = "node-locked"


@dataclass(frozen=True)
class BindResult:
    outcome: BindOutcome
    detail: str = ""


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def micro_time(moment: dt.datetime) -> str:
    """A MicroTime as the API writes it: UTC, microseconds, ``Z``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def segment(name: str) -> str:
    """A name as one segment of a URL path."""
    return quote(name, safe="")


def pod_path(pod: Pod, subresource: str = "") -> str:
    return named_pod_path(pod.namespace, pod.name, subresource)


def named_pod_path(namespace: str, name: str, subresource: str = "") -> str:
    path = f"/api/v1/namespaces/{segment(namespace)}/pods/{segment(name)}"
    return f"{path}/{subresource}" if subresource else path


def object_reference(pod: Pod) -> dict[str, str]:
    reference = {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name}
    if pod.uid:
        reference["uid"] = pod.uid
    return reference


def truncate_note(message: str) -> str:
    return message if len(message) <= NOTE_LIMIT else message[: NOTE_LIMIT - 4] + " ..."


class KubeApi:
    def __init__(
        self,
        settings: ClientSettings,
        scheduler_name: str,
        identity: str,
        first_listing: FirstListing | None = None,
        configuration: client.Configuration | None = None,
    ) -> None:
        """``first_listing``: listings already in flight (``rl-scheduler run`` starts
        them before it imports the rest); ``configuration``: the client's, when the
        caller has loaded it already (else it is loaded from ``settings``)."""
        self.scheduler_name = scheduler_name
        self.identity = identity
        self.first_listing = first_listing
        # (connect, read) of every call through the official client but watches: a
        # server that accepts and never answers must fail the call, not hang it.
        self.timeout = (settings.connect_timeout_s, settings.read_timeout_s)
        self.configuration = configuration if configuration is not None else load_client_config(settings)
        try:  # before the official client makes its pool (a SOCKS proxy needs PySocks there)
            configured_route(self.configuration)
        except ValueError as error:
            raise SchedulerInputError("the client's kubeconfig", "proxy-url", str(error)) from None
        self.api_client = client.ApiClient(self.configuration)
        self.limiter = TokenBucket(settings.qps, settings.burst)
        self.event_limiter = TokenBucket(settings.qps, settings.burst)
        # The Lease has a bucket of its own too (kube-scheduler gives leader election a
        # client of its own): behind a backlog of binds, a renewal missed its deadline
        # and the release at SIGTERM waited seconds.
        self.lease_limiter = TokenBucket(settings.qps, settings.burst)
        self.executor = ThreadPoolExecutor(settings.workers, thread_name_prefix=WORKER_PREFIX)
        self.transport = ApiTransport(self.api_client, settings.connections)
        # Reads, listings and watches, from worker threads and the watches' threads.
        self.blocking = BlockingClient(self.configuration, self.api_client, settings.workers + 4)

    @cached_property
    def lease_transport(self) -> ApiTransport:
        """The Lease's connection (kube-scheduler gives leader election a client of its
        own), made on first use: a scheduler without leader election has none."""
        return ApiTransport(self.api_client, LEASE_CONNECTIONS)

    def stream(
        self,
        path: str,
        query: Mapping[str, str] | None = None,
        timeout: tuple[float, float] | None = None,
    ) -> Stream:
        """``reads.watch_stream`` with this client (blocking: for a watch's thread)."""
        return reads.watch_stream(self.blocking, path, query or {}, timeout or self.timeout)

    async def get_json(self, path: str) -> dict[str, Any]:
        """``reads.get_json`` in a worker thread (limited by the main bucket)."""
        return await self.call(reads.get_json, self.blocking, path, self.timeout)

    async def call(
        self, function: Callable[..., T], *args: Any, limiter: TokenBucket | None = None, **kwargs: Any
    ) -> T:
        await (limiter or self.limiter).acquire()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, partial(function, *args, **kwargs))

    async def list_items(self, path: str) -> list[dict[str, Any]]:
        """The items of a collection (``/api/v1/nodes``) as plain JSON objects."""
        items, _version = await self.list_with_version(path)
        return items

    async def list_with_version(self, path: str) -> tuple[list[dict[str, Any]], str]:
        """``list_items`` and the listing's resourceVersion (where a watch starts). The
        first listing of a path may already be in flight (``first_listing``): its answer
        is taken once; if it failed, the path is listed again here."""
        early = self.first_listing.take(path) if self.first_listing is not None else None
        if early is not None:
            try:
                return await asyncio.wrap_future(early)
            except Exception as error:  # listed again below; failures there are retried and logged
                log.debug("the early listing of %s failed: %s", path, error)
        return await self.call(reads.get_listing, self.blocking, path, self.timeout)

    async def _write(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any],
        *,
        limiter: TokenBucket | None = None,
        content_type: str = JSON,
    ) -> None:
        """One write per scheduled pod (bind, event, status) through the HTTP/1.1
        transport. The answer is dropped; a non-2xx answer raises ``ApiException``."""
        await (limiter or self.limiter).acquire()
        await self.transport.request(method, path, body, content_type)

    async def request_json(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = JSON,
        limiter: TokenBucket | None = None,
        timeout_s: float | None = None,
        transport: ApiTransport | None = None,
    ) -> Any:
        """``method`` on ``path`` (with its query) with ``body`` as JSON, over
        ``transport`` (the writes' by default); the answer parsed. A non-2xx answer
        raises ``ApiException`` with its status, reason and body; ``timeout_s`` bounds
        the whole call (``TimeoutError``), the transport's own limits otherwise."""
        await (limiter or self.limiter).acquire()
        chosen = transport or self.transport
        payload = b"" if body is None else json.dumps(body).encode()
        headers = request_headers(self.api_client, method, path, content_type if body is not None else None)
        asked = chosen.pool.request(method, path, headers, payload)
        answer = await (asked if timeout_s is None else asyncio.wait_for(asked, timeout_s))
        raise_for_status(answer)
        return parse_json(answer.body) if answer.body else None

    async def close(self) -> None:
        await self.transport.close()
        if "lease_transport" in self.__dict__:  # made (cached_property)
            await self.lease_transport.close()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.blocking.close()
        self.api_client.close()  # type: ignore[no-untyped-call]

    # ---- binding --------------------------------------------------------------

    async def bind(
        self,
        pod: Pod,
        node: str,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> BindResult:
        """POST pods/binding with the pod's UID as precondition. ``annotations`` and
        ``labels`` go on the Binding: the API server adds them to the pod as it binds
        it (labels since Kubernetes 1.33; an older one drops them)."""
        metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace}
        if pod.uid:
            metadata["uid"] = pod.uid
        if annotations:
            metadata["annotations"] = dict(annotations)
        if labels:
            metadata["labels"] = dict(labels)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            await self._write("POST", pod_path(pod, "binding"), body)
            return BindResult(BindOutcome.BOUND)
        except ApiException as error:
            detail = _reason(error)
            if error.status == 404:
                return BindResult(BindOutcome.POD_GONE, detail)
            if error.status == 409:
                return BindResult(BindOutcome.CONFLICT, detail)
            return BindResult(BindOutcome.ERROR, detail)
        except Exception as error:
            # The request may or may not have reached the API server: ask the pod.
            return await self._bind_outcome_after(pod, node, f"{type(error).__name__}: {error}")

    async def _bind_outcome_after(self, pod: Pod, node: str, problem: str) -> BindResult:
        try:
            current = await self.get_json(pod_path(pod))
        except ApiException as error:
            if error.status == 404:
                return BindResult(BindOutcome.POD_GONE, problem)
            return BindResult(BindOutcome.ERROR, problem)
        except Exception:
            return BindResult(BindOutcome.ERROR, problem)
        bound_to = (current.get("spec") or {}).get("nodeName")
        uid = (current.get("metadata") or {}).get("uid")
        if pod.uid and uid != pod.uid:
            return BindResult(BindOutcome.CONFLICT, f"{problem}; the pod was replaced")
        if bound_to == node:
            return BindResult(BindOutcome.BOUND)
        if bound_to:
            return BindResult(BindOutcome.CONFLICT, f"{problem}; bound to {bound_to} meanwhile")
        return BindResult(BindOutcome.ERROR, problem)

    # ---- HAMi's protocol (scheduler.k8s.scheduling.hami) ------------------------------------

    async def read_node(self, name: str) -> dict[str, Any]:
        """The node as JSON (raises ``ApiException``)."""
        return await self.get_json(f"/api/v1/nodes/{segment(name)}")

    async def patch_node_annotation(
        self, name: str, key: str, value: str | None, resource_version: str
    ) -> bool:
        """Set (or, with None, remove) one annotation of a node if the node is still at
        ``resource_version``; False when it has changed since (409). Raises otherwise."""
        patch = {"metadata": {"annotations": {key: value}, "resourceVersion": resource_version}}
        try:
            await self._write("PATCH", f"/api/v1/nodes/{segment(name)}", patch, content_type=MERGE_PATCH)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    async def pod_exists(self, namespace: str, name: str) -> bool:
        """Whether the pod exists (raises on anything but an answer)."""
        try:
            await self.get_json(named_pod_path(namespace, name))
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    # ---- reporting ------------------------------------------------------------

    async def post_event(
        self, pod: Pod, *, type_: str, reason: str, action: str, note: str, related: Pod | None = None
    ) -> None:
        """An ``events.k8s.io/v1`` Event about ``pod`` (and ``related``, as kube's
        ``Preempted`` event names the preemptor); never raises."""
        event: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # Named as client-go's recorder names events: <object>.<unix nanoseconds in hex>.
            "metadata": {"name": f"{pod.name}.{time.time_ns():x}", "namespace": pod.namespace},
            "eventTime": micro_time(now()),
            "reportingController": self.scheduler_name,
            "reportingInstance": self.identity,
            "action": action,
            "reason": reason,
            "type": type_,
            "note": truncate_note(note),
            "regarding": object_reference(pod),
        }
        if related is not None:
            event["related"] = object_reference(related)
        try:
            await self._write(
                "POST",
                f"/apis/events.k8s.io/v1/namespaces/{segment(pod.namespace)}/events",
                event,
                limiter=self.event_limiter,
            )
        except ApiException as error:
            log.info("event for pod %s not posted: %s", pod.key, _reason(error))
        except Exception as error:  # reporting never takes the scheduler down
            log.info("event for pod %s not posted: %s: %s", pod.key, type(error).__name__, error)

    async def set_pod_scheduled_condition(
        self, pod: Pod, *, reason: str, message: str, nominated_node: str | None = None
    ) -> None:
        """``PodScheduled=False`` with ``reason`` (Unschedulable or SchedulerError), and
        ``status.nominatedNodeName`` in the same patch when ``nominated_node`` is given
        (kube-scheduler's ``updatePod`` writes both at once; "" clears it)."""
        status: dict[str, Any] = {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": now().strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ]
        }
        if nominated_node is not None:
            status["nominatedNodeName"] = nominated_node or None
        await self.patch_pod_status(pod, status, "condition")

    async def patch_pod_status(self, pod: Pod, status: Mapping[str, Any], what: str) -> bool:
        """Strategic merge patch of the pod's status; False (logged, naming ``what``)
        when it was not written. A pod that is gone is not worth a line."""
        patch = {"status": dict(status)}
        try:
            await self._write(
                "PATCH",
                pod_path(pod, "status"),
                patch,
                content_type="application/strategic-merge-patch+json",
            )
        except ApiException as error:
            if error.status != 404:
                log.info("%s of pod %s not set: %s", what, pod.key, _reason(error))
            return False
        except Exception as error:
            log.info("%s of pod %s not set: %s: %s", what, pod.key, type(error).__name__, error)
            return False
        return True

    # ---- preemption (scheduler.k8s.scheduling.preemptor) -------------------------------------

    async def delete_pod(self, pod: Pod) -> bool:
        """Delete the pod with its default grace period, only if it is still the pod
        with this UID (a pod recreated under the name is not a victim). True when
        deleted or already gone; False (logged) otherwise."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if pod.uid:
            body["preconditions"] = {"uid": pod.uid}
        try:
            await self._write("DELETE", pod_path(pod), body)
        except ApiException as error:
            if error.status == 404:
                return True
            log.warning("preemption victim %s not deleted: %s", pod.key, _reason(error))
            return False
        except Exception as error:
            log.warning("preemption victim %s not deleted: %s: %s", pod.key, type(error).__name__, error)
            return False
        return True


def _reason(error: ApiException) -> str:
    return f"{error.status} {error.reason}: {(error.body or '')[:300]!s}"
