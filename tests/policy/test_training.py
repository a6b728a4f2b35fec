"""A few steps of each training script: they run, log and write loadable checkpoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from scheduler.learn import dqn, es, imitation, ppo
from scheduler.learn.episode import EpisodeSpec, make_episode, run_episode
from scheduler.learn.options import DqnArgs, EsArgs, ImitationArgs, PpoArgs
from scheduler.learn.torch_score import torch_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.policy.checkpoint import load_checkpoint
from scheduler.policy.config import ScorerKind
from scheduler.policy.weights import default_checkpoint_path
from tests.policy.test_plugin import write_trace


def test_imitation_then_es_then_ppo_smoke(tmp_path: Path) -> None:
    pods, _ = write_trace(tmp_path)
    traces = (str(pods),)
    imitated = imitation.main(
        ImitationArgs(
            traces=traces,
            episodes_per_trace=1,
            node_fraction=0.02,
            synthetic_episodes=0,
            sample_every=1,
            epochs=1,
            out=tmp_path / "imitation",
            quiet=True,
        )
    )
    assert load_checkpoint(imitated).manifest["training"]["decisions"] > 0
    evolved = es.main(
        EsArgs(
            init=imitated,
            traces=traces,
            node_fraction=0.02,
            generations=1,
            pairs=1,
            workers=1,
            out=tmp_path / "es",
            quiet=True,
        )
    )
    history = load_checkpoint(evolved).manifest["training"]["history"]
    assert len(history) == 1
    assert history[0]["center_fitness"] > 0
    tuned = ppo.main(
        PpoArgs(
            traces=traces,
            node_fraction=0.02,
            init=evolved,
            total_steps=16,
            num_steps=8,
            minibatch_size=4,
            update_epochs=1,
            out=tmp_path / "ppo",
            quiet=True,
        )
    )
    assert load_checkpoint(tuned).config.value_head
    assert any((tmp_path / "ppo" / "tensorboard").iterdir())


@pytest.mark.parametrize("kind", ["flat-mlp", "pooled-gnn"])
def test_ppo_trains_and_evaluates_a_fixed_action_kind(tmp_path: Path, kind: ScorerKind) -> None:
    """The seed projects' designs (the whole cluster -> one logit per node position):
    PPO from scratch writes a checkpoint that moved off its zero-initialised last layer
    and schedules an episode in torch."""
    pods, _ = write_trace(tmp_path)
    trained = ppo.main(
        PpoArgs(
            traces=(str(pods),),
            node_fraction=0.02,
            kind=kind,
            total_steps=16,
            num_steps=8,
            minibatch_size=4,
            update_epochs=1,
            out=tmp_path / "ppo",
            quiet=True,
        )
    )
    loaded = load_checkpoint(trained)
    episode = make_episode(EpisodeSpec(str(pods), seed=7, node_fraction=0.02))
    assert (loaded.config.kind, loaded.config.max_nodes) == (kind, len(episode.nodes))
    assert loaded.manifest["training"]["decisions"] == 16
    last = loaded.model.head[-1]
    assert isinstance(last, torch.nn.Linear)
    assert last.weight.abs().sum() > 0
    profile = torch_profile(ProfileContext(typical_pods=episode.typical), trained)
    assert run_episode(episode, profile).saturation_allocation() > 0


@pytest.mark.parametrize("kind", ["gnn", "mlp", "flat-mlp", "pooled-gnn"])
def test_dqn_trains_and_evaluates_each_kind(tmp_path: Path, kind: ScorerKind) -> None:
    """A Q-network of each kind learns from its replay buffer (its weights move off
    their start), is saved as a checkpoint whose logits are Q-values, and schedules an
    episode in torch."""
    pods, _ = write_trace(tmp_path)
    args = DqnArgs(
        traces=(str(pods),),
        node_fraction=0.02,
        frag_coef=1.0,  # a reward from the first step (no pod fails this early)
        kind=kind,
        total_steps=24,
        buffer_size=16,
        learning_starts=8,
        train_frequency=2,
        target_network_frequency=8,
        batch_size=4,
        learning_rate=1e-2,
        out=tmp_path / "dqn",
        quiet=True,
    )
    torch.manual_seed(args.seed)
    episode = make_episode(EpisodeSpec(str(pods), seed=args.seed * 1000, node_fraction=0.02))
    start = dqn.q_network(args, len(episode.nodes)).state_dict()
    trained = dqn.main(args)
    loaded = load_checkpoint(trained)
    assert loaded.config.kind == kind
    assert (loaded.config.prior_weight, loaded.config.reserve_term, loaded.config.score_step) == (
        0.0,
        False,
        0.0,
    )
    assert loaded.manifest["training"]["decisions"] == 24
    assert loaded.manifest["training"]["final_td_loss"] is not None
    moved = [
        name for name, tensor in loaded.model.state_dict().items() if not torch.equal(tensor, start[name])
    ]
    assert moved
    episode = make_episode(EpisodeSpec(str(pods), seed=7, node_fraction=0.02))
    profile = torch_profile(ProfileContext(typical_pods=episode.typical), trained)
    assert run_episode(episode, profile).saturation_allocation() > 0


@pytest.mark.parametrize(
    ("step", "wanted"),
    [(0, 1.0), (50, 0.525), (100, 0.05), (400, 0.05)],
)
def test_dqn_exploration_decays_linearly_then_holds(step: int, wanted: float) -> None:
    args = DqnArgs(total_steps=200, start_e=1.0, end_e=0.05, exploration_fraction=0.5)
    assert dqn.epsilon(args, step) == pytest.approx(wanted)


@pytest.mark.slow
def test_es_on_ray_trains_the_checkpoint_local_processes_train(tmp_path: Path, ray_cluster: str) -> None:
    """A tiny ES generation with its members on a local Ray cluster: the same parameter
    vector, bit for bit, and the same fitness history as with two local processes."""
    pods, _ = write_trace(tmp_path)
    trained = {}
    for name, where in (("local", {"workers": 2}), ("ray", {"ray_address": ray_cluster})):
        args = EsArgs(
            init=default_checkpoint_path(),
            traces=(str(pods),),
            node_fraction=0.02,
            generations=2,
            pairs=2,
            out=tmp_path / name,
            quiet=True,
            **where,  # type: ignore[arg-type]
        )
        trained[name] = load_checkpoint(es.main(args))
    local, on_ray = trained["local"], trained["ray"]
    assert np.array_equal(es.get_vector(on_ray.model), es.get_vector(local.model))
    assert not np.array_equal(es.get_vector(local.model), es.get_vector(load_checkpoint().model))  # it moved
    history = [
        [{k: v for k, v in g.items() if k != "seconds"} for g in c.manifest["training"]["history"]]
        for c in (local, on_ray)
    ]
    assert history[0] == history[1]
