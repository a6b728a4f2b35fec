"""``SchedulerRuntime`` on its own: watch events in, one scheduling cycle, the binding
cycle's plugin points, and what each outcome leaves in the queue, the cache, the
metrics and the pod's events. The API is a recording stand-in (this is the runtime's
logic; the cluster tier runs the same paths against a real API server)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.k8s.client.api import BindOutcome, BindResult
from scheduler.k8s.process.settings import load_settings
from scheduler.k8s.scheduling.binding_cycle import BindingCycle, BindingPlugins, PreBindError
from scheduler.k8s.scheduling.dra_events import DRA_KINDS
from scheduler.k8s.scheduling.policy import PolicyManager, TypicalWorkload
from scheduler.k8s.scheduling.queue import QueueName
from scheduler.k8s.scheduling.runtime import SchedulerRuntime
from scheduler.k8s.scheduling.volume_events import VOLUME_KINDS
from scheduler.k8s.serving.metrics import Metrics
from scheduler.objects.pod import Pod
from scheduler.objects.pod_group import POD_GROUP_LABEL
from tests.builders import node_manifest, pod_manifest
from tests.dra.builders import claim_manifest, device, exactly, slice_manifest


@dataclass
class RecordingApi:
    """What the runtime writes, and the bind's answer (``BOUND`` unless told)."""

    answer: BindResult = field(default_factory=lambda: BindResult(BindOutcome.BOUND))
    binds: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # pod, reason, note
    conditions: list[tuple[str, str, str]] = field(default_factory=list)  # pod, reason, message

    async def bind(self, pod: Pod, node: str, annotations: Any = None, labels: Any = None) -> BindResult:  # noqa: ARG002
        self.binds.append((pod.key, node))
        return self.answer

    async def post_event(
        self,
        pod: Pod,
        *,
        type_: str,  # noqa: ARG002
        reason: str,
        action: str,  # noqa: ARG002
        note: str,
        related: Any = None,  # noqa: ARG002
    ) -> None:
        self.events.append((pod.key, reason, note))

    async def set_pod_scheduled_condition(
        self,
        pod: Pod,
        *,
        reason: str,
        message: str,
        nominated_node: str | None = None,  # noqa: ARG002
    ) -> None:
        self.conditions.append((pod.key, reason, message))

    def reasons(self, key: str) -> list[str]:
        return [reason for pod, reason, _ in self.events if pod == key]


def runtime_with(
    api: RecordingApi, *nodes: dict[str, Any], profile: str = "fgd-reserve", **settings_fields: Any
) -> SchedulerRuntime:
    settings = load_settings(profile=profile, **settings_fields)
    metrics = Metrics()
    policy = PolicyManager(settings, metrics, TypicalWorkload("default", 0))
    runtime = SchedulerRuntime(settings, api, metrics, policy)  # type: ignore[arg-type]
    for node in nodes:
        runtime.on_node_event("ADDED", node)
    return runtime


