"""The scheduling queue: priority then arrival, backoff 1 s doubling to 10 s,
unschedulable pods back on a cluster change or after 5 minutes, gated pods aside."""

from dataclasses import dataclass

import pytest

from scheduler.k8s.scheduling.queue import MAX_IN_FLIGHT_HINTS, QueueName, SchedulingQueue
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from tests.builders import make_pod, pod_manifest


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def queue() -> tuple[SchedulingQueue, Clock]:
    clock = Clock()
    return SchedulingQueue(clock=clock), clock


def keys(q: SchedulingQueue) -> list[str]:
    out = []
    while (entry := q.pop()) is not None:
        out.append(entry.pod.name)
    return out


def test_priority_then_arrival() -> None:
    q, _ = queue()
    for name, priority in (("a", 0), ("b", 10), ("c", 0), ("d", 10)):
        q.add(make_pod(name, priority=priority))
    assert keys(q) == ["b", "d", "a", "c"]


@pytest.mark.parametrize(
    ("failures", "backoff"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)],
    ids=str,
)
def test_backoff_doubles_from_1s_to_10s(failures: int, backoff: float) -> None:
    q, clock = queue()
    q.add(make_pod("p"))
    for _ in range(failures):
        entry = q.pop()
        assert entry is not None
        q.failed(entry.pod.key, frozenset({"X"}), unschedulable=False)
        clock.now += 100  # let it come back
    clock.now -= 100
    assert q.pop() is None
    clock.now += backoff - 0.01
    assert q.pop() is None
    clock.now += 0.02
    assert q.pop() is not None


def test_unschedulable_pods_wait_for_a_cluster_change() -> None:
    q, clock = queue()
    q.add(make_pod("p"))
    entry = q.pop()
    assert entry is not None
    assert (
        q.failed(
            entry.pod.key,
            frozenset({"Insufficient cpu"}),
            unschedulable=True,
            plugins=frozenset({"NodeResourcesFit"}),
        )
        is QueueName.UNSCHEDULABLE
    )
    clock.now += 60
    assert q.pop() is None
    assert q.unschedulable_by_plugin() == {("NodeResourcesFit", "rl-scheduler"): 1}
    assert q.move_all_to_active_or_backoff() == 1
    assert q.pop() is not None  # its 1 s backoff already passed


def test_unschedulable_pods_retry_within_5_minutes() -> None:
    q, clock = queue()
    q.add(make_pod("p"))
    entry = q.pop()
    assert entry is not None
    q.failed(entry.pod.key, frozenset({"X"}), unschedulable=True)
    clock.now += 299
    assert q.pop() is None
    clock.now += 2
    assert q.pop() is not None


def test_a_change_during_the_attempt_means_backoff_not_parking() -> None:
    q, clock = queue()
    q.add(make_pod("p"))
    entry = q.pop()
    assert entry is not None
    q.move_all_to_active_or_backoff()  # a node was added while we were deciding
    assert q.failed(entry.pod.key, frozenset({"X"}), unschedulable=True) is QueueName.BACKOFF
    clock.now += 1.01
    assert q.pop() is not None


def test_forgotten_pods_never_come_back() -> None:
    q, clock = queue()
    q.add(make_pod("flying"))
    flying = q.pop()
    assert flying is not None
    q.add(make_pod("queued"))
    assert q.forget("default/queued")
    assert q.forget(flying.pod.key)
    assert q.failed(flying.pod.key, frozenset(), unschedulable=True) is None
    clock.now += 1000
    assert q.pop() is None
    assert q.sizes() == dict.fromkeys(QueueName, 0)


