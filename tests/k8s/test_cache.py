"""The scheduler cache fed with watch events (manifests as the API sends them)."""

from typing import Any

import pytest

from scheduler.k8s.scheduling import cache as cache_module
from scheduler.k8s.scheduling.cache import PodChange, SchedulerCache
from tests.builders import make_pod, node_manifest, pod_manifest

ZONE = "topology.kubernetes.io/zone"


def ours(name: str, **kwargs: Any) -> dict[str, Any]:
    return pod_manifest(name, **kwargs)  # builders opt pods in to rl-scheduler


def bound(name: str, node: str, **kwargs: Any) -> dict[str, Any]:
    manifest = pod_manifest(name, **kwargs)
    manifest["spec"]["nodeName"] = node
    manifest["spec"]["schedulerName"] = "default-scheduler"
    return manifest


def cache_with_nodes(*names: str, **kwargs: Any) -> SchedulerCache:
    cache = SchedulerCache("rl-scheduler")
    for name in names:
        cache.on_node("ADDED", node_manifest(name, **kwargs))
    return cache


def test_pending_pods_of_ours_are_queued_others_ignored() -> None:
    cache = cache_with_nodes("n1")
    assert cache.on_pod("ADDED", ours("mine")).change is PodChange.PENDING
    theirs = pod_manifest("theirs")
    theirs["spec"]["schedulerName"] = "default-scheduler"
    assert cache.on_pod("ADDED", theirs).change is PodChange.IGNORED


def test_bound_pods_of_any_scheduler_take_resources_once() -> None:
    cache = cache_with_nodes("n1", cpu="4")
    for _ in range(3):  # ADDED, then status updates
        assert cache.on_pod("MODIFIED", bound("b", "n1", cpu="1")).change is PodChange.BOUND
    assert cache.state.requested[0, 0] == 1000
    event = cache.on_pod("MODIFIED", {**bound("b", "n1", cpu="1"), "status": {"phase": "Succeeded"}})
    assert (event.change, event.frees_resources) == (PodChange.GONE, True)
    assert cache.state.requested[0, 0] == 0


def test_pods_bound_before_their_node_is_known_count_once_it_arrives() -> None:
    cache = SchedulerCache("rl-scheduler")
    cache.on_pod("ADDED", bound("early", "late-node", cpu="2"))
    assert not cache.state.placements
    cache.on_node("ADDED", node_manifest("late-node"))
    assert list(cache.state.placements) == ["default/early"]


def test_assumed_pods_are_confirmed_by_the_watch_or_forgotten() -> None:
    cache = cache_with_nodes("n1", "n2", gpus=2, model="T4")
    pod = make_pod("p", cpu="1", gpus=1, gpu_milli=500)
    cache.assume(pod, "n1", (1,))
    assert cache.state.gpu_free_milli[0, 1] == 500
    manifest = ours("p", cpu="1", gpus=1, gpu_milli=500)
    manifest["spec"]["nodeName"] = "n1"
    assert cache.on_pod("MODIFIED", manifest).change is PodChange.BOUND
    assert not cache.assumed
    assert cache.state.gpu_free_milli[0].tolist()[:2] == [1000, 500]
    other = make_pod("q", cpu="1")
    cache.assume(other, "n2", ())
    cache.forget(other.key)
    assert "default/q" not in cache.state.placements


def test_topology_labels_added_at_bind_relabel_the_assumed_pod_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The API server (PodTopologyLabelsAdmission) copies the node's zone onto the pod it
    # binds: the pod keeps its GPUs and counts once, with the new labels, unparsed.
    cache = cache_with_nodes("n1", gpus=2, model="T4", labels={ZONE: "zone-a"})
    pod = make_pod("p", cpu="1", gpus=1, gpu_milli=500, labels={"app": "web"})
    cache.assume(pod, "n1", (1,))
    monkeypatch.setattr(cache_module, "pod_from_manifest", _no_parsing)
    manifest = ours("p", cpu="1", gpus=1, gpu_milli=500, labels={"app": "web", ZONE: "zone-a"})
    manifest["spec"]["nodeName"] = "n1"
    event = cache.on_pod("MODIFIED", manifest)
    assert event.change is PodChange.BOUND
    assert event.pod is not None
    assert dict(event.pod.labels) == {"app": "web", ZONE: "zone-a"}
    placement = cache.state.placements["default/p"]
    assert (placement.pod, placement.gpu_indices) == (event.pod, (1,))
    assert cache.state.pods_on_node[0]["default/p"] is event.pod
    assert cache.state.requested[0, 0] == 1000
    assert cache.state.gpu_free_milli[0].tolist()[:2] == [1000, 500]
    assert not cache.assumed


