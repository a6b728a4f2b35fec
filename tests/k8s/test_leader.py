"""Leader election on a Lease as client-go does it (taking, renewing, giving up at
shutdown as ``ReleaseOnCancel`` does), in plain JSON over the Lease's own transport
and token bucket, never behind the binds'."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any, cast

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.process.leader import LeaderElector, LeaseError
from scheduler.k8s.process.settings import LeaderElectionSettings

PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/rl"


def lease(holder: str | None, transitions: int = 3, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"leaseDurationSeconds": 15, "leaseTransitions": transitions, **spec}
    if holder is not None:
        body["holderIdentity"] = holder
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "rl", "namespace": "kube-system", "resourceVersion": "1"},
        "spec": body,
    }


class FakeLeases:
    """One Lease (None: not there) behind ``KubeApi.request_json``; ``conflicts``
    writes answer 409 first (another candidate, or a renewal of ours, landed between
    the read and the write)."""

    timeout = (5.0, 60.0)

    def __init__(self, stored: dict[str, Any] | None, conflicts: int = 0) -> None:
        # conflicts count creates too (another candidate created the Lease first)
        self.stored = stored
        self.conflicts = conflicts
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.limiter, self.lease_limiter = object(), object()
        self.transport, self.lease_transport = object(), object()
        self.calls: list[tuple[str, str, object, object, float | None]] = []

    async def request_json(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        limiter: object = None,
        transport: object = None,
        timeout_s: float | None = None,
    ) -> Any:
        self.calls.append((method, path, limiter, transport, timeout_s))
        if method == "GET":
            if self.stored is None:
                raise ApiException(status=404, reason="Not Found")
            return copy.deepcopy(self.stored)
        assert body is not None
        if self.conflicts:
            self.conflicts -= 1
            raise ApiException(status=409, reason="Conflict")
        self.writes.append((method, copy.deepcopy(dict(body))))
        self.stored = copy.deepcopy(dict(body))
        return self.stored


def elector(
    leases: FakeLeases, leading: bool = False, clock: list[float] | None = None
) -> tuple[LeaderElector, list[bool]]:
    changes: list[bool] = []
    moment = clock if clock is not None else [0.0]
    chosen = LeaderElector(
        cast(KubeApi, leases),
        "rl",
        LeaderElectionSettings(),
        "me",
        clock=lambda: moment[0],
        on_change=changes.append,
    )
    if leading:
        chosen.leading.set()
    return chosen, changes


def test_every_lease_call_takes_the_leases_bucket_transport_and_deadline() -> None:
    leases = FakeLeases(lease("me"))
    leader, _ = elector(leases)
    assert asyncio.run(leader.try_acquire_or_renew())
    assert leases.calls == [
        ("GET", PATH, leases.lease_limiter, leases.lease_transport, 10.0),  # the renew deadline
        ("PUT", PATH, leases.lease_limiter, leases.lease_transport, 10.0),
    ]


# Each row: the Lease as read (None: none yet), what the candidate "me" decides, and
# the spec it writes (holder, leaseDurationSeconds, leaseTransitions).
ACQUIRE_CASES = [
    pytest.param(None, True, ("POST", "me", 15, 0), id="no-lease-is-created"),
    pytest.param(lease("me"), True, ("PUT", "me", 15, 3), id="ours-is-renewed"),
    pytest.param(lease("other"), False, None, id="anothers-live-lease-is-left"),
    pytest.param(lease(""), True, ("PUT", "me", 15, 3), id="an-empty-holder-is-taken-without-a-transition"),
    pytest.param(lease(None, transitions=0), True, ("PUT", "me", 15, 0), id="no-holder"),
]


@pytest.mark.parametrize(("stored", "taken", "written"), ACQUIRE_CASES)
def test_acquire_or_renew(
    stored: dict[str, Any] | None, taken: bool, written: tuple[str, str, int, int] | None
) -> None:
    leases = FakeLeases(stored)
    leader, _ = elector(leases)
    assert asyncio.run(leader.try_acquire_or_renew()) is taken
    if written is None:
        assert leases.writes == []
        return
    [(method, body)] = leases.writes
    spec = body["spec"]
    assert (method, spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == written
    assert len(spec["renewTime"]) == len("2026-01-02T03:04:05.000000Z")  # a MicroTime, as client-go writes
    assert spec["renewTime"].endswith("Z")
    if method == "PUT":
        assert body["metadata"]["resourceVersion"] == "1"  # the write is conditional


def test_a_lease_not_renewed_for_its_duration_is_taken_with_one_more_transition() -> None:
    """Measured on the candidate's clock from when it last saw the record change."""
    clock = [100.0]
    leases = FakeLeases(lease("other", renewTime="2026-01-01T00:00:00.000000Z"))
    leader, _ = elector(leases, clock=clock)
    assert not asyncio.run(leader.try_acquire_or_renew())
    clock[0] = 114.0
    assert not asyncio.run(leader.try_acquire_or_renew())  # seen unchanged for 14 s < 15 s
    clock[0] = 115.5
    assert asyncio.run(leader.try_acquire_or_renew())
    [(_, body)] = leases.writes
    assert (body["spec"]["holderIdentity"], body["spec"]["leaseTransitions"]) == ("me", 4)
    assert body["spec"]["acquireTime"] == body["spec"]["renewTime"]


