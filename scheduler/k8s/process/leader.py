"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does
it for kube-scheduler: lease 15 s, renew deadline 10 s, retry every 2 s.

A candidate takes the Lease when it has not seen the holder renew it for a lease
duration (measured on its own clock, from when it last saw the record change, so
clock skew between machines does not matter). The leader renews every retry period
and steps down if it could not renew for the renew deadline. Writes use the Lease's
resourceVersion, so two candidates can never both win.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import KubeApi, now
from scheduler.k8s.process.settings import LeaderElectionSettings

log = logging.getLogger(__name__)
T = TypeVar("T")


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
        self.timeout = (api.timeout[0], min(api.timeout[1], settings.renew_deadline_s))

    async def _call(self, function: Callable[..., T], *args: Any) -> T:
        return await self.api.call(
            function, *args, limiter=self.api.lease_limiter, _request_timeout=self.timeout
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
        coordination = self.api.coordination
        try:
            lease = await self._call(coordination.read_namespaced_lease, self.name, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            return await self._create()
        spec = lease.spec or client.V1LeaseSpec()
        record = (spec.holder_identity, spec.renew_time, spec.lease_transitions)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        holder = spec.holder_identity or ""
        duration = spec.lease_duration_seconds or self.settings.lease_duration_s
        if holder and holder != self.identity and self.clock() < self._observed_at + duration:
            return False  # someone else holds a live lease
        stamp = now()
        if holder != self.identity:
            spec.acquire_time = stamp
            spec.lease_transitions = (spec.lease_transitions or 0) + (1 if holder else 0)
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = int(self.settings.lease_duration_s)
        spec.renew_time = stamp
        lease.spec = spec
        try:
            await self._call(coordination.replace_namespaced_lease, self.name, self.namespace, lease)
        except ApiException as error:
            if error.status == 409:  # someone else wrote it first
                return False
            raise
        return True

    async def _create(self) -> bool:
        stamp = now()
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=int(self.settings.lease_duration_s),
                acquire_time=stamp,
                renew_time=stamp,
                lease_transitions=0,
            ),
        )
        try:
            await self._call(self.api.coordination.create_namespaced_lease, self.namespace, lease)
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
                lease = await self._call(
                    self.api.coordination.read_namespaced_lease, self.name, self.namespace
                )
                spec = lease.spec
                if spec is None or spec.holder_identity != self.identity:
                    return False
                stamp = now()
                spec.holder_identity = ""
                spec.lease_duration_seconds = 1
                spec.acquire_time = spec.renew_time = stamp
                await self._call(
                    self.api.coordination.replace_namespaced_lease, self.name, self.namespace, lease
                )
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