def _no_parsing(manifest: Any) -> Any:
    raise AssertionError(f"parsed {manifest['metadata']['name']} again")


def test_stale_pending_views_of_assumed_pods_do_not_queue_them_again() -> None:
    # Bound by us, but a late watch event (or a listing) still shows the pod pending:
    # queueing it would schedule it a second time.
    cache = cache_with_nodes("n1")
    manifest = ours("p", cpu="1")
    manifest["metadata"]["uid"] = "uid-1"
    pod = cache.on_pod("ADDED", manifest).pod
    assert pod is not None
    cache.assume(pod, "n1", ())
    assert cache.on_pod("MODIFIED", manifest).change is PodChange.IGNORED
    # Recreated under the same name: a new pod, queued.
    manifest["metadata"]["uid"] = "uid-2"
    assert cache.on_pod("ADDED", manifest).change is PodChange.PENDING
    # The bind failed: the pod is pending again.
    manifest["metadata"]["uid"] = "uid-1"
    cache.forget(pod.key)
    assert cache.on_pod("MODIFIED", manifest).change is PodChange.PENDING


def test_a_pending_pod_is_parsed_once_per_resource_version() -> None:
    cache = cache_with_nodes("n1")
    manifest = ours("p", cpu="1")
    manifest["metadata"]["resourceVersion"] = "7"
    first = cache.on_pod("ADDED", manifest).pod
    assert cache.on_pod("ADDED", manifest).pod is first  # a listing repeats it
    changed = ours("p", cpu="2")
    changed["metadata"]["resourceVersion"] = "8"
    second = cache.on_pod("MODIFIED", changed).pod
    assert second is not None
    assert second is not first
    assert second.requests["cpu"] == 2000
    cache.on_pod("DELETED", changed)
    assert not cache._pending  # nothing kept for pods that left


def test_whole_gpus_bound_on_a_node_without_hami_take_the_freest() -> None:
    cache = cache_with_nodes("n1", gpus=4, model="T4", hami=False)
    cache.on_pod("ADDED", bound("a", "n1", gpus=1))
    cache.on_pod("ADDED", bound("b", "n1", gpus=2))
    assert cache.state.gpu_free_milli[0, :4].tolist() == [0, 0, 0, 1000]
    assert cache.state.requested[0, cache.state.column("nvidia.com/gpu")] == 3


def test_heartbeats_do_not_count_as_cluster_changes() -> None:
    cache = cache_with_nodes("n1")
    heartbeat = node_manifest("n1")
    heartbeat["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "now"}]
    before = cache.state.nodes[0]
    assert cache.on_node("MODIFIED", heartbeat) is None
    change = cache.on_node("MODIFIED", node_manifest("n1", cpu="8"))
    assert change is not None
    assert change.before is before
    assert change.after.allocatable["cpu"] == 8000
    assert cache.on_node("DELETED", node_manifest("n1")) is None
    assert len(cache.state) == 0


def test_bad_pods_of_ours_are_reported_not_queued() -> None:
    cache = cache_with_nodes("n1")
    event = cache.on_pod("ADDED", ours("bad", gpus=1, gpu_cores=150))
    assert event.change is PodChange.INVALID
    assert (
        "pod default/bad: spec.containers[0].resources.nvidia.com/gpucores: must be a percentage in 0..100, "
        "got 150" in str(event.error)
    )


def test_resync_drops_what_the_listing_no_longer_has() -> None:
    now = [0.0]
    cache = SchedulerCache("rl-scheduler", clock=lambda: now[0])
    for name in ("n1", "n2"):
        cache.on_node("ADDED", node_manifest(name))
    cache.on_pod("ADDED", bound("kept", "n1", cpu="1"))
    cache.on_pod("ADDED", bound("vanished", "n1", cpu="1"))
    now[0] = 10.0
    cache.on_pod("ADDED", bound("newer", "n2", cpu="1"))  # created after the listing began
    released = cache.resync(pods={"default/kept"}, nodes={"n1"}, listed_at=5.0)
    assert released == ["default/vanished"]
    assert sorted(cache.state.placements) == ["default/kept"]  # newer went with n2
    assert cache.state.node_names == ["n1"]


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        pytest.param(
            {"start_time": "2026-01-02T03:04:05Z"},
            (1767323045.0, False, False),
            id="started: its start time (preemption's tie-break)",
        ),
        pytest.param(
            {"deletion_timestamp": "2026-01-02T03:04:05Z", "preempted_by_scheduler": True},
            (None, True, True),
            id="a preemption's victim being deleted",
        ),
        pytest.param({}, (None, False, False), id="unchanged"),
    ],
)
def test_a_placed_pods_lifecycle_follows_the_watch(update: dict[str, Any], expected: tuple[Any, ...]) -> None:
    cache = cache_with_nodes("n1", cpu="4")
    cache.on_pod("ADDED", bound("b", "n1", cpu="1"))
    event = cache.on_pod("MODIFIED", bound("b", "n1", cpu="1", **update))
    placed = cache.state.placements["default/b"].pod
    assert event.pod is placed
    assert (placed.start_time, placed.terminating, placed.preempted_by_scheduler) == expected
    assert cache.state.requested[0, 0] == 1000  # counted once, as before


