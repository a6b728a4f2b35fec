"""The live lifetime source (which model, reloads, refusals, ages, what plugins are told)
and the start forecasts the runtime reports: the FailedScheduling suffix, the gauge and
its removal, once per attempt, and ``rl-scheduler pending``."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.cli import main
from scheduler.errors import SchedulerInputError
from scheduler.k8s.process.operator import lifetime_model_loaded
from scheduler.k8s.process.settings import load_settings
from scheduler.k8s.scheduling.lifetimes import LIFETIMES_DIR, LiveLifetimes, choose_model
from scheduler.k8s.scheduling.lifetimes_pending import _items, pending_rows
from scheduler.k8s.scheduling.lifetimes_starts import (
    Predicted,
    StartPredictions,
    duration_text,
    kube_part,
    message_suffix,
    pods_ahead,
)
from scheduler.k8s.scheduling.policy import PolicyManager, TypicalWorkload
from scheduler.k8s.scheduling.runtime import SchedulerRuntime
from scheduler.k8s.serving.metrics import Metrics
from scheduler.lifetimes.forecast import PodLifetimeForecast
from scheduler.lifetimes.model_file import load_lifetime_model, save_lifetime_model
from scheduler.objects.pod import Pod
from scheduler.online.store import PolicyStore
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.remaining_lifetimes import ModelLifetimes, ResidentClock
from tests.builders import make_node, make_pod, make_state, node_manifest, pod_manifest
from tests.k8s.test_runtime import RecordingApi, run, settle

NOW = 1_700_000_000.0


def publish(store: PolicyStore, model_scale: float = 1.0, broken: bool = False) -> str:
    """A version with ``lifetimes/`` (the shipped model, its rates scaled)."""
    shipped = load_lifetime_model()

    def write(folder: Path) -> None:
        (folder / "manifest.json").write_text("{}")  # a policy checkpoint's place; not read here
        scaled = type(shipped)(shipped.edges, shipped.bias + math.log(model_scale), shipped.weights)
        save_lifetime_model(scaled, folder / LIFETIMES_DIR)
        if broken:
            (folder / LIFETIMES_DIR / "model.safetensors").write_bytes(b"not a model")

    return store.publish(write)


def gauge(metrics: Metrics, name: str, labels: dict[str, str]) -> float | None:
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def series(metrics: Metrics, name: str) -> list[dict[str, str]]:
    return [s.labels for f in metrics.registry.collect() for s in f.samples if s.name == name]


def live(store: Path | None, metrics: Metrics | None = None, **options: Any) -> LiveLifetimes:
    metrics = metrics or Metrics()
    return LiveLifetimes(
        store,
        on_loaded=lambda source, version: lifetime_model_loaded(metrics, source, version),
        on_failure=lambda reason: metrics.lifetime_model_load_failures.labels(reason).inc(),
        **options,
    )


# ---- which model ---------------------------------------------------------------


def test_the_shipped_model_without_a_store_and_the_store_s_once_it_has_one(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies")
    assert choose_model(None).source == "shipped"
    assert choose_model(store.root).source == "shipped"  # no folder yet
    store.publish(lambda folder: (folder / "manifest.json").write_text("{}"))
    assert choose_model(store.root).source == "shipped"  # a version without lifetimes/
    version = publish(store)
    chosen = choose_model(store.root)
    assert (chosen.source, chosen.version) == ("store", version)


def test_the_model_info_gauge_follows_reloads(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies")
    metrics = Metrics()
    lifetimes = live(store.root, metrics)
    assert series(metrics, "rl_scheduler_lifetime_model_info") == [
        {"source": "shipped", "version": "openb-default"}
    ]
    assert lifetimes.reload() is False  # nothing new
    first = publish(store)
    assert lifetimes.reload() is True
    assert (lifetimes.source, lifetimes.version) == ("store", first)
    second = publish(store, model_scale=2.0)
    assert lifetimes.reload() is True
    assert series(metrics, "rl_scheduler_lifetime_model_info") == [{"source": "store", "version": second}]
    store.point_current(first)  # a rollback
    lifetimes.reload()
    assert lifetimes.version == first


def test_a_bad_model_file_is_refused_and_the_shipped_one_takes_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = PolicyStore(tmp_path / "policies")
    publish(store, broken=True)
    metrics = Metrics()
    with caplog.at_level(logging.ERROR):
        lifetimes = live(store.root, metrics)
    assert (lifetimes.source, lifetimes.version) == ("shipped", "openb-default")
    assert "refused" in caplog.text
    assert "sha256" in caplog.text
    assert gauge(metrics, "rl_scheduler_lifetime_model_load_failures_total", {"reason": "corrupt"}) == 1
    assert lifetimes.pod_remaining_s(make_pod("x", cpu="1", gpus=1)) is not None


def test_when_no_model_loads_nothing_is_known_and_nothing_crashes(caplog: pytest.LogCaptureFixture) -> None:
    def fails(folder: Path) -> Any:
        raise RuntimeError(f"cannot read {folder}")

    metrics = Metrics()
    with caplog.at_level(logging.ERROR):
        lifetimes = live(None, metrics, load=fails)
    assert lifetimes.source == "none"
    assert lifetimes.model is None
    assert series(metrics, "rl_scheduler_lifetime_model_info") == [{"source": "none", "version": "none"}]
    state = make_state([make_node("n1", gpus=1, hami=False)], [(make_pod("a", gpus=1), "n1")])
    assert lifetimes.pod_remaining_s(make_pod("x")) is None
    assert lifetimes.gpu_free_in_s(state, np.arange(1)) is None
    assert "Traceback" in caplog.text  # an unforeseen failure shows where


def test_the_watch_swaps_the_model_in_without_a_restart(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies")
    lifetimes = live(store.root)
    version = publish(store)

    async def body() -> None:
        watching = asyncio.create_task(lifetimes.watch(0.01))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if lifetimes.source == "store":
                break
        watching.cancel()

    asyncio.run(body())
    assert (lifetimes.source, lifetimes.version) == ("store", version)


# ---- ages and answers ------------------------------------------------------------


def test_ages_come_from_start_time_else_from_the_bind_seen() -> None:
    clock = [NOW]
    lifetimes = live(None, clock=lambda: clock[0])
    started = make_pod("started", start_time="2023-11-14T22:11:40Z")  # NOW - 100 s
    bound = make_pod("bound")
    lifetimes.bound(bound.key, at=NOW - 30)
    new = make_pod("new")
    np.testing.assert_allclose(lifetimes.ages_s([started, bound, new]), [100.0, 30.0, 0.0])
    lifetimes.forget(bound.key)
    assert lifetimes.ages_s([bound])[0] == 0.0


def test_what_plugins_are_told_is_the_model_s_median_at_each_age() -> None:
    lifetimes = live(None, clock=lambda: NOW)
    node = make_node("n1", cpu="32", memory="64Gi", gpus=4, hami=False)
    residents = [make_pod(f"r{i}", cpu="1", gpus=1) for i in range(3)]
    state = make_state([node], [(p, "n1") for p in residents])
    clock = ResidentClock()
    clock.advance(NOW)
    for i, pod in enumerate(residents):
        lifetimes.bound(pod.key, at=NOW - 600 * i)
        clock.started[pod.key] = NOW - 600 * i
    reference = ModelLifetimes.from_forecast(PodLifetimeForecast(load_lifetime_model()), clock)
    nodes = np.arange(1)
    np.testing.assert_allclose(lifetimes.gpu_free_in_s(state, nodes), reference.gpu_free_in_s(state, nodes))
    assert lifetimes.pod_remaining_s(residents[0]) == pytest.approx(
        reference.pod_remaining_s(make_pod("r0", cpu="1", gpus=1))
    )


def test_cost_per_cycle_of_the_lifetime_aware_plugins_question() -> None:
    """``gpu_free_in_s`` over 1,000 8-GPU nodes (8,000 GPU residents), printed with -s."""
    lifetimes = live(None, clock=lambda: NOW)
    nodes = [make_node(f"n{i:04d}", cpu="64", memory="256Gi", gpus=8, hami=False) for i in range(1000)]
    placed = [
        (make_pod(f"r{i:04d}-{g}", cpu="4", gpus=1), f"n{i:04d}") for i in range(1000) for g in range(8)
    ]
    state = make_state(nodes, placed)
    rows = np.arange(1000)
    lifetimes.gpu_free_in_s(state, rows)  # features made once
    started = time.perf_counter()
    lifetimes.gpu_free_in_s(state, rows)
    print(f"gpu_free_in_s, 1,000 nodes, 8,000 GPU residents: {1000 * (time.perf_counter() - started):.1f} ms")


# ---- reporting -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45, "45s"), (720, "12m"), (6000, "1h40m"), (7200, "2h"), (4 * 86400 + 4 * 3600, "4d4h")],
)
def test_durations_read_as_people_write_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_the_suffix_follows_kube_s_message_which_stays_intact() -> None:
    kube = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    suffix = message_suffix(Predicted(NOW, 720.0, 6000.0))
    assert suffix == "; likely to start in 12m (p90 1h40m)"
    assert kube_part(kube + suffix) == kube
    assert message_suffix(Predicted(NOW, 720.0, math.inf)) == "; likely to start in 12m (p90 not in sight)"
    assert message_suffix(Predicted(NOW, math.inf, math.inf)) == ""


def test_pods_ahead_are_higher_priority_then_earlier() -> None:
    mine = make_pod("mine", priority=5)
    queued = [
        (make_pod("later", priority=5), 30.0),
        (mine, 20.0),
        (make_pod("earlier", priority=5), 10.0),
        (make_pod("urgent", priority=9), 40.0),
        (make_pod("low", priority=1), 0.0),
    ]
    assert [p.name for p in pods_ahead(mine, queued)] == ["urgent", "earlier"]
    assert [p.name for p in pods_ahead(mine, queued, limit=1)] == ["urgent"]


def live_runtime(api: RecordingApi, lifetimes: LiveLifetimes, *nodes: dict[str, Any]) -> SchedulerRuntime:
    settings = load_settings(profile="fgd-reserve-lifetime")
    metrics = Metrics()
    policy = PolicyManager(settings, metrics, TypicalWorkload("default", 0), lifetimes)
    runtime = SchedulerRuntime(settings, api, metrics, policy)  # type: ignore[arg-type]
    for node in nodes:
        runtime.on_node_event("ADDED", node)
    return runtime


def resident(name: str, node: str, **fields: Any) -> dict[str, Any]:
    manifest = pod_manifest(
        name, node_name=node, start_time="2023-11-14T21:55:00Z", **fields
    )  # NOW - 1,100 s
    manifest["status"]["phase"] = "Running"
    return manifest


def test_a_pod_that_waits_is_told_when_it_is_likely_to_start_and_the_gauge_goes_with_it() -> None:
    async def body() -> None:
        api = RecordingApi()
        clock = [NOW]
        lifetimes = live(None, clock=lambda: clock[0])
        runtime = live_runtime(api, lifetimes, node_manifest("n1", cpu="8", gpus=2, hami=False))
        assert runtime.starts is not None
        runtime.starts.clock = lambda: clock[0]
        for i in range(2):
            runtime.on_pod_event("ADDED", resident(f"r{i}", "n1", cpu="1", gpus=1))
        runtime.on_pod_event("ADDED", pod_manifest("waits", cpu="1", gpus=1))
        entry = runtime.queue.pop()
        assert entry is not None
        runtime.schedule_one(entry)
        await settle(runtime)
        note = api.events[-1][2]
        # kube's words (with what preemption found: the residents are of the same priority)
        assert kube_part(note).startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. ")
        assert kube_part(note).endswith("No preemption victims found for incoming pod.")
        assert note.startswith(kube_part(note) + "; likely to start in ")
        assert api.conditions[-1][2] == note
        labels = {"namespace": "default", "pod": "waits"}
        p50 = gauge(
            runtime.metrics, "rl_scheduler_pending_pod_predicted_start_seconds", {**labels, "quantile": "0.5"}
        )
        p90 = gauge(
            runtime.metrics, "rl_scheduler_pending_pod_predicted_start_seconds", {**labels, "quantile": "0.9"}
        )
        assert p50 is not None
        assert p90 is not None
        assert 0 < p50 <= p90 < math.inf
        assert gauge(runtime.metrics, "rl_scheduler_start_forecast_duration_seconds_count", {}) == 1

        # Another attempt soon after: the same forecast, aged; no new event (kube's part
        # did not change), no new forecast.
        clock[0] += 5
        runtime.queue.move_all_to_active_or_backoff()
        runtime.queue.clock = lambda: time.monotonic() + 60
        entry = runtime.queue.pop()
        assert entry is not None
        runtime.schedule_one(entry)
        await settle(runtime)
        assert len([e for e in api.events if e[1] == "FailedScheduling"]) == 1
        assert gauge(runtime.metrics, "rl_scheduler_start_forecast_duration_seconds_count", {}) == 1

        # Bound (by the watch): the series go.
        bound = pod_manifest("waits", cpu="1", gpus=1, node_name="n1")
        runtime.on_pod_event("MODIFIED", bound)
        assert series(runtime.metrics, "rl_scheduler_pending_pod_predicted_start_seconds") == []

    run(body)


def test_without_a_lifetime_model_the_message_is_kube_s_alone() -> None:
    async def body() -> None:
        api = RecordingApi()

        def fails(folder: Path) -> Any:
            raise OSError(folder)

        runtime = live_runtime(api, live(None, load=fails), node_manifest("n1", cpu="4"))
        runtime.on_pod_event("ADDED", pod_manifest("big", cpu="8"))
        entry = runtime.queue.pop()
        assert entry is not None
        runtime.schedule_one(entry)
        await settle(runtime)
        assert api.events[-1][2] == (
            "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )

    run(body)


def test_the_gauge_keeps_at_most_its_cap_of_pods() -> None:
    lifetimes = live(None, clock=lambda: NOW)
    metrics = Metrics()
    starts = StartPredictions(lifetimes, metrics, max_series=2, clock=lambda: NOW)
    node = make_node("n1", cpu="2", memory="4Gi")
    state = make_state([node], [(make_pod("a", cpu="2"), "n1")])
    filters = build_profile("default").filters
    for i in range(4):
        assert starts.predict(make_pod(f"w{i}", cpu="1"), state, filters) is not None
    names = {s["pod"] for s in series(metrics, "rl_scheduler_pending_pod_predicted_start_seconds")}
    assert names == {"w0", "w1"}
    starts.forget("default/w0")
    starts.predict(make_pod("w3", cpu="1"), state, filters)
    names = {s["pod"] for s in series(metrics, "rl_scheduler_pending_pod_predicted_start_seconds")}
    assert names == {"w1", "w3"}


def test_the_queue_is_read_only_for_a_forecast_made() -> None:
    """A failed attempt within a minute of the pod's last forecast reports that one and
    does not read the pods ahead (a scan of the whole queue)."""
    clock = [NOW]
    starts = StartPredictions(live(None, clock=lambda: clock[0]), clock=lambda: clock[0])
    node = make_node("n1", cpu="2", memory="4Gi")
    state = make_state([node], [(make_pod("a", cpu="2"), "n1")])
    filters = build_profile("default").filters
    reads: list[int] = []

    def ahead() -> list[Pod]:
        reads.append(1)
        return []

    pod = make_pod("w", cpu="1")
    for seconds, read in ((0.0, 1), (30.0, 1), (61.0, 2)):
        clock[0] = NOW + seconds
        assert starts.predict(pod, state, filters, ahead) is not None
        assert len(reads) == read, seconds


# ---- rl-scheduler pending --------------------------------------------------------


def test_pending_lists_our_pending_pods_with_their_forecast() -> None:
    nodes = [node_manifest("n1", cpu="4", gpus=2, hami=False)]
    pods = [
        resident("r0", "n1", cpu="1", gpus=1),
        resident("r1", "n1", cpu="1", gpus=1),
        {
            **pod_manifest("first", cpu="1", gpus=1),
            "metadata": {**pod_manifest("first")["metadata"], "creationTimestamp": "2023-11-14T22:00:00Z"},
        },
        {
            **pod_manifest("second", cpu="1", gpus=2),
            "metadata": {**pod_manifest("second")["metadata"], "creationTimestamp": "2023-11-14T22:01:00Z"},
        },
        pod_manifest("someone-else", cpu="1", gpus=1)
        | {"spec": {**pod_manifest("x")["spec"], "schedulerName": "default-scheduler"}},
    ]
    rows, model = pending_rows(nodes, pods, [], load_settings(), None, None, 128, now=NOW)
    assert model == "shipped openb-default"
    assert [r["name"] for r in rows] == ["first", "second"]
    first, second = rows
    assert first["waiting_s"] == pytest.approx(NOW - 1_699_999_200.0)
    assert 0 < first["p50_s"] <= first["p90_s"] < math.inf
    # second needs both GPUs, first takes one of them before it: it waits longer.
    assert second["p50_s"] > first["p50_s"]


def test_pending_says_what_is_wrong_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    cases: list[tuple[list[str], Callable[[str], bool]]] = [
        (["pending", "--kubeconfig", str(tmp_path / "none")], lambda e: "no such file" in e),
        (["pending", "--samples", "0"], lambda e: "--samples" in e),
        (["pending", "--kubeconfig", str(kubeconfig)], lambda e: "listing nodes" in e),
    ]
    for argv, said in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err, err
        assert said(err), err


class Listing:
    """``BlockingClient.json`` answering ``answer`` (raised when an exception)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    def json(self, method: str, path: str, **_: Any) -> Any:
        self.asked.append((method, path))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param({"items": [{"metadata": {"name": "a"}}]}, [{"metadata": {"name": "a"}}], id="items"),
        pytest.param({"items": None}, [], id="null-items-are-none"),
        pytest.param({"items": [1]}, "listing nodes: items: not a list of objects", id="items-not-objects"),
        pytest.param("<html>", "listing nodes: items: not a list of objects", id="not-a-listing"),
        pytest.param(
            ApiException(status=403, reason="Forbidden"), "listing nodes: api: HTTP 403 Forbidden", id="403"
        ),
        pytest.param(
            ConnectionRefusedError("[Errno 111] refused\nmore"),
            "listing nodes: api: ConnectionRefusedError: [Errno 111] refused",
            id="refused-in-one-line",
        ),
    ],
)
def test_pending_lists_by_path_and_names_what_failed(answer: Any, expected: Any) -> None:
    http = Listing(answer)
    if isinstance(expected, list):
        assert _items(http, "/api/v1/nodes", "nodes") == expected
    else:
        with pytest.raises(SchedulerInputError) as raised:
            _items(http, "/api/v1/nodes", "nodes")
        assert str(raised.value) == expected
    assert http.asked == [("GET", "/api/v1/nodes")]