def run(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(body())


async def settle(runtime: SchedulerRuntime) -> None:
    """Every task the runtime spawned, and those they spawned, done."""
    while runtime._binds:
        await runtime.drain(5.0)


async def one_cycle(runtime: SchedulerRuntime, manifest: dict[str, Any]) -> str:
    runtime.on_pod_event("ADDED", manifest)
    entry = runtime.queue.pop()
    assert entry is not None
    runtime.schedule_one(entry)
    await settle(runtime)
    return entry.pod.key


def bind_failures(runtime: SchedulerRuntime) -> dict[str, float]:
    samples = runtime.metrics.bind_failures.collect()[0].samples
    return {s.labels["outcome"]: s.value for s in samples if s.name.endswith("_total")}


def test_a_pod_that_fits_is_bound_and_reported() -> None:
    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        key = await one_cycle(runtime, pod_manifest("p", cpu="1"))
        assert api.binds == [(key, "n1")]
        assert api.reasons(key) == ["Scheduled"]
        assert key not in runtime.queue
        assert runtime.cache.state.placements[key].node == "n1"

    run(body)


def test_a_pod_that_fits_nowhere_gets_kubes_message_and_waits() -> None:
    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        key = await one_cycle(runtime, pod_manifest("big", cpu="8"))
        assert api.binds == []
        assert api.reasons(key) == ["FailedScheduling"]
        assert "0/1 nodes are available: 1 Insufficient cpu." in api.events[0][2]
        assert api.conditions[0][1] == "Unschedulable"
        assert key in runtime.queue
        assert key not in runtime.cache.state.placements

    run(body)


@pytest.mark.parametrize(
    ("outcome", "requeued", "reasons", "failure"),
    [
        # kube-scheduler: a bind error is a SchedulerError, the pod is decided again.
        (BindOutcome.ERROR, True, ["FailedScheduling"], "error"),
        # Deleted or bound by someone else: the watch tells the rest, nothing reported.
        (BindOutcome.POD_GONE, False, [], "pod-gone"),
        (BindOutcome.CONFLICT, False, [], "conflict"),
    ],
)
def test_a_failed_bind_gives_the_node_back(
    outcome: BindOutcome, requeued: bool, reasons: list[str], failure: str
) -> None:
    async def body() -> None:
        api = RecordingApi(answer=BindResult(outcome, "told so"))
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        key = await one_cycle(runtime, pod_manifest("p", cpu="1"))
        assert key not in runtime.cache.state.placements
        assert runtime.cache.state.requested[0, 0] == 0
        assert (key in runtime.queue) is requeued
        assert api.reasons(key) == reasons
        assert bind_failures(runtime) == {failure: 1.0}

    run(body)


@dataclass
class Step:
    """A plugin at every binding point that writes down what it is asked."""

    name: str
    log: list[str]
    pre_bind_error: str = ""
    answer: BindResult | None = None

    def reserve(self, cycle: BindingCycle) -> None:
        cycle.held[self.name] = cycle.node
        self.log.append(f"reserve {self.name}")

    def unreserve(self, cycle: BindingCycle) -> None:
        assert cycle.held.pop(self.name) == cycle.node
        self.log.append(f"unreserve {self.name}")

    async def pre_bind(self, cycle: BindingCycle) -> None:  # noqa: ARG002
        self.log.append(f"preBind {self.name}")
        if self.pre_bind_error:
            raise PreBindError(self.name, "step", self.pre_bind_error)

    async def bind(self, cycle: BindingCycle) -> BindResult | None:  # noqa: ARG002
        self.log.append(f"bind {self.name}")
        return self.answer


def stepped(runtime: SchedulerRuntime, first: Step, second: Step) -> None:
    runtime.binding = BindingPlugins((first, second), (first, second), (first, second))


@pytest.mark.parametrize(
    ("first", "second", "expected_log", "bound", "reasons"),
    [
        # The first binder that does not skip binds; the rest are not asked.
        (
            {"answer": None},
            {"answer": BindResult(BindOutcome.BOUND)},
            ["reserve a", "reserve b", "preBind a", "preBind b", "bind a", "bind b"],
            True,
            ["Scheduled"],
        ),
        (
            {"answer": BindResult(BindOutcome.BOUND)},
            {"answer": BindResult(BindOutcome.ERROR)},
            ["reserve a", "reserve b", "preBind a", "preBind b", "bind a"],
            True,
            ["Scheduled"],
        ),
        # A PreBind failure stops the cycle; Unreserve runs in reverse order.
        (
            {"pre_bind_error": 'running PreBind plugin "a": no'},
            {"answer": BindResult(BindOutcome.BOUND)},
            ["reserve a", "reserve b", "preBind a", "unreserve b", "unreserve a"],
            False,
            ["FailedScheduling"],
        ),
        # A lock held by another pod: decided again, no event (nothing is wrong with it).
        (
            {"answer": BindResult(BindOutcome.NODE_LOCKED)},
            {"answer": BindResult(BindOutcome.BOUND)},
            ["reserve a", "reserve b", "preBind a", "preBind b", "bind a", "unreserve b", "unreserve a"],
            False,
            [],
        ),
        # Every binder skipped: an error, never a lost pod.
        (
            {"answer": None},
            {"answer": None},
            [
                *["reserve a", "reserve b", "preBind a", "preBind b"],
                "bind a",
                "bind b",
                "unreserve b",
                "unreserve a",
            ],
            False,
            ["FailedScheduling"],
        ),
    ],
)
def test_the_binding_cycles_plugin_points(
    first: dict[str, Any], second: dict[str, Any], expected_log: list[str], bound: bool, reasons: list[str]
) -> None:
    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        log: list[str] = []
        stepped(runtime, Step("a", log, **first), Step("b", log, **second))
        key = await one_cycle(runtime, pod_manifest("p", cpu="1"))
        assert log == expected_log
        assert (key in runtime.cache.state.placements) is bound
        assert (key in runtime.queue) is not bound
        assert api.reasons(key) == reasons

    run(body)


def test_a_bind_that_raises_never_loses_the_pod() -> None:
    class Broken:
        name = "broken"

        async def bind(self, cycle: BindingCycle) -> BindResult | None:  # noqa: ARG002
            raise RuntimeError("bug")

    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        runtime.binding = BindingPlugins((), (), (Broken(),))
        key = await one_cycle(runtime, pod_manifest("p", cpu="1"))
        assert key in runtime.queue
        assert key not in runtime.cache.state.placements
        assert "RuntimeError: bug" in api.events[-1][2]

    run(body)


def test_volume_binding_dynamic_resources_and_hami_are_the_built_in_steps() -> None:
    runtime = runtime_with(RecordingApi())
    names = [
        [plugin.name for plugin in plugins]
        for plugins in (
            runtime.binding.reserve_plugins,
            runtime.binding.pre_bind_plugins,
            runtime.binding.bind_plugins,
        )
    ]
    assert names == [
        ["VolumeBinding", "DynamicResources", "HAMiBinder"],
        ["VolumeBinding", "DynamicResources"],
        ["HAMiBinder", "DefaultBinder"],
    ]


@pytest.mark.parametrize(
    ("plugins", "reasons"),
    [
        # Coscheduling (on by default) waits for the pod's PodGroup, which does not exist.
        ({}, ["FailedScheduling"]),
        # Disabled by name, the pod is placed on its own.
        ({"permit": {"disabled": [{"name": "Coscheduling"}]}}, ["Scheduled"]),
    ],
)
def test_gang_scheduling_is_a_plugin_a_profile_can_disable(
    plugins: dict[str, Any], reasons: list[str]
) -> None:
    async def body() -> None:
        api = RecordingApi()
        profile = {"schedulerName": "rl-scheduler", "preset": "default", "plugins": plugins}
        runtime = runtime_with(api, node_manifest("n1", cpu="4"), profiles=[profile])
        key = await one_cycle(runtime, pod_manifest("member", cpu="1", labels={POD_GROUP_LABEL: "job"}))
        assert api.reasons(key) == reasons
        if reasons == ["FailedScheduling"]:
            assert "PodGroup default/job not found" in api.events[0][2]

    run(body)


@pytest.mark.parametrize(
    ("allocation", "freed"),
    [("written", False), ("given back", True)],
)
def test_a_pod_sharing_a_claim_being_allocated_waits_unreported_until_it_settles(
    allocation: str, freed: bool
) -> None:
    """kube-scheduler fails such a pod in PreFilter ("in the process of being
    allocated") and reports it; ours waits aside until the write is answered, then is
    tried at once. Only a given-back allocation (its devices free again) also moves the
    pods that wait for a cluster change."""

    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        claims = next(kind for kind in DRA_KINDS if kind.kind == "resourceclaim")
        runtime.on_dra_event(claims, "ADDED", claim_manifest("shared", exactly("gpu", "gpu", 1)))
        dra = runtime.cache.state.dra
        shared = dra.claim("default/shared")
        assert shared is not None
        dra.assume(shared)  # another pod's allocation of it, being written
        big = await one_cycle(runtime, pod_manifest("big", cpu="8"))
        assert api.reasons(big) == ["FailedScheduling"]
        manifest = pod_manifest("mate")
        manifest["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimName": "shared"}]
        mate = await one_cycle(runtime, manifest)
        assert api.reasons(mate) == []
        assert runtime.queue.sizes()[QueueName.GATED] == 1
        assert runtime.queue.pop() is None
        dra.forget("default/shared")  # the answer (or the give-back) of the write
        runtime._claims_settled(freed)
        entry = runtime.queue.pop()
        assert entry is not None
        assert (entry.pod.key, entry.attempts) == (mate, 1)
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == (0 if freed else 1), allocation

    run(body)


