"""The start forecast's arithmetic on small clusters: with known (oracle) lifetimes the
start is exactly when enough residents have left; with distributions, the quantiles of
that moment."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from scheduler.lifetimes.start_forecast import RemainingSampler, StartForecast, forecast_start
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.state.cluster_state import ClusterState
from tests.builders import make_node, make_pod, make_state

FILTERS = build_profile("default", ProfileContext()).filters


def oracle(remaining: Mapping[str, float]) -> RemainingSampler:
    """Each pod's one true remaining lifetime, at every level."""

    def sample(pods: Sequence[Pod], levels: np.ndarray) -> np.ndarray:
        return np.repeat(np.array([remaining[p.key] for p in pods], float)[:, None], levels.size, axis=1)

    return sample


def exponential(means: Mapping[str, float]) -> RemainingSampler:
    """Exponential remaining lifetimes (memoryless: the age does not matter)."""

    def sample(pods: Sequence[Pod], levels: np.ndarray) -> np.ndarray:
        mean = np.array([means[p.key] for p in pods], float)[:, None]
        return -mean * np.log1p(-levels[None, :])

    return sample


def forecast(state: ClusterState, pod: Pod, sampler: RemainingSampler, **options: object) -> StartForecast:
    return forecast_start(state, pod, FILTERS, sampler, **options)  # type: ignore[arg-type]


def gpu_node_with_residents(lifetimes: Sequence[float]) -> tuple[ClusterState, dict[str, float]]:
    """One 4-GPU node (GPUs given whole), a 1-GPU resident on each GPU."""
    node = make_node("n1", cpu="16", memory="64Gi", gpus=4, hami=False)
    residents = [make_pod(f"r{i}", cpu="1", gpus=1) for i in range(len(lifetimes))]
    state = make_state([node], [(p, "n1") for p in residents])
    return state, {p.key: t for p, t in zip(residents, lifetimes, strict=True)}


@pytest.mark.parametrize(("gpus", "start"), [(1, 100.0), (2, 200.0), (3, 300.0), (4, 400.0)])
def test_a_gpu_pod_starts_when_as_many_gpus_have_been_given_back(gpus: int, start: float) -> None:
    state, remaining = gpu_node_with_residents([300.0, 100.0, 400.0, 200.0])
    result = forecast(state, make_pod("x", cpu="1", gpus=gpus), oracle(remaining))
    assert (result.p50_s, result.p90_s) == (start, start)
    assert result.candidate_nodes == 1


def test_cpu_and_memory_both_must_fit() -> None:
    node = make_node("n1", cpu="4", memory="8Gi")
    small_cpu_big_memory = make_pod("a", cpu="1", memory="6Gi")
    big_cpu = make_pod("b", cpu="3", memory="1Gi")
    state = make_state([node], [(small_cpu_big_memory, "n1"), (big_cpu, "n1")])
    remaining = {"default/a": 500.0, "default/b": 50.0}
    # 2 CPUs free after b leaves, but 4 GiB of memory only after a leaves too.
    assert forecast(state, make_pod("x", cpu="2", memory="4Gi"), oracle(remaining)).p50_s == 500.0
    # 1 GiB: only b's CPUs are missing.
    assert forecast(state, make_pod("x", cpu="2", memory="1Gi"), oracle(remaining)).p50_s == 50.0


def test_the_earliest_node_wins() -> None:
    nodes = [make_node(n, cpu="2", memory="4Gi") for n in ("n1", "n2")]
    pods = [make_pod("a", cpu="2"), make_pod("b", cpu="2")]
    state = make_state(nodes, [(pods[0], "n1"), (pods[1], "n2")])
    result = forecast(state, make_pod("x", cpu="1"), oracle({"default/a": 900.0, "default/b": 30.0}))
    assert result.p50_s == 30.0
    assert result.candidate_nodes == 2


