"""The gnn plugin: the same scores offline and live, numpy inference equal to the
torch model, FGD's decisions from an untrained scorer, and the profile by name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from scheduler.framework.profile import schedule_pod
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.plugins.profiles import build_profile, default_filters
from scheduler.plugins.registry import ProfileContext
from scheduler.policy import inference
from scheduler.policy.checkpoint import CheckpointError, save_checkpoint
from scheduler.policy.config import ScorerConfig
from scheduler.policy.graph import GraphBuilder, feasible_nodes
from scheduler.policy.inference import CachedScorer
from scheduler.policy.model import NodeScorer, numpy_scorer
from scheduler.policy.plugin import GnnScore
from scheduler.policy.scoring import integer_scores
from scheduler.sim.replay import trace_typical_pods
from scheduler.sim.trace import load_nodes, load_pods, trace_node_manifest, trace_pod_manifest
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import PodShape, TypicalPods
from tests.builders import make_node, make_pod, make_state

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n{i},{cpu},{mem},{gpus},{model}\n"
    for i, (cpu, mem, gpus, model) in enumerate(
        [(32000, 131072, 4, "T4"), (16000, 65536, 2, "T4"), (96000, 393216, 8, "G2"), (8000, 32768, 0, "")]
        * 3
    )
)
PODS = [
    (4000, 8192, 1, 500),
    (12000, 32768, 1, 1000),
    (2000, 4096, 0, 0),
    (6000, 12288, 1, 250),
    (3000, 8192, 2, 1000),
    (8000, 16384, 1, 810),
    (1000, 2048, 1, 470),
] * 6


def write_trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODES)
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        + "".join(f"p{i:03d},{c},{m},{g},{gm}\n" for i, (c, m, g, gm) in enumerate(PODS))
    )
    return pods, nodes


def random_scorer(seed: int = 3) -> NodeScorer:
    """A scorer whose head and reserve term are not zero (an untrained one is FGD)."""
    torch.manual_seed(seed)
    model = NodeScorer(ScorerConfig(hidden=16, head_hidden=16, score_step=0.0))
    with torch.no_grad():
        for parameter in model.head.parameters():
            parameter.normal_(0.0, 0.5)
        assert model.reserve is not None
        model.reserve.weight.fill_(1.5)
    return model


def test_replayed_and_live_states_give_identical_scores(tmp_path: Path) -> None:
    """One golden case both ways: the plugin's scores inside a replay (state built from
    trace rows, caches warm from every earlier pod) equal a fresh plugin's on a state
    rebuilt from node and pod manifests, as the live operator builds it."""
    pods_csv, nodes_csv = write_trace(tmp_path)
    pods, nodes = load_pods(pods_csv), load_nodes(nodes_csv)
    typical = trace_typical_pods(pods)
    model = random_scorer()
    replayed = ClusterState(nodes)
    offline = GnnScore(numpy_scorer(model), typical)
    profile = build_profile("best-fit", ProfileContext())
    rng = np.random.default_rng(0)
    for pod in pods[:-1]:
        nodes_now = feasible_nodes(replayed, pod, default_filters())
        if nodes_now.size:
            offline.logits(replayed, pod, nodes_now)  # warms the caches as a replay does
        decision = schedule_pod(replayed, pod, profile, rng)
        if decision.scheduled:
            replayed.place(pod, decision.node, decision.gpu_indices)

    live = ClusterState(node_from_manifest(trace_node_manifest(n.name, *_node_row(n))) for n in nodes)
    for placement in replayed.pods():
        pod = placement.pod
        manifest = trace_pod_manifest(
            pod.name, pod.cpu_milli, pod.memory >> 20, pod.gpu.count, pod.gpu.milli_per_gpu
        )
        live.place(pod_from_manifest(manifest), placement.node, placement.gpu_indices)
    last = pods[-1]
    candidates = feasible_nodes(live, last, default_filters())
    assert candidates.size > 1
    assert np.array_equal(candidates, feasible_nodes(replayed, last, default_filters()))
    offline_scores = offline.logits(replayed, last, candidates)
    live_scores = GnnScore(numpy_scorer(model), typical).logits(live, last, candidates)
    np.testing.assert_allclose(offline_scores, live_scores, rtol=0, atol=1e-4)
    assert int(np.argmax(offline_scores)) == int(np.argmax(live_scores))


def _node_row(node):  # type: ignore[no-untyped-def]
    return (
        node.allocatable["cpu"],
        node.allocatable["memory"] >> 20,
        node.gpu_count,
        node.gpu_model,
    )


def test_embeddings_of_nodes_with_unequal_in_degrees_are_the_torch_layers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The GATv2 layer in numpy pads each node's incoming edges to the largest in-degree:
    nodes with fewer (here one to five, self loop included) get the torch layer's
    embedding, at a start and after a placement; mixing in chunks changes no bit."""
    state = make_state(
        [make_node(f"a{i}", cpu="8", memory="32Gi", gpus=2, model="T4") for i in range(6)]
        + [make_node(f"b{i}", cpu="16", memory="64Gi", gpus=4, model="V100") for i in range(2)]
        + [make_node("c0", cpu="4", memory="8Gi")]
    )
    model = random_scorer(5)
    typical = TypicalPods((PodShape(4000, 500, 1),), (1.0,))
    builder = GraphBuilder(typical)
    cached = CachedScorer(numpy_scorer(model), builder)

    def torch_embeddings() -> np.ndarray[tuple[int, int], np.dtype[np.float32]]:
        with torch.no_grad():
            return model.embed(
                torch.from_numpy(builder.node_features(state)), torch.from_numpy(builder.edge_index)
            ).numpy()

    np.testing.assert_allclose(cached.embeddings(state), torch_embeddings(), rtol=1e-5, atol=1e-6)
    assert sorted(set(np.bincount(builder.edge_index[1], minlength=len(state)).tolist())) == [0, 1, 4]
    state.place(make_pod("p", cpu="2", memory="4Gi", gpus=1), "a2", (0,))
    np.testing.assert_allclose(cached.embeddings(state), torch_embeddings(), rtol=1e-5, atol=1e-6)

    whole = CachedScorer(numpy_scorer(model), GraphBuilder(typical)).embeddings(state)
    monkeypatch.setattr(inference, "_MIX_EDGES", 5)  # one target a chunk
    chunked = CachedScorer(numpy_scorer(model), GraphBuilder(typical)).embeddings(state)
    assert chunked.tobytes() == whole.tobytes()