@pytest.mark.parametrize(
    ("scheduler", "status", "nominated"),
    [
        pytest.param("rl-scheduler", {"nominatedNodeName": "n1"}, {"default/p": "n1"}, id="ours, nominated"),
        pytest.param(
            "default-scheduler", {"nominatedNodeName": "n1"}, {"default/p": "n1"}, id="kube's, nominated"
        ),
        pytest.param("default-scheduler", {}, {}, id="kube's, not nominated"),
    ],
)
def test_nominated_pods_of_any_scheduler_are_remembered_until_bound(
    scheduler: str, status: dict[str, Any], nominated: dict[str, str]
) -> None:
    cache = cache_with_nodes("n1")
    manifest = pod_manifest("p", cpu="1")
    manifest["spec"]["schedulerName"] = scheduler
    manifest["status"] = status
    cache.on_pod("ADDED", manifest)
    assert {k: p.nominated_node_name for k, p in cache.nominated.items()} == nominated
    cache.on_pod("MODIFIED", {**manifest, "spec": {**manifest["spec"], "nodeName": "n1"}})
    assert cache.nominated == {}


def refused(name: str, scheduler: str = "rl-scheduler", reason: str = "OutOfcpu") -> dict[str, Any]:
    manifest = bound(name, "n1", cpu="1")
    manifest["spec"]["schedulerName"] = scheduler
    manifest["status"] = {
        "phase": "Failed",
        "reason": reason,
        "message": "Pod was rejected: Node didn't have enough resource: cpu",
    }
    return manifest


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (refused("ours"), "OutOfcpu"),
        (refused("ours", reason="OutOfnvidia.com/gpu"), "OutOfnvidia.com/gpu"),
        (refused("theirs", scheduler="default-scheduler"), ""),  # kube-scheduler's to report
        (refused("evicted", reason="Evicted"), ""),  # not an admission refusal
    ],
    ids=["ours", "ours, extended resource", "another scheduler's", "evicted"],
)
def test_a_pod_of_ours_refused_by_the_kubelet_is_reported_once(
    manifest: dict[str, Any], expected: str
) -> None:
    cache = cache_with_nodes("n1")
    placed = dict(manifest, status={"phase": "Running"})
    cache.on_pod("ADDED", placed)
    assert cache.on_pod("MODIFIED", manifest).rejected_by_node == expected
    assert cache.on_pod("MODIFIED", manifest).rejected_by_node == ""  # once
    cache.on_pod("DELETED", manifest)
    assert cache.on_pod("ADDED", manifest).rejected_by_node == expected  # a new pod of that name


@pytest.mark.parametrize(
    ("cpu_after", "requested", "retries_waiting"),
    [
        pytest.param("1", 1000, False, id="status written, resources the same"),
        pytest.param("500m", 500, True, id="resized down"),
        pytest.param("3", 3000, True, id="resized up"),
    ],
)
def test_a_pod_resized_in_place_is_counted_anew(
    monkeypatch: pytest.MonkeyPatch, cpu_after: str, requested: int, retries_waiting: bool
) -> None:
    # pods/resize changes a bound pod's containers' resources: what it holds on its node
    # follows (kube's NodeResourcesFit counts the spec's requests), and the pods waiting
    # for room are told (AssignedPodUpdate); other updates take the cheap path, unparsed
    cache = cache_with_nodes("n1", cpu="4")
    assert cache.on_pod("ADDED", bound("b", "n1", cpu="1")).change is PodChange.BOUND
    if not retries_waiting:
        monkeypatch.setattr(cache_module, "pod_from_manifest", _no_parsing)
    event = cache.on_pod("MODIFIED", bound("b", "n1", cpu=cpu_after))
    assert (event.change, event.frees_resources) == (PodChange.BOUND, retries_waiting)
    assert cache.state.requested[0, 0] == requested
    assert list(cache.state.placements) == ["default/b"]
