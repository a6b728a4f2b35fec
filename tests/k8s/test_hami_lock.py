"""The decision written as HAMi's scheduler writes it: the node lock taken, honoured and
released by HAMi's rules, and the allocation annotation per container."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.k8s.client.api import BindOutcome, BindResult
from scheduler.k8s.scheduling import hami
from scheduler.k8s.scheduling.hami import (
    LockState,
    NodeLocker,
    NodeLocks,
    WatchedLock,
    allocation_text,
    bind_under_lock,
    decision_metadata,
)
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.resources.hami import NODE_LOCK_ANNOTATION
from scheduler.state.cluster_state import GpuUse
from tests.builders import make_pod, pod_manifest

NOW = dt.datetime(2026, 8, 21, 6, 20, 39, tzinfo=dt.UTC)
POD = Pod(name="p", namespace="ns", uid="u")


@dataclass
class FakeApi:
    """A node's annotations and resourceVersion; ``conflicts`` patches answer 409 first
    (the node changed meanwhile)."""

    lock: str | None = None
    pods: set[str] = field(default_factory=set)
    conflicts: int = 0
    version: int = 1
    calls: list[str] = field(default_factory=list)
    bind_outcome: BindOutcome = BindOutcome.BOUND

    async def read_node(self, name: str) -> dict[str, Any]:
        self.calls.append(f"get {name}")
        annotations = {} if self.lock is None else {NODE_LOCK_ANNOTATION: self.lock}
        return {"metadata": {"name": name, "annotations": annotations, "resourceVersion": str(self.version)}}

    async def patch_node_annotation(self, name: str, key: str, value: str | None, version: str) -> bool:
        assert key == NODE_LOCK_ANNOTATION
        self.calls.append(f"patch {name} {value}")
        if self.conflicts:
            self.conflicts -= 1
            self.version += 1
            return False
        if version != str(self.version):  # what the API server answers: 409
            return False
        self.lock = value
        self.version += 1
        return True

    async def pod_exists(self, namespace: str, name: str) -> bool:
        self.calls.append(f"get pod {namespace}/{name}")
        return f"{namespace}/{name}" in self.pods

    async def bind(
        self, pod: Pod, node: str, annotations: dict[str, str], labels: dict[str, str]
    ) -> BindResult:
        self.calls.append(f"bind {pod.key} {node} {sorted(annotations)} {labels}")
        return BindResult(self.bind_outcome)


def locker(api: FakeApi, watched_pods: frozenset[str] = frozenset()) -> NodeLocker:
    return NodeLocker(api, clock=lambda: NOW, known_pod=watched_pods.__contains__)  # type: ignore[arg-type]


OURS = "2026-08-21T06:20:39Z,ns,p"
MINE_BEFORE = "2026-08-21T06:18:00Z,ns,p"
YOUNG = "2026-08-21T06:18:00Z,ns,q"  # 2 min 39 s old
OLD = "2026-08-21T06:15:00Z,ns,q"  # 5 min 39 s old
LEGACY = "2026-08-21T06:18:00Z"


@pytest.mark.parametrize(
    ("api", "state", "lock_after"),
    [
        pytest.param(FakeApi(), LockState.TAKEN, OURS, id="free: taken"),
        pytest.param(FakeApi(lock=MINE_BEFORE), LockState.TAKEN, MINE_BEFORE, id="ours already"),
        pytest.param(FakeApi(lock=YOUNG, pods={"ns/q"}), LockState.HELD, YOUNG, id="another pod's: honoured"),
        pytest.param(FakeApi(lock=YOUNG), LockState.TAKEN, OURS, id="its pod is gone: taken over"),
        pytest.param(
            FakeApi(lock=OLD, pods={"ns/q"}), LockState.TAKEN, OURS, id="older than 5 min: taken over"
        ),
        pytest.param(FakeApi(lock=LEGACY), LockState.HELD, LEGACY, id="legacy lock, young: honoured"),
        pytest.param(
            FakeApi(lock="garbage"), LockState.HELD, "garbage", id="unreadable: honoured, as in HAMi"
        ),
        pytest.param(FakeApi(conflicts=2), LockState.TAKEN, OURS, id="the node changed twice meanwhile"),
        pytest.param(FakeApi(conflicts=9), LockState.HELD, None, id="the node never stops changing"),
    ],
)
def test_the_node_lock_is_taken_by_hamis_rules(
    api: FakeApi, state: LockState, lock_after: str | None
) -> None:
    result = asyncio.run(locker(api).acquire(POD, "n1"))
    assert result.state is state, result.detail
    assert api.lock == lock_after


def test_a_held_lock_says_whose_it_is() -> None:
    api = FakeApi(lock=YOUNG, pods={"ns/q"})
    result = asyncio.run(locker(api).acquire(POD, "n1"))
    assert result.detail == "locked by ns/q since 06:18:00"


@pytest.mark.parametrize(
    ("lock", "after"),
    [
        pytest.param(OURS, None, id="ours: removed"),
        pytest.param(YOUNG, YOUNG, id="another pod's: kept"),
        pytest.param(None, None, id="none"),
    ],
)
def test_only_the_pods_own_lock_is_released(lock: str | None, after: str | None) -> None:
    api = FakeApi(lock=lock)
    asyncio.run(locker(api).release(POD, "n1"))
    assert api.lock == after


def test_waiting_for_a_lock_wakes_when_the_node_watch_shows_it_changed() -> None:
    locks = NodeLocks()
    locks.observe("n1", {NODE_LOCK_ANNOTATION: OURS})

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        loop.call_later(0.05, locks.observe, "n1", {})
        await locks.changed("n1", 5.0)
        return loop.time() - started

    assert asyncio.run(scenario()) < 1.0


def test_the_allocation_names_the_gpus_of_each_container_that_asks() -> None:
    manifest = pod_manifest("p")
    gpu = {"limits": {"nvidia.com/gpu": "1"}}
    manifest["spec"]["initContainers"] = [{"name": "init"}]
    manifest["spec"]["containers"] = [
        {"name": "a"},
        {"name": "b", "resources": gpu},
        {"name": "c", "resources": gpu},
    ]
    pod = pod_from_manifest(manifest)
    usage = (GpuUse(1, 1000, 16384, 1, "GPU-b"), GpuUse(0, 1000, 16384, 1, "GPU-a"))
    assert allocation_text(pod, usage) == ";;GPU-b,NVIDIA,16384,100:;GPU-a,NVIDIA,16384,100:;"


def test_a_share_is_written_in_cores_percent_and_mib() -> None:
    pod = make_pod("p", gpus=1, gpu_milli=300)
    text = allocation_text(pod, (GpuUse(1, 300, 4915, 1, "GPU-n1-1"),))
    assert text == "GPU-n1-1,NVIDIA,4915,30:;"
    annotations, labels = decision_metadata("n1", text, NOW)
    assert annotations == {
        "hami.io/vgpu-node": "n1",
        "hami.io/vgpu-time": "1787293239",
        "hami.io/vgpu-devices-to-allocate": text,
        "hami.io/vgpu-devices-allocated": text,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1787293239",
    }
    assert labels == {"hami.io/vgpu-node": "n1"}


@pytest.mark.parametrize(
    ("api", "outcome", "lock_after", "bound"),
    [
        pytest.param(FakeApi(), BindOutcome.BOUND, OURS, True, id="locked, then bound"),
        pytest.param(
            FakeApi(lock=YOUNG, pods={"ns/q"}), None, YOUNG, False, id="held all along: decided again"
        ),
        pytest.param(
            FakeApi(bind_outcome=BindOutcome.POD_GONE),
            BindOutcome.POD_GONE,
            None,
            True,
            id="pod gone: unlocked",
        ),
        pytest.param(
            FakeApi(bind_outcome=BindOutcome.CONFLICT),
            BindOutcome.CONFLICT,
            None,
            True,
            id="bound by another: unlocked",
        ),
    ],
)
def test_the_pod_is_bound_with_its_decision_under_the_lock(
    api: FakeApi,
    outcome: BindOutcome | None,
    lock_after: str | None,
    bound: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hami, "NODE_LOCK_WAIT_S", 0.3)
    monkeypatch.setattr(hami, "NODE_LOCK_RECHECK_S", 0.1)
    monkeypatch.setattr(hami, "now", lambda: NOW)
    result = asyncio.run(bind_under_lock(locker(api), NodeLocks(), POD, "n1", "GPU-0,NVIDIA,1000,10:;"))
    assert (result.outcome if result else None) is outcome
    assert api.lock == lock_after
    binds = [c for c in api.calls if c.startswith("bind ")]
    annotations, labels = decision_metadata("n1", "", NOW)
    assert binds == ([f"bind ns/p n1 {sorted(annotations)} {labels}"] if bound else [])


@pytest.mark.parametrize("wait_s", [30.0, 0.04], ids=["default wait", "line longer than the wait"])
def test_pods_bound_to_one_node_take_its_lock_one_at_a_time_in_arrival_order(
    wait_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five of our pods for one node: each reads the node only when its turn comes (the
    device plugin releases each lock after its Allocate), not at every release; and the
    wait for a lock counts from the pod's turn, so a line of our own pods longer than
    the wait loses none of them."""
    monkeypatch.setattr(hami, "NODE_LOCK_WAIT_S", wait_s)
    api = FakeApi()
    locks = NodeLocks()
    pods = [Pod(name=f"p{i}", namespace="ns", uid=f"u{i}") for i in range(5)]
    api.pods = {pod.key for pod in pods}
    order: list[str] = []

    async def plugin() -> None:  # releases each lock a moment after it is taken
        while True:
            await asyncio.sleep(0.01)
            if api.lock is not None:  # the node watch shows the lock, then its release
                locks.observe("n1", {NODE_LOCK_ANNOTATION: api.lock})
                order.append(api.lock.rsplit(",", 1)[1])
                api.lock = None
                locks.observe("n1", {})

    async def run() -> None:
        writes = [bind_under_lock(locker(api), locks, pod, "n1", "GPU-0,NVIDIA,1000,10:;") for pod in pods]
        releasing = asyncio.create_task(plugin())
        results = await asyncio.wait_for(asyncio.gather(*writes), 10)
        while api.lock is not None:  # the last pod's Allocate
            await asyncio.sleep(0.01)
        releasing.cancel()
        assert all(result is not None and result.outcome is BindOutcome.BOUND for result in results)

    asyncio.run(run())
    assert order == [pod.name for pod in pods]
    reads = [call for call in api.calls if call == "get n1"]
    # Each pod reads the node once, after its predecessor's release (this watch shows no
    # versions): while a lock it set is held, the scheduler knows without asking. Without
    # turns every waiting pod reads the node at every release, and without ``taken``
    # each later pod reads it while the lock is still held too; either fails this bound.
    assert len(reads) <= len(pods), api.calls