def test_numpy_inference_matches_the_torch_model(tmp_path: Path) -> None:
    pods_csv, nodes_csv = write_trace(tmp_path)
    pods, nodes = load_pods(pods_csv), load_nodes(nodes_csv)
    model = random_scorer(5)
    state = ClusterState(nodes)
    builder = GraphBuilder(trace_typical_pods(pods))
    cached = CachedScorer(numpy_scorer(model), builder)
    rng = np.random.default_rng(1)
    checked = 0
    for pod in pods:
        candidates = feasible_nodes(state, pod, default_filters())
        if candidates.size == 0:
            continue
        fast = cached.logits(state, pod, candidates)
        reference = GraphBuilder(builder.typical).build(state, pod, candidates)
        with torch.no_grad():
            slow = model(
                torch.from_numpy(reference.node_x),
                torch.from_numpy(reference.edge_index),
                torch.from_numpy(candidates),
                torch.from_numpy(reference.pair_x),
                torch.from_numpy(reference.pod_x),
            ).numpy()
        np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-4)
        checked += 1
        node = int(candidates[rng.integers(candidates.size)])
        gpus: tuple[int, ...] = ()
        if pod.gpu.milli_per_gpu:
            free = state.gpu_free_milli[node]
            gpus = tuple(int(g) for g in np.flatnonzero(free >= pod.gpu.milli_per_gpu)[: pod.gpu.count])
        state.place(pod, state.nodes[node].name, gpus)
    assert checked > 20