def test_gated_pods_wait_until_their_gates_go() -> None:
    q, _ = queue()
    manifest = pod_manifest("g")
    manifest["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    assert q.add(pod_from_manifest(manifest)) is QueueName.GATED
    assert q.pop() is None
    assert q.add(make_pod("g")) is QueueName.ACTIVE
    entry = q.pop()
    assert entry is not None
    assert entry.pod.name == "g"


def test_a_pod_waits_aside_until_its_templates_claim_is_created() -> None:
    """kube's DynamicResources PreEnqueue: never tried (so never reported) before the
    resourceclaim controller names the claim in the pod's status."""
    q, _ = queue()
    assert q.add(pod_from_manifest(_with_claim_status(None))) is QueueName.GATED
    assert q.pop() is None
    assert q.add(pod_from_manifest(_with_claim_status("p-gpu-x"))) is QueueName.ACTIVE
    entry = q.pop()
    assert entry is not None
    assert entry.pod.resource_claims == ("p-gpu-x",)


def test_readding_a_known_pod_updates_it_in_place() -> None:
    q, _ = queue()
    q.add(make_pod("p", cpu="1"))
    q.add(make_pod("p", cpu="2"))
    entry = q.pop()
    assert entry is not None
    assert entry.pod.cpu_milli == 2000
    assert q.pop() is None


def _with_claim_status(claim: str | None) -> dict[str, object]:
    """A pod with a template claim; ``claim`` is the claim's name in its status (None:
    the resourceclaim controller has not created it yet)."""
    manifest = pod_manifest("p")
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    if claim is not None:
        manifest["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}
    return manifest


def _relabelled() -> dict[str, object]:
    manifest = pod_manifest("p")
    manifest["metadata"]["labels"] = {"team": "a"}
    return manifest


def _status_only() -> dict[str, object]:
    manifest = pod_manifest("p")
    manifest["status"] = {"conditions": [{"type": "PodScheduled", "status": "False"}]}
    return manifest


# (first version, the update, where an unschedulable pod goes): kube's isPodUpdated,
# which ignores the status except the claims it names.
UPDATES = [
    ("claims named", _with_claim_status("p-gpu-x"), _with_claim_status("p-gpu-y"), QueueName.ACTIVE),
    ("labels", pod_manifest("p"), _relabelled(), QueueName.ACTIVE),
    ("a status condition only", pod_manifest("p"), _status_only(), QueueName.UNSCHEDULABLE),
    ("the same pod again", pod_manifest("p"), pod_manifest("p"), QueueName.UNSCHEDULABLE),
]


@pytest.mark.parametrize(
    ("first", "update", "where"), [row[1:] for row in UPDATES], ids=[row[0] for row in UPDATES]
)
def test_an_update_of_an_unschedulable_pod(
    first: dict[str, object], update: dict[str, object], where: QueueName
) -> None:
    q, clock = queue()
    q.add(pod_from_manifest(first))
    entry = q.pop()
    assert entry is not None
    q.failed(entry.pod.key, frozenset({"DynamicResources"}), unschedulable=True)
    clock.now += 5  # past its 1 s backoff
    assert q.add(pod_from_manifest(update)) is where
    assert (q.pop() is not None) is (where is QueueName.ACTIVE)


@pytest.mark.parametrize(
    ("first", "update", "where"), [row[1:] for row in UPDATES], ids=[row[0] for row in UPDATES]
)
def test_an_update_while_the_pod_is_tried(
    first: dict[str, object], update: dict[str, object], where: QueueName
) -> None:
    """A change that would move an unschedulable pod makes a failure back off instead."""
    q, _ = queue()
    q.add(pod_from_manifest(first))
    entry = q.pop()
    assert entry is not None
    q.add(pod_from_manifest(update))
    expected = QueueName.BACKOFF if where is QueueName.ACTIVE else QueueName.UNSCHEDULABLE
    assert q.failed(entry.pod.key, frozenset({"DynamicResources"}), unschedulable=True) is expected


def test_an_update_of_a_pod_still_backing_off_moves_it_to_backoff() -> None:
    q, clock = queue()
    q.add(make_pod("p", cpu="1"))
    entry = q.pop()
    assert entry is not None
    q.failed(entry.pod.key, frozenset({"NodeResourcesFit"}), unschedulable=True)
    clock.now += 0.5
    assert q.add(make_pod("p", cpu="2")) is QueueName.BACKOFF
    popped = q.pop()  # nothing active: taken from backoff at once (PopFromBackoffQ)
    assert popped is not None
    assert popped.pod.cpu_milli == 2000


# (what the backoff pod's last attempt was, another pod active, what pop hands out
# 0.5 s later, within its 1 s backoff): kube's SchedulerPopFromBackoffQ.
POP_FROM_BACKOFF = [
    ("unschedulable, nothing active", True, False, ["first"]),
    ("unschedulable, another active", True, True, ["second", "first"]),
    ("an error, nothing active", False, False, []),
    ("an error, another active", False, True, ["second"]),
]


@pytest.mark.parametrize(
    ("unschedulable", "another", "handed_out"),
    [row[1:] for row in POP_FROM_BACKOFF],
    ids=[row[0] for row in POP_FROM_BACKOFF],
)
def test_a_backoff_pod_is_tried_early_when_nothing_is_active(
    unschedulable: bool, another: bool, handed_out: list[str]
) -> None:
    q, clock = queue()
    q.add(make_pod("first"))
    entry = q.pop()
    assert entry is not None
    q.move_all_to_active_or_backoff()  # a change while it was tried: it backs off
    assert q.failed(entry.pod.key, frozenset({"X"}), unschedulable=unschedulable) is QueueName.BACKOFF
    if another:
        q.add(make_pod("second"))
    clock.now += 0.5
    assert q.next_ready_in() == (0.0 if handed_out else pytest.approx(0.5))
    assert keys(q) == handed_out


def parked(q: SchedulingQueue, *names: str) -> None:
    """Pop ``names`` and fail each as unschedulable: they wait for a change."""
    for name in names:
        entry = q.pop()
        assert entry is not None
        assert entry.pod.name == name
        q.failed(entry.pod.key, frozenset({"Coscheduling"}), unschedulable=True)


@pytest.mark.parametrize(
    ("setup", "taken", "left"),
    [
        # A gang cycle takes its members from whichever pool they wait in.
        ("active", "default/b", ["a"]),
        ("unschedulable", "default/b", ["a"]),
        ("gated", None, ["a"]),  # a gated member is not ready: not taken
        ("absent", None, ["a", "b"]),
    ],
)
def test_take_hands_out_a_member_from_any_pool(setup: str, taken: str | None, left: list[str]) -> None:
    q, clock = queue()
    q.add(make_pod("a"))
    if setup == "gated":
        gated = pod_manifest("b")
        gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
        q.add(pod_from_manifest(gated))
    elif setup != "absent":
        q.add(make_pod("b"))
    if setup == "unschedulable":
        parked(q, "a", "b")  # both wait for a change; then one comes for a
        q.move_to_active_or_backoff(["default/a"])
        clock.now += 10
    key = "default/b" if setup != "absent" else "default/x"
    entry = q.take(key)
    assert (entry.pod.key if entry else None) == taken
    if entry is not None:
        assert key in q
        assert q.take(key) is None
        q.done(key)
    if setup == "absent":
        q.add(make_pod("b"))
    assert keys(q) == left


def test_move_to_active_or_backoff_moves_only_the_named_unschedulable_pods() -> None:
    q, clock = queue()
    for name in ("a", "b", "c"):
        q.add(make_pod(name))
    parked(q, "a", "b", "c")
    assert q.move_to_active_or_backoff(["default/a", "default/c", "default/none"]) == 2
    clock.now += 1  # the first backoff
    assert keys(q) == ["a", "c"]
    assert q.sizes()[QueueName.UNSCHEDULABLE] == 1


def failed_once() -> tuple[SchedulingQueue, Clock]:
    """A queue whose pod ``p`` was tried once and found no room (NodeResourcesFit)."""
    q, clock = queue()
    q.add(make_pod("p"))
    entry = q.pop()
    assert entry is not None
    q.failed(entry.pod.key, frozenset({"NodeResourcesFit"}), unschedulable=True)
    return q, clock


def happen(what: str, q: SchedulingQueue, clock: Clock) -> None:
    """Something that may reach a pod while its preemption is carried out."""
    if what == "a cluster change":
        q.move_all_to_active_or_backoff()
    elif what == "a named move":
        q.move_to_active_or_backoff(["default/p"])
    elif what == "an update of the pod":
        q.add(make_pod("p", labels={"new": "label"}))
    elif what == "five minutes":
        clock.now += 400


# None of these lets the pod be tried before ``release`` (kube's DefaultPreemption
# PreEnqueue).
@pytest.mark.parametrize(
    "meanwhile", ["nothing", "a cluster change", "a named move", "an update of the pod", "five minutes"]
)
def test_a_preempting_pod_waits_aside_until_released(meanwhile: str) -> None:
    q, clock = failed_once()
    assert q.hold("default/p")
    happen(meanwhile, q, clock)
    clock.now += 20  # past any backoff
    assert q.pop() is None
    assert q.next_ready_in() is None
    assert q.sizes()[QueueName.GATED] == 1
    assert q.release("default/p", retry=True) is QueueName.ACTIVE
    assert keys(q) == ["p"]


@pytest.mark.parametrize(
    ("after_failure_s", "where"),
    [(0.2, QueueName.BACKOFF), (1.5, QueueName.ACTIVE)],
    ids=["within its backoff", "after its backoff"],
)
def test_a_released_pod_comes_back_through_backoff(after_failure_s: float, where: QueueName) -> None:
    q, clock = failed_once()
    q.hold("default/p")
    clock.now += after_failure_s
    assert q.release("default/p", retry=True) is where
    assert q.next_ready_in() == 0.0  # ready now: a backoff pod is tried when nothing is active
    assert q.release("default/p", retry=True) is None  # released once


def test_hold_and_release_of_pods_the_queue_does_not_wait_on() -> None:
    q, _ = queue()
    assert not q.hold("default/absent")
    q.add(make_pod("p"))
    assert q.release("default/p", retry=True) is None  # never held: stays where it is
    flying = q.pop()
    assert flying is not None
    assert not q.hold("default/p")  # handed out: nothing to hold
    q.failed(flying.pod.key, frozenset({"X"}), unschedulable=True)
    assert q.hold("default/p")
    assert q.forget("default/p")  # deleted while held
    assert q.release("default/p", retry=True) is None
    assert q.sizes() == dict.fromkeys(QueueName, 0)


def test_a_released_pod_whose_room_is_not_free_yet_waits_for_a_change() -> None:
    q, clock = failed_once()
    q.hold("default/p")
    clock.now += 20
    assert q.release("default/p", retry=False) is QueueName.UNSCHEDULABLE
    assert q.pop() is None
    assert q.move_all_to_active_or_backoff() == 1  # its victim's deletion
    assert keys(q) == ["p"]


def waiting_for_a_write() -> tuple[SchedulingQueue, Clock]:
    """A queue whose pod ``p`` was handed out and set to wait for write ``w``."""
    q, clock = queue()
    q.add(make_pod("p"))
    entry = q.pop()
    assert entry is not None
    assert q.wait_for(entry.pod.key, "w")
    return q, clock


# A pod waiting for one of this scheduler's own writes is tried again only once that
# write is answered (``resume``), or after 5 minutes if it never is.
@pytest.mark.parametrize("meanwhile", ["nothing", "a cluster change", "a named move", "an update of the pod"])
def test_a_pod_waiting_for_a_write_is_tried_only_when_it_is_answered(meanwhile: str) -> None:
    q, clock = waiting_for_a_write()
    happen(meanwhile, q, clock)
    assert q.pop() is None
    assert q.next_ready_in() is None
    assert q.sizes()[QueueName.GATED] == 1
    assert q.waited_for() == ["w"]
    assert q.resume("other") == 0
    assert q.resume("w") == 1
    assert q.waited_for() == []
    entry = q.pop()
    assert entry is not None
    assert entry.attempts == 1  # the hand-out that waited was not an attempt
    assert q.resume("w") == 0  # resumed once


def test_a_write_never_answered_lets_its_pods_go_after_5_minutes() -> None:
    q, clock = waiting_for_a_write()
    clock.now += 299
    assert q.pop() is None
    clock.now += 2
    assert keys(q) == ["p"]
    assert q.waited_for() == []


@pytest.mark.parametrize(
    ("case", "waits", "resumed", "left"),
    [
        ("queued, not handed out", False, 0, ["p"]),
        ("handed out", True, 1, ["p"]),
        ("deleted while waiting", True, 0, []),
    ],
)
def test_wait_for_and_resume_by_where_the_pod_is(
    case: str, waits: bool, resumed: int, left: list[str]
) -> None:
    q, _ = queue()
    q.add(make_pod("p"))
    if case != "queued, not handed out":
        assert q.pop() is not None
    assert q.wait_for("default/p", "w") is waits
    if case == "deleted while waiting":
        assert q.forget("default/p")
        assert q.waited_for() == []
    assert q.resume("w") == resumed
    assert keys(q) == left


def test_pods_resumed_together_are_tried_in_the_order_they_began_to_wait() -> None:
    q, _ = queue()
    names = ["p3", "p1", "p2", "p0"]
    for name in names:
        q.add(make_pod(name))
    for _ in names:
        entry = q.pop()
        assert entry is not None
        assert q.wait_for(entry.pod.key, "w")
    assert q.resume("w") == len(names)
    assert keys(q) == names


def test_move_helped_moves_only_the_pods_a_hint_names() -> None:
    # kube's queueing hints: an unschedulable pod moves when the hint says the change
    # may help it, given why it was rejected; a pod being tried is asked once it fails,
    # with why it failed, and, if helped, backs off instead of waiting
    clock = Clock()
    q = SchedulingQueue(
        clock=clock, hinted=frozenset({"reason-helped", "reason-not-helped", "reason-moved-before"})
    )
    q.add(make_pod("unhinted"))
    entry = q.pop()
    assert entry is not None
    q.failed(entry.pod.key, frozenset({"Insufficient cpu"}), unschedulable=True)  # no hint looks at it
    for name in ("helped", "not-helped", "moved-before", "tried"):
        q.add(make_pod(name))
    for _ in range(3):
        entry = q.pop()
        assert entry is not None
        q.failed(entry.pod.key, frozenset({f"reason-{entry.pod.name}"}), unschedulable=True)
    q.move_to_active_or_backoff(["default/moved-before"])  # no longer unschedulable
    tried = q.pop()
    assert tried is not None
    assert tried.pod.name == "tried"
    asked: list[tuple[str, frozenset[str] | None]] = []

    def helps(pod: Pod, reasons: frozenset[str] | None) -> bool:
        asked.append((pod.name, reasons))
        return pod.name in ("helped", "tried")

    assert q.move_helped(helps) == 1
    assert sorted(asked, key=lambda a: a[0]) == [
        ("helped", frozenset({"reason-helped"})),
        ("not-helped", frozenset({"reason-not-helped"})),
    ]
    assert q.failed(tried.pod.key, frozenset({"X"}), unschedulable=True) is QueueName.BACKOFF
    assert asked[-1] == ("tried", frozenset({"X"}))
    assert q.sizes()[QueueName.UNSCHEDULABLE] == 2
    clock.now += 10
    assert sorted(keys(q)) == ["helped", "moved-before", "tried"]


def pods_in_every_pool(q: SchedulingQueue, clock: Clock) -> None:
    """One pod in each place a queued pod can be: unschedulable twice (one of them
    parked, moved and parked again), backing off, active, gated, held for its
    preemption, waiting for a write, handed out, and bound."""
    for name in ("parked", "reparked", "backing-off", "held", "waiting", "bound", "tried"):
        q.add(make_pod(name))
    outcomes = {"parked": True, "reparked": True, "backing-off": False, "held": True}
    for _ in range(7):
        entry = q.pop()
        assert entry is not None
        name = entry.pod.name
        if name in outcomes:
            q.failed(entry.pod.key, frozenset({"Insufficient cpu"}), unschedulable=outcomes[name])
        elif name == "waiting":
            q.wait_for(entry.pod.key, "default/claim")
        elif name == "bound":
            q.done(entry.pod.key)
        else:
            assert name == "tried"
            break
    assert q.hold("default/held")
    assert q.move_to_active_or_backoff(["default/reparked"]) == 1
    assert q.take("default/reparked") is not None
    q.failed("default/reparked", frozenset({"Insufficient cpu"}), unschedulable=True)
    q.add(make_pod("active"))
    gated = pod_manifest("gated")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    assert q.add(pod_from_manifest(gated)) is QueueName.GATED
    q.forget("default/bound")


def test_a_change_that_may_help_any_pod_moves_exactly_the_unschedulable_ones() -> None:
    # read from an index of the unschedulable pods, not from every queued pod (kube's
    # SchedulingWhileGated: 10,000 gated pods read at each of 20,000 deletions)
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    pods_in_every_pool(q, clock)
    asked: list[str] = []

    def helps(pod: Pod, _reasons: frozenset[str] | None) -> bool:
        asked.append(pod.name)
        return pod.name == "parked"

    assert q.move_helped(helps, every=True) == 1
    assert asked == ["parked", "reparked"]
    assert q.sizes()[QueueName.UNSCHEDULABLE] == 1
    assert q.move_all_to_active_or_backoff() == 1
    assert q.sizes()[QueueName.UNSCHEDULABLE] == 0
    asked.clear()
    assert q.move_helped(helps, every=True) == 0
    assert asked == []


@pytest.mark.parametrize(
    ("lifts", "failed_for", "changes", "where"),
    [
        pytest.param(
            {"Insufficient cpu"}, {"Insufficient cpu"}, 1, QueueName.BACKOFF, id="lifted: backs off"
        ),
        pytest.param(
            {"Insufficient cpu"}, {"too many ports"}, 1, QueueName.UNSCHEDULABLE, id="not lifted: waits"
        ),
        pytest.param(set(), {"too many ports"}, 0, QueueName.UNSCHEDULABLE, id="no change: waits"),
        # more changes during one attempt than are kept: backs off whatever they were
        pytest.param(set(), {"too many ports"}, MAX_IN_FLIGHT_HINTS + 1, QueueName.BACKOFF, id="a flood"),
    ],
)
def test_changes_while_a_pod_is_tried_are_judged_by_why_it_failed(
    lifts: set[str], failed_for: set[str], changes: int, where: QueueName
) -> None:
    """kube's in-flight events: a change during the attempt sends the failed pod to
    backoff only when its hint lifts one of the reasons the pod failed for."""
    q = SchedulingQueue(clock=Clock())
    q.add(make_pod("p"))
    entry = q.pop()
    assert entry is not None
    for _ in range(changes):
        q.move_helped(lambda _pod, reasons: reasons is None or not reasons.isdisjoint(lifts), every=True)
    assert q.failed(entry.pod.key, frozenset(failed_for), unschedulable=True) is where