@pytest.mark.parametrize(
    ("api", "watched", "watched_pods", "state", "calls"),
    [
        pytest.param(
            FakeApi(version=7), WatchedLock(None, "7"), set(), LockState.TAKEN,
            [f"patch n1 {OURS}"], id="unlocked, watch current: one write",
        ),
        pytest.param(
            FakeApi(version=8), WatchedLock(None, "7"), set(), LockState.TAKEN,
            [f"patch n1 {OURS}", "get n1", f"patch n1 {OURS}"], id="node changed since: read, then write",
        ),
        pytest.param(
            FakeApi(lock=YOUNG, pods={"ns/q"}, version=8), WatchedLock(None, "7"), set(), LockState.HELD,
            [f"patch n1 {OURS}", "get n1", "get pod ns/q"], id="locked since: honoured",
        ),
        pytest.param(
            FakeApi(lock=YOUNG, pods={"ns/q"}, version=8), WatchedLock(YOUNG, "8"), {"ns/q"}, LockState.HELD,
            [], id="held by a pod the watch knows: no request",
        ),
        pytest.param(
            FakeApi(lock=YOUNG, pods={"ns/q"}, version=8), WatchedLock(YOUNG, "8"), set(), LockState.HELD,
            ["get pod ns/q"], id="held by a pod the watch does not know: asked",
        ),
        pytest.param(
            FakeApi(lock=YOUNG, version=8), WatchedLock(YOUNG, "8"), set(), LockState.TAKEN,
            ["get pod ns/q", f"patch n1 {OURS}"], id="held by a pod that is gone: taken over at once",
        ),
        pytest.param(
            FakeApi(lock=YOUNG, pods={"ns/q"}, version=8), WatchedLock(YOUNG, ""), {"ns/q"}, LockState.HELD,
            [], id="just set by this scheduler, version unknown: held",
        ),
        pytest.param(
            FakeApi(version=8), WatchedLock(OLD, ""), {"ns/q"}, LockState.TAKEN,
            ["get n1", f"patch n1 {OURS}"], id="expired at an unknown version: read, then write",
        ),
    ],
)  # fmt: skip
def test_the_lock_the_watch_shows_is_judged_without_reading_the_node(
    api: FakeApi, watched: WatchedLock, watched_pods: set[str], state: LockState, calls: list[str]
) -> None:
    result = asyncio.run(locker(api, frozenset(watched_pods)).acquire(POD, "n1", watched))
    assert result.state is state, result.detail
    assert api.calls == calls


