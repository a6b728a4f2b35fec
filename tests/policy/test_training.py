"""A few steps of each training script: they run, log and write loadable checkpoints."""

from __future__ import annotations

from pathlib import Path

from scheduler.learn import es, imitation, ppo
from scheduler.learn.options import EsArgs, ImitationArgs, PpoArgs
from scheduler.policy.checkpoint import load_checkpoint
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