@pytest.mark.parametrize("seed", [1, 2])
def test_an_untrained_scorer_decides_as_fgd(tmp_path: Path, seed: int) -> None:
    """Zero head, zero reserve weight: the logit is FGD's score, ties to the first node."""
    pods_csv, nodes_csv = write_trace(tmp_path)
    pods, nodes = load_pods(pods_csv), load_nodes(nodes_csv)
    typical = trace_typical_pods(pods)
    folder = save_checkpoint(NodeScorer(ScorerConfig()), tmp_path / "zero")
    order = np.random.default_rng(seed).permutation(len(pods))
    states = {name: ClusterState(nodes) for name in ("fgd", "gnn")}
    profiles = {
        "fgd": build_profile("fgd", ProfileContext(typical_pods=typical)),
        "gnn": build_profile("gnn", ProfileContext(typical_pods=typical, checkpoint=folder)),
    }
    rng = np.random.default_rng(0)
    for index in order:
        pod = pods[int(index)]
        chosen = {}
        for name, state in states.items():
            decision = schedule_pod(state, pod, profiles[name], rng)
            chosen[name] = decision.node
            if decision.scheduled:
                state.place(pod, decision.node, decision.gpu_indices)
        assert chosen["gnn"] == chosen["fgd"], pod.name


def test_the_profile_refuses_a_bad_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such checkpoint folder"):
        build_profile("gnn", ProfileContext(checkpoint=tmp_path / "missing"))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param([1.0, 3.0, 2.0], [0, 100, 49], id="the best gets 100, the rest scale below"),
        pytest.param([2.0, 5.0, 5.0], [0, 100, 100], id="ties for the best both get 100"),
        pytest.param([4.0, 4.0], [100, 100], id="all equal: all 100"),
        pytest.param([1.0, float("nan"), 3.0], [49, 0, 100], id="NaN is the worst"),
        pytest.param([1.0, float("inf"), 3.0], [0, 100, 49], id="+inf is the best, the rest scale below"),
        pytest.param([float("-inf"), 1.0, 3.0], [0, 49, 100], id="-inf ranks below every finite value"),
        pytest.param([float("nan"), float("nan")], [100, 100], id="all NaN: all equal"),
    ],
)
def test_integer_scores_keep_the_choice(values: list[float], expected: list[int]) -> None:
    assert integer_scores(np.array(values, np.float32)).tolist() == expected


def test_kept_pair_features_give_the_logits_made_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pair features are kept per pod request and node version: a node whose embedding
    alone changed (a neighbour took a pod) gets its logit again from the kept row. Over
    a trace's placements the logits equal, bit for bit, those of a scorer that keeps no
    pair features; with room for two requests' rows, a third takes the least recently
    used one's."""
    pods_csv, nodes_csv = write_trace(tmp_path)
    pods, nodes = load_pods(pods_csv), load_nodes(nodes_csv)
    scorer = numpy_scorer(random_scorer(7))
    state = ClusterState(nodes)
    typical = trace_typical_pods(pods)
    kept = CachedScorer(scorer, GraphBuilder(typical))
    afresh = CachedScorer(scorer, GraphBuilder(typical), pair_cache_bytes=0)
    compared = 0
    for round_, trace_pod in [(r, p) for r in range(3) for p in pods]:
        pod = replace(trace_pod, name=f"{trace_pod.name}-{round_}")
        candidates = feasible_nodes(state, pod, default_filters())
        if candidates.size == 0:
            continue
        assert (
            kept.logits(state, pod, candidates).tobytes() == afresh.logits(state, pod, candidates).tobytes()
        )
        compared += 1
        node = int(candidates[0])
        gpus = tuple(
            int(g)
            for g in np.flatnonzero(state.gpu_free_milli[node] >= pod.gpu.milli_per_gpu)[: pod.gpu.count]
        )
        state.place(pod, state.nodes[node].name, gpus if pod.gpu.milli_per_gpu else ())
    assert compared > len(pods)
    assert all(entry.pair_x is None for entry in afresh._logits.values())
    assert all(entry.pair_x is not None for entry in kept._logits.values())

    row_bytes = len(state) * len(inference.PAIR_FEATURES) * 4
    budget = CachedScorer(scorer, GraphBuilder(typical), pair_cache_bytes=2 * row_bytes)
    shapes = [pods[0], pods[2], pods[3]]  # three requests
    for pod in shapes:
        budget.logits(state, pod, np.arange(len(state)))
    holding = [entry.pair_x is not None for entry in budget._logits.values()]
    assert holding == [False, True, True]