def test_the_watched_lock_is_the_last_one_known() -> None:
    locks = NodeLocks()
    assert locks.watched("n1") is None  # never seen
    locks.observe("n1", {}, "5")
    assert locks.watched("n1") == WatchedLock(None, "5")
    locks.observe("n1", {NODE_LOCK_ANNOTATION: YOUNG}, "6")
    assert locks.watched("n1") == WatchedLock(YOUNG, "6")
    locks.taken("n1", OURS)  # before the watch shows it: the value, no version
    assert locks.watched("n1") == WatchedLock(OURS, "")
    locks.observe("n1", {}, "")
    assert locks.watched("n1") is None  # unlocked, but at no known version
    locks.observe("n1", {}, "8")
    locks.forget("n1")
    assert locks.watched("n1") is None


def test_a_lock_released_where_the_watch_does_not_show_it_is_found_at_the_recheck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch shows the node locked by a pod it knows; the lock is gone at the API
    server, and the watch stays quiet (stalled): the recheck reads the node."""
    monkeypatch.setattr(hami, "NODE_LOCK_WAIT_S", 1.0)
    monkeypatch.setattr(hami, "NODE_LOCK_RECHECK_S", 0.05)
    monkeypatch.setattr(hami, "now", lambda: NOW)
    api = FakeApi(version=9)  # unlocked at the API server
    locks = NodeLocks()
    locks.observe("n1", {NODE_LOCK_ANNOTATION: YOUNG}, "8")
    result = asyncio.run(
        bind_under_lock(locker(api, frozenset({"ns/q"})), locks, POD, "n1", "GPU-0,NVIDIA,1000,10:;")
    )
    assert result is not None
    assert result.outcome is BindOutcome.BOUND
    assert api.calls[:2] == ["get n1", f"patch n1 {OURS}"]


def test_a_release_the_watch_shows_while_the_lock_is_read_still_wakes_the_pod() -> None:
    """The pod read the lock as held; the release arrived before it began to wait: it must
    not wait for the next change (or the recheck, seconds later)."""
    locks = NodeLocks()
    locks.observe("n1", {NODE_LOCK_ANNOTATION: YOUNG}, "6")

    async def scenario() -> float:
        seen = locks.mark("n1")
        locks.observe("n1", {}, "7")  # during the read
        loop = asyncio.get_running_loop()
        started = loop.time()
        await locks.changed("n1", 5.0, since=seen)
        return loop.time() - started

    assert asyncio.run(scenario()) < 0.5


def test_a_nodes_turns_stay_one_line_while_a_pod_waits_and_are_forgotten_after() -> None:
    """Between a release and its next waiter's wake-up the lock is not "locked": a pod
    arriving then still joins the same line (never a second one beside it)."""
    locks = NodeLocks()
    inside: list[str] = []
    most_inside = 0

    async def hold(name: str, pause_s: float) -> None:
        nonlocal most_inside
        async with locks.turn("n1"):
            inside.append(name)
            most_inside = max(most_inside, len(inside))
            await asyncio.sleep(pause_s)
            inside.remove(name)

    async def run() -> None:
        first = asyncio.create_task(hold("a", 0.01))
        second = asyncio.create_task(hold("b", 0.01))
        await asyncio.sleep(0.011)  # "a" releases about now; "b" has not run yet
        late = asyncio.create_task(hold("c", 0.01))
        await asyncio.gather(first, second, late)

    asyncio.run(run())
    assert most_inside == 1
    assert locks._turns == {}
