"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does
it for kube-scheduler: lease 15 s, renew deadline 10 s, retry every 2 s.

A candidate takes the Lease when it has not seen the holder renew it for a lease
duration (measured on its own clock, from when it last saw the record change, so
clock skew between machines does not matter). The leader renews every retry period
and steps down if it could not renew for the renew deadline. Writes use the Lease's
resourceVersion, so two candidates can never both win.

The Lease is plain JSON over ``KubeApi``'s transport for leases (a connection and a
token bucket of its own); a replace sends back the object as read, with its spec
changed, so fields this module does not know survive.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import KubeApi, micro_time, now, segment
from scheduler.k8s.process.settings import LeaderElectionSettings

log = logging.getLogger(__name__)
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class LeaseError(ValueError):
    """A Lease whose spec is not what the API's schema allows (names the field)."""


def lease_spec(lease: Any, where: str) -> dict[str, Any]:
    """The spec of a Lease as read, checked field by field against the schema for the
    fields the election reads; a copy to change and write back."""
    if not isinstance(lease, Mapping):
        raise LeaseError(f"Lease {where}: the answer is not an object")
    spec = lease.get("spec")
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise LeaseError(f"Lease {where}: spec is not an object")
    for field, kind in (
        ("holderIdentity", str),
        ("leaseDurationSeconds", int),
        ("leaseTransitions", int),
        ("renewTime", str),
        ("acquireTime", str),
    ):
        value = spec.get(field)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise LeaseError(f"Lease {where}: spec.{field} is not a {kind.__name__}: {value!r}")
    return dict(spec)


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        name: str,
        settings: LeaderElectionSettings,
        identity: str,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.api = api
        self.name = name
        self.namespace = settings.namespace
        self.settings = settings
        self.identity = identity
        self.clock = clock
        self.on_change = on_change
        self.leading = asyncio.Event()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0
        # A Lease call that hangs must not outlast the renew deadline (client-go bounds
        # each renewal by it too).
        self.timeout_s = min(api.timeout[1], settings.renew_deadline_s)
        self.collection = LEASES.format(namespace=segment(self.namespace))
        self.path = f"{self.collection}/{segment(name)}"
        self.where = f"{self.namespace}/{name}"

    async def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        return await self.api.request_json(
            method,
            path,
            body,
            limiter=self.api.lease_limiter,
            timeout_s=self.timeout_s,
            transport=self.api.lease_transport,
        )

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    async def run(self) -> None:
        while True:
            try:
                renewed = await self.try_acquire_or_renew()
            except Exception as error:  # the API is down: keep trying
                log.warning("leader election: %s", error)
                renewed = False
            now_s = self.clock()
            if renewed:
                self._last_renew = now_s
                if not self.is_leader:
                    log.info("became leader of lease %s/%s as %s", self.namespace, self.name, self.identity)
                    self._set(True)
            elif self.is_leader and now_s - self._last_renew > self.settings.renew_deadline_s:
                log.warning(
                    "lost lease %s/%s: not renewed for %.0f s",
                    self.namespace,
                    self.name,
                    now_s - self._last_renew,
                )
                self._set(False)
            await asyncio.sleep(self.settings.retry_period_s)

    def _set(self, leading: bool) -> None:
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        if self.on_change is not None:
            self.on_change(leading)

    async def try_acquire_or_renew(self) -> bool:
        try:
            lease = await self._call("GET", self.path)
        except ApiException as error:
            if error.status != 404:
                raise
            return await self._create()
        spec = lease_spec(lease, self.where)
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds") or self.settings.lease_duration_s
        if holder and holder != self.identity and self.clock() < self._observed_at + duration:
            return False  # someone else holds a live lease
        stamp = micro_time(now())
        if holder != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = (spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = int(self.settings.lease_duration_s)
        spec["renewTime"] = stamp
        try:
            await self._call("PUT", self.path, {**lease, "spec": spec})
        except ApiException as error:
            if error.status == 409:  # someone else wrote it first
                return False
            raise
        return True

    async def _create(self) -> bool:
        stamp = micro_time(now())
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.settings.lease_duration_s),
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        }
        try:
            await self._call("POST", self.collection, lease)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    async def release(self) -> bool:
        """Give the Lease up on a clean shutdown as client-go's ``ReleaseOnCancel``
        does: no holder and a 1 s lease, so a standby takes over at its next retry
        instead of a lease duration later. Only the holder writes; a write that lost
        to our own last renewal (409) is tried again. True when released."""
        if self.is_leader:
            self._set(False)
        for _attempt in range(3):
            try:
                lease = await self._call("GET", self.path)
                spec = lease_spec(lease, self.where)
                if spec.get("holderIdentity") != self.identity:
                    return False
                stamp = micro_time(now())
                spec["holderIdentity"] = ""
                spec["leaseDurationSeconds"] = 1
                spec["acquireTime"] = spec["renewTime"] = stamp
                await self._call("PUT", self.path, {**lease, "spec": spec})
            except ApiException as error:
                if error.status == 409:
                    continue
                log.warning("could not release lease %s/%s: %s", self.namespace, self.name, error.reason)
                return False
            except Exception as error:
                log.warning("could not release lease %s/%s: %s", self.namespace, self.name, error)
                return False
            log.info("released lease %s/%s", self.namespace, self.name)
            return True
        return False