def tried_now(runtime: SchedulerRuntime) -> set[str]:
    """The names of the pods the queue hands out now (active, or backing off with
    nothing else ready)."""
    names = set()
    while (entry := runtime.queue.pop()) is not None:
        names.add(entry.pod.name)
    return names


def versioned_claim(name: str, version: int, *devices: str, finalizer: bool = False) -> dict[str, Any]:
    """A claim at ``version``, allocated ``devices`` (none: pending)."""
    results = [
        {"request": "gpu", "driver": "driver-a.example.com", "pool": "n1", "device": d} for d in devices
    ]
    status = {"allocation": {"devices": {"results": results}}} if devices else None
    manifest = claim_manifest(name, exactly("gpu", "gpu", 1), status=status)
    manifest["metadata"]["resourceVersion"] = str(version)
    if finalizer:
        manifest["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return manifest


@pytest.mark.parametrize(
    ("kind", "event", "manifest", "tried_again"),
    [
        pytest.param("resourceclaim", "ADDED", versioned_claim("mine", 2), {"user"}, id="its claim made"),
        pytest.param("resourceclaim", "ADDED", versioned_claim("other", 2), set(), id="another claim made"),
        pytest.param(
            "resourceclaim",
            "MODIFIED",
            versioned_claim("pending", 2, "gpu-1"),
            set(),
            id="another claim allocated",
        ),
        pytest.param(
            "resourceclaim",
            "MODIFIED",
            versioned_claim("held", 2, "gpu-0", finalizer=True),
            set(),
            id="a claim's metadata only",
        ),
        pytest.param(
            "resourceclaim", "MODIFIED", versioned_claim("held", 2), {"user", "big"}, id="a claim deallocated"
        ),
        pytest.param(
            "resourceclaim",
            "MODIFIED",
            versioned_claim("held", 2, "gpu-1"),
            {"user", "big"},
            id="a claim given other devices",
        ),
        pytest.param(
            "resourceclaim",
            "DELETED",
            versioned_claim("held", 2, "gpu-0"),
            {"user", "big"},
            id="an allocated claim deleted",
        ),
        pytest.param(
            "resourceclaim", "DELETED", versioned_claim("pending", 2), set(), id="a pending claim deleted"
        ),
        pytest.param(
            "resourceslice",
            "ADDED",
            slice_manifest("n1-gpus", [device("gpu-2")], node="n1", pool="n1"),
            {"user", "big"},
            id="a slice added",
        ),
    ],
)
def test_claim_changes_retry_the_pods_they_may_help(
    kind: str, event: str, manifest: dict[str, Any], tried_again: set[str]
) -> None:
    """DynamicResources' hint: a claim made or changed in spec or status retries the pods
    that use it; one whose devices come free, or a slice or class, retries every pod."""

    async def body() -> None:
        runtime = runtime_with(RecordingApi(), node_manifest("n1", cpu="4"))
        claims = next(k for k in DRA_KINDS if k.kind == "resourceclaim")
        runtime.on_dra_event(claims, "ADDED", versioned_claim("held", 1, "gpu-0"))
        runtime.on_dra_event(claims, "ADDED", versioned_claim("pending", 1))
        user = pod_manifest("user")
        user["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimName": "mine"}]
        for pod in (user, pod_manifest("big", cpu="8")):
            await one_cycle(runtime, pod)
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 2
        runtime.on_dra_event(next(k for k in DRA_KINDS if k.kind == kind), event, manifest)
        assert tried_now(runtime) == tried_again

    run(body)