def test_a_renewal_by_the_holder_restarts_the_wait() -> None:
    clock = [0.0]
    leases = FakeLeases(lease("other", renewTime="2026-01-01T00:00:00.000000Z"))
    leader, _ = elector(leases, clock=clock)
    assert not asyncio.run(leader.try_acquire_or_renew())
    clock[0] = 14.0
    assert leases.stored is not None
    leases.stored["spec"]["renewTime"] = "2026-01-01T00:00:14.000000Z"
    assert not asyncio.run(leader.try_acquire_or_renew())
    clock[0] = 20.0  # 20 s after the first look, 6 s after the renewal
    assert not asyncio.run(leader.try_acquire_or_renew())
    assert leases.writes == []


@pytest.mark.parametrize("stored", [lease("me"), None], ids=["replace", "create"])
def test_a_write_that_loses_the_race_is_not_leadership(stored: dict[str, Any] | None) -> None:
    leases = FakeLeases(stored, conflicts=1)
    leader, _ = elector(leases)
    assert not asyncio.run(leader.try_acquire_or_renew())
    assert leases.writes == []


def test_fields_the_election_does_not_know_survive_a_renewal() -> None:
    stored = lease("me", preferredHolder="me", strategy="OldestEmulationVersion")
    stored["metadata"]["labels"] = {"team": "a"}
    leases = FakeLeases(stored)
    leader, _ = elector(leases)
    assert asyncio.run(leader.try_acquire_or_renew())
    [(_, body)] = leases.writes
    assert body["spec"]["preferredHolder"] == "me"
    assert body["spec"]["strategy"] == "OldestEmulationVersion"
    assert body["metadata"]["labels"] == {"team": "a"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"holderIdentity": 7}, "spec.holderIdentity", id="holder-not-a-string"),
        pytest.param({"leaseDurationSeconds": "15"}, "spec.leaseDurationSeconds", id="duration-a-string"),
        pytest.param({"leaseDurationSeconds": True}, "spec.leaseDurationSeconds", id="duration-a-bool"),
        pytest.param({"leaseTransitions": 1.5}, "spec.leaseTransitions", id="transitions-a-float"),
        pytest.param({"renewTime": 0}, "spec.renewTime", id="renew-time-a-number"),
        pytest.param([], "spec is not an object", id="spec-a-list"),
    ],
)
def test_a_lease_off_the_schema_is_refused_naming_the_field(spec: Any, field: str) -> None:
    stored = lease("me")
    stored["spec"] = spec
    leases = FakeLeases(stored)
    leader, _ = elector(leases)
    with pytest.raises(LeaseError, match=rf"Lease kube-system/rl: .*{field}".replace(".", r"\.")):
        asyncio.run(leader.try_acquire_or_renew())
    assert leases.writes == []


def test_release_empties_the_holder_and_shortens_the_lease_to_1_s() -> None:
    leases = FakeLeases(lease("me"))
    leader, changes = elector(leases, leading=True)
    assert asyncio.run(leader.release())
    [(method, body)] = leases.writes
    spec = body["spec"]
    assert method == "PUT"
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("", 1, 3)
    assert spec["renewTime"] == spec["acquireTime"] is not None
    assert changes == [False]
    assert not leader.is_leader
    assert {call[2] for call in leases.calls} == {leases.lease_limiter}  # never behind the binds' bucket


def test_release_retries_a_write_that_lost_to_our_own_renewal() -> None:
    leases = FakeLeases(lease("me"), conflicts=1)
    leader, _ = elector(leases, leading=True)
    assert asyncio.run(leader.release())
    assert [body["spec"]["holderIdentity"] for _, body in leases.writes] == [""]


def test_release_leaves_a_lease_someone_else_holds() -> None:
    leases = FakeLeases(lease("other"))
    leader, _ = elector(leases, leading=True)
    assert not asyncio.run(leader.release())
    assert leases.writes == []