def test_a_share_waits_for_a_gpu_with_enough_cores() -> None:
    node = make_node("n1", cpu="16", memory="64Gi", gpus=2)  # HAMi: GPUs shared
    holders = [make_pod("h0", cpu="1", gpus=1, gpu_milli=600), make_pod("h1", cpu="1", gpus=1, gpu_milli=700)]
    state = make_state([node], [(holders[0], "n1"), (holders[1], "n1")])
    remaining = {"default/h0": 80.0, "default/h1": 20.0}
    # 40% fits on either GPU now? No: 40% and 30% are free; 50% needs h1 (the 70%) gone.
    assert forecast(state, make_pod("x", cpu="1", gpus=1, gpu_milli=500), oracle(remaining)).p50_s == 20.0
    assert forecast(state, make_pod("x", cpu="1", gpus=1, gpu_milli=800), oracle(remaining)).p50_s == 20.0
    # A whole GPU needs no one on it; two whole GPUs, both gone.
    assert forecast(state, make_pod("x", cpu="1", gpus=1), oracle(remaining)).p50_s == 20.0
    assert forecast(state, make_pod("x", cpu="1", gpus=2), oracle(remaining)).p50_s == 80.0


def test_nodes_ruled_out_for_other_reasons_than_room_are_not_waited_for() -> None:
    tainted = make_node(
        "n1", cpu="4", memory="8Gi", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]
    )
    plain = make_node("n2", cpu="4", memory="8Gi")
    state = make_state([tainted, plain], [(make_pod("a", cpu="4"), "n1"), (make_pod("b", cpu="4"), "n2")])
    result = forecast(state, make_pod("x", cpu="1"), oracle({"default/a": 10.0, "default/b": 99.0}))
    assert result.p50_s == 99.0
    assert result.candidate_nodes == 1


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("x", cpu="64"), id="larger than any node"),
        pytest.param(make_pod("x", cpu="1", node_selector={"disk": "nvme"}), id="no node matches"),
        pytest.param(make_pod("x", cpu="1", gpus=8), id="more GPUs than any node has"),
    ],
)
def test_a_pod_that_no_departure_can_place_never_starts(pod: Pod) -> None:
    state, remaining = gpu_node_with_residents([10.0, 20.0])
    result = forecast(state, pod, oracle(remaining))
    assert math.isinf(result.p50_s)
    assert math.isinf(result.p90_s)


def test_a_resident_that_never_ends_keeps_its_room() -> None:
    state, remaining = gpu_node_with_residents([math.inf, 100.0, 200.0, 300.0])
    pod = make_pod("x", cpu="1", gpus=3)
    assert forecast(state, pod, oracle(remaining)).p50_s == 300.0
    assert math.isinf(forecast(state, make_pod("x", cpu="1", gpus=4), oracle(remaining)).p50_s)


def test_pods_ahead_take_the_room_first() -> None:
    state, remaining = gpu_node_with_residents([100.0, 200.0, 300.0, 400.0])
    first = make_pod("first", cpu="1", gpus=1)
    second = make_pod("second", cpu="1", gpus=1)
    pair = make_pod("pair", cpu="1", gpus=2)
    remaining |= {first.key: 1000.0, second.key: 50.0, pair.key: 10.0}
    pod = make_pod("x", cpu="1", gpus=1)
    assert forecast(state, pod, oracle(remaining)).p50_s == 100.0
    # first takes the GPU freed at 100; x the one freed at 200.
    assert forecast(state, pod, oracle(remaining), ahead=[first]).p50_s == 200.0
    # second takes the one freed at 200 and gives it back at 250.
    assert forecast(state, pod, oracle(remaining), ahead=[first, second]).p50_s == 250.0
    assert forecast(state, pod, oracle(remaining), ahead=[first, second], max_ahead=1).p50_s == 200.0
    # pair waits for two GPUs (300); the one freed at 200 is x's meanwhile (the FIFO
    # pass: a pod that fits goes, whoever waits before it).
    assert forecast(state, pod, oracle(remaining), ahead=[first, pair]).p50_s == 200.0
    # Two of x's size: x is the third to get a GPU (300).
    later = make_pod("x", cpu="1", gpus=2)
    assert forecast(state, later, oracle(remaining), ahead=[first]).p50_s == 300.0


def test_with_one_resident_the_start_is_its_remaining_lifetime() -> None:
    state, _ = gpu_node_with_residents([0.0] * 4)
    means = {f"default/r{i}": 100.0 * (i + 1) for i in range(4)}
    result = forecast(state, make_pod("x", cpu="1", gpus=1), exponential(means), samples=256)
    # The first of four exponentials to end is exponential with the summed rates.
    rate = sum(1 / m for m in means.values())
    assert result.p50_s == pytest.approx(math.log(2) / rate, rel=0.12)
    assert result.p90_s == pytest.approx(math.log(10) / rate, rel=0.12)