def volume_object(kind: str, name: str) -> dict[str, Any]:
    """A PersistentVolumeClaim (bound to nothing yet) or a StorageClass named ``name``."""
    if kind == "persistentvolumeclaim":
        spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}
    return {
        "metadata": {"name": name},
        "provisioner": "csi.example.com",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


@pytest.mark.parametrize(
    ("kind", "name", "tried_again"),
    [
        pytest.param("persistentvolumeclaim", "data", {"user"}, id="its claim made"),
        pytest.param("persistentvolumeclaim", "other", set(), id="another claim made"),
        pytest.param("storageclass", "fast", {"user", "logs-user"}, id="a storage class made"),
    ],
)
def test_volume_changes_retry_the_pods_they_may_help(kind: str, name: str, tried_again: set[str]) -> None:
    """A claim's change retries only the pods that use the claim; a volume, class or
    CSINode retries every pod a volume rejected."""

    async def body() -> None:
        runtime = runtime_with(RecordingApi(), node_manifest("n1", cpu="4"))
        for pod, claim in (("user", "data"), ("logs-user", "logs")):
            manifest = pod_manifest(pod)
            manifest["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]
            await one_cycle(runtime, manifest)
        await one_cycle(runtime, pod_manifest("big", cpu="8"))
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 3
        volume_kind = next(k for k in VOLUME_KINDS if k.kind == kind)
        runtime.on_volume_event(volume_kind, "ADDED", volume_object(kind, name))
        assert tried_now(runtime) == tried_again

    run(body)


def placed(name: str, node: str, **kwargs: Any) -> dict[str, Any]:
    """Another scheduler's pod on ``node``."""
    manifest = pod_manifest(name, **kwargs)
    manifest["spec"].update(nodeName=node, schedulerName="default-scheduler")
    return manifest


DB_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


@pytest.mark.parametrize(
    ("event", "manifest", "tried_again"),
    [
        pytest.param("ADDED", placed("cache", "n1", labels={"app": "cache"}), False, id="another pod lands"),
        pytest.param("ADDED", placed("db", "n1", labels={"app": "db"}), True, id="the pod it needs lands"),
        # a pod already there gets the label the pending pod's affinity asks for
        pytest.param(
            "MODIFIED", placed("old", "n1", labels={"app": "db"}), True, id="a pod there relabelled"
        ),
    ],
)
def test_a_pod_landing_or_relabelled_retries_the_pods_it_may_help(
    event: str, manifest: dict[str, Any], tried_again: bool
) -> None:
    """kube's queueing hints: a pod waiting for its affinity's pod is tried again when
    that pod lands (not after the 5-minute flush); an unrelated pod leaves it waiting."""

    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        runtime.on_pod_event("ADDED", placed("old", "n1", labels={"app": "old"}))
        key = await one_cycle(runtime, pod_manifest("web", cpu="1", affinity=DB_AFFINITY))
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 1
        runtime.on_pod_event(event, manifest)
        assert (runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 0) is tried_again
        if tried_again:
            runtime.queue.clock = lambda: float("inf")  # its 1 s backoff over
            entry = runtime.queue.pop()
            assert entry is not None
            runtime.schedule_one(entry)
            await settle(runtime)
            assert api.binds == [(key, "n1")]

    run(body)


def test_a_pod_deleted_retries_only_the_pods_its_leaving_may_help() -> None:
    """kube's hints on a pod's deletion: a pod short of room is tried again, one no node's
    labels select keeps waiting (a deletion cannot change that)."""

    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="2"))
        filler = placed("filler", "n1", cpu="2")
        runtime.on_pod_event("ADDED", filler)
        short = await one_cycle(runtime, pod_manifest("short", cpu="1"))
        misplaced = await one_cycle(
            runtime, pod_manifest("misplaced", cpu="1", node_selector={"zone": "nowhere"})
        )
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 2
        runtime.on_pod_event("DELETED", filler)
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 1
        runtime.queue.clock = lambda: time.monotonic() + 20  # backoffs over, not the 5-minute flush
        entry = runtime.queue.pop()
        assert entry is not None
        assert entry.pod.key == short
        assert runtime.queue.pop() is None  # misplaced waits
        assert misplaced in runtime.queue

    run(body)


