"""Giving the Lease up at shutdown, as client-go's ``ReleaseOnCancel`` does, and Lease
calls that never queue behind binds."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.process.leader import LeaderElector
from scheduler.k8s.process.settings import LeaderElectionSettings


class FakeCoordination:
    """One Lease; ``conflicts`` replaces answer 409 first (a renewal of ours landed
    between the release's read and its write)."""

    def __init__(self, holder: str, conflicts: int = 0) -> None:
        self.lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name="rl", namespace="kube-system", resource_version="1"),
            spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=15, lease_transitions=3),
        )
        self.conflicts = conflicts
        self.writes: list[client.V1LeaseSpec] = []

    def read_namespaced_lease(self, *_: Any, **__: Any) -> client.V1Lease:
        return copy.deepcopy(self.lease)

    def replace_namespaced_lease(self, _name: str, _namespace: str, body: client.V1Lease, **_: Any) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise ApiException(status=409, reason="Conflict")
        self.writes.append(body.spec)
        self.lease = body


class FakeApi:
    timeout = (5.0, 60.0)

    def __init__(self, coordination: FakeCoordination) -> None:
        self.coordination = coordination
        self.limiter, self.lease_limiter = object(), object()
        self.limiters: list[object] = []

    async def call(
        self, function: Callable[..., Any], *args: Any, limiter: object = None, **kwargs: Any
    ) -> Any:
        self.limiters.append(limiter)
        assert kwargs["_request_timeout"] == (5.0, 10.0)  # the read bounded by the renew deadline
        return function(*args, **kwargs)


def elector(coordination: FakeCoordination) -> tuple[LeaderElector, FakeApi, list[bool]]:
    api = FakeApi(coordination)
    changes: list[bool] = []
    chosen = LeaderElector(cast(KubeApi, api), "rl", LeaderElectionSettings(), "me", on_change=changes.append)
    chosen.leading.set()
    return chosen, api, changes


def test_release_empties_the_holder_and_shortens_the_lease_to_1_s() -> None:
    coordination = FakeCoordination("me")
    leader, api, changes = elector(coordination)
    assert asyncio.run(leader.release())
    [spec] = coordination.writes
    assert (spec.holder_identity, spec.lease_duration_seconds, spec.lease_transitions) == ("", 1, 3)
    assert spec.renew_time == spec.acquire_time is not None
    assert changes == [False]
    assert not leader.is_leader
    assert set(api.limiters) == {api.lease_limiter}  # never behind the binds' bucket


def test_release_retries_a_write_that_lost_to_our_own_renewal() -> None:
    coordination = FakeCoordination("me", conflicts=1)
    leader, _, _ = elector(coordination)
    assert asyncio.run(leader.release())
    assert [w.holder_identity for w in coordination.writes] == [""]


def test_release_leaves_a_lease_someone_else_holds() -> None:
    coordination = FakeCoordination("other")
    leader, _, _ = elector(coordination)
    assert not asyncio.run(leader.release())
    assert coordination.writes == []