def test_waiting_for_everyone_is_the_latest_of_them() -> None:
    state, _ = gpu_node_with_residents([0.0] * 2)
    means = {"default/r0": 100.0, "default/r1": 100.0}
    result = forecast(state, make_pod("x", cpu="1", gpus=4), exponential(means), samples=512)
    # P(max <= t) = (1 - e^-t/100)^2.
    for q, value in ((0.5, result.p50_s), (0.9, result.p90_s)):
        assert value == pytest.approx(-100 * math.log(1 - math.sqrt(q)), rel=0.1)


def test_the_same_seed_gives_the_same_forecast() -> None:
    state, _ = gpu_node_with_residents([0.0] * 4)
    means = {f"default/r{i}": 100.0 * (i + 1) for i in range(4)}
    pod = make_pod("x", cpu="1", gpus=2)
    one, two = (forecast(state, pod, exponential(means), seed=7) for _ in range(2))
    np.testing.assert_array_equal(one.samples_s, two.samples_s)
    other = forecast(state, pod, exponential(means), seed=8)
    assert not np.array_equal(one.samples_s, other.samples_s)


def test_a_wait_is_within_a_quantile_exactly_when_fewer_samples_come_before_it() -> None:
    result = StartForecast(np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]))
    assert (result.p50_s, result.p90_s) == (50.0, 90.0)
    for wait in (5.0, 50.0, 50.5, 90.0, 95.0):
        for q in (0.5, 0.9):
            assert (wait <= result.quantile(q)) == (result.share_before(wait) < q)


def test_only_the_nodes_that_fit_soonest_are_sampled() -> None:
    nodes = [make_node(f"n{i:02d}", cpu="2", memory="4Gi") for i in range(40)]
    residents = [make_pod(f"r{i:02d}", cpu="2") for i in range(40)]
    state = make_state(nodes, [(p, f"n{i:02d}") for i, p in enumerate(residents)])
    remaining = {p.key: 100.0 + i for i, p in enumerate(residents)}
    result = forecast(state, make_pod("x", cpu="1"), oracle(remaining), max_nodes=5)
    assert (result.candidate_nodes, result.modelled_nodes) == (40, 5)
    assert result.p50_s == 100.0


def test_cost_on_a_large_cluster() -> None:
    """Bounded by samples x residents of ``max_nodes`` nodes x the pods ahead, or the
    time given to those: printed with ``-s`` (the figures docs/lifetimes.md quotes)."""
    nodes = [make_node(f"n{i:04d}", cpu="64", memory="256Gi", gpus=8, hami=False) for i in range(1000)]
    placed = []
    for i in range(1000):
        for g in range(8):
            placed.append((make_pod(f"r{i:04d}-{g}", cpu="4", memory="16Gi", gpus=1), f"n{i:04d}"))
        placed += [(make_pod(f"c{i:04d}-{j}", cpu="2", memory="8Gi"), f"n{i:04d}") for j in range(8)]
    state = make_state(nodes, placed)
    rng = np.random.default_rng(0)
    means = {p.key: float(rng.uniform(60, 86400)) for p, _ in placed}
    ahead = [make_pod(f"a{i}", cpu="1", gpus=2) for i in range(32)]
    means |= {p.key: 3600.0 for p in ahead}
    pod = make_pod("x", cpu="4", gpus=4)
    timings = {}
    cases: tuple[tuple[str, dict[str, object]], ...] = (
        ("alone", {}),
        ("8 ahead", {"ahead": ahead[:8]}),
        ("32 ahead", {"ahead": ahead}),
        ("32 ahead, 0.1 s for them (live)", {"ahead": ahead, "ahead_time_s": 0.1}),
    )
    for label, options in cases:
        forecast(state, pod, exponential(means), **options)  # warm
        started = time.perf_counter()
        result = forecast(state, pod, exponential(means), **options)
        timings[label] = time.perf_counter() - started
        assert result.modelled_nodes == 32
        assert math.isfinite(result.p90_s)
    print(
        "start forecast, 1,000 8-GPU nodes, 16,000 residents, 128 samples, 32 nodes sampled: "
        + ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in timings.items())
    )