def test_a_node_change_retries_only_the_pods_it_may_help() -> None:
    """kube's node hints: a node given more CPU retries the pod short of CPU; the pod no
    node's labels select keeps waiting until a node gets its label."""

    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="1"))
        short = await one_cycle(runtime, pod_manifest("short", cpu="2"))
        misplaced = await one_cycle(runtime, pod_manifest("misplaced", cpu="1", node_selector={"zone": "a"}))
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 2
        runtime.on_node_event("MODIFIED", node_manifest("n1", cpu="4"))
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 1
        assert misplaced in runtime.queue
        runtime.on_node_event("MODIFIED", node_manifest("n1", cpu="4", labels={"zone": "a"}))
        assert runtime.queue.sizes()[QueueName.UNSCHEDULABLE] == 0
        runtime.queue.clock = lambda: time.monotonic() + 20  # backoffs over, not the 5-minute flush
        tried = {entry.pod.key for entry in iter(runtime.queue.pop, None)}
        assert tried == {short, misplaced}

    run(body)


@pytest.mark.parametrize(
    ("leads_after_s", "idle_before_leading"),
    [
        pytest.param(0.1, False, id="the lease taken at its first try"),
        pytest.param(0.6, True, id="a lease held by another replica"),
    ],
)
def test_the_start_counts_as_idle_only_past_its_first_try_of_the_lease(
    leads_after_s: float, idle_before_leading: bool
) -> None:
    """What waits for the first idle moment (kopf's import, the certificate) must not
    share the first burst: a replica that takes the lease at its first try is not idle
    before it leads; one that waits longer (another replica holds the lease) is idle
    meanwhile. Either way its pods are bound once it leads, and it is idle after."""

    async def body() -> None:
        api = RecordingApi()
        runtime = runtime_with(api, node_manifest("n1", cpu="4"))
        runtime.first_lease_wait_s = 0.3
        runtime.on_pod_event("ADDED", pod_manifest("p", cpu="1"))
        loop = asyncio.create_task(runtime.run())
        try:
            await asyncio.sleep(leads_after_s)
            assert runtime.first_idle.is_set() is idle_before_leading
            assert api.binds == []
            runtime.leading.set()
            await asyncio.wait_for(runtime.first_idle.wait(), 2.0)
            await settle(runtime)
            assert api.binds == [("default/p", "n1")]
        finally:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop

    run(body)
